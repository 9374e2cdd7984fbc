"""Index directories: written atomically, opened by what their ``meta.json`` says.

Every command that writes a directory goes through :func:`atomic_dir` (or
:func:`replace_dir` for a folder staged elsewhere), so one rule holds for all of them: a
target is replaced only when it is empty or already a ragshield index; a file, or a folder
holding anything else, is an :class:`~ragshield.errors.InputError` and stays untouched.

A save writes ``.NAME.rs-tmp-PID-XXXX`` next to the target, moves an old index aside to
``.NAME.rs-old-PID-XXXX`` and renames the new one into place. A process killed in between
leaves those behind; :func:`recover` (run on every open and save) puts the old index back
when the target is missing and removes stale temp folders — only folders with ragshield's
names, holding only index files, left by a process that is gone and older than this one.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragshield.errors import DataFormatError, InputError
from ragshield.store.base import VectorStore

log = logging.getLogger(__name__)

# What a FAISS save or a pgvector pointer writes; a leftover folder holding anything else
# is not ours to delete.
INDEX_FILES = frozenset(
    {"meta.json", "index.faiss", "vectors.npy", "passages.jsonl", "quarantine.jsonl", "novelty.npy"}
)
_STARTED = time.time()  # leftovers newer than this process may belong to a live save


def is_index_dir(path: str | Path) -> bool:
    """True when ``path`` is a folder whose ``meta.json`` is ragshield index metadata."""
    meta_path = Path(path) / "meta.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(meta, dict) and "dim" in meta


def check_out_dir(path: str | Path, *, probe: bool = False) -> Path:
    """The absolute target for an index written to ``path``, or an InputError saying why
    it may not be written there. Call it before any expensive work (``probe`` also checks
    that the parent folder is writable), so a bad ``--out`` fails before encoding."""
    given = Path(path)
    try:
        target = given.resolve()
        too_long = next((c for c in target.parts if len(os.fsencode(c)) > 255), None)
        if too_long is not None:  # would fail only after the parent folders were made
            raise InputError(f"cannot write an index at {str(given)[:120]}...: a name is too long")
        if not target.name:
            raise InputError(f"cannot write an index at {given}: name a folder, e.g. --out index")
        cwd = Path.cwd().resolve()
        if target == cwd or target in cwd.parents:
            raise InputError(
                f"cannot write an index at {given}: it is the current directory (or holds "
                f"it); name a folder inside it, e.g. --out {given / 'index'}"
            )
        if target.exists():
            if not target.is_dir():
                raise InputError(
                    f"{given} exists and is not a folder: refusing to replace it with an "
                    "index (nothing was written); choose another --out"
                )
            if not is_index_dir(target) and any(target.iterdir()):
                raise InputError(
                    f"{given} exists and is not a ragshield index (no readable meta.json): "
                    "refusing to replace it (nothing was written); choose a new or empty folder"
                )
            if probe:
                writable_ancestor(target.parent, f"cannot write {given}")
        else:
            writable_ancestor(target.parent, f"cannot create {given}", probe=probe)
    except OSError as exc:
        raise InputError(f"cannot write {given}: {exc.strerror or exc}") from None
    return target


def writable_ancestor(path: Path, what: str, *, probe: bool = True) -> Path:
    """The nearest existing folder at or above ``path`` (where creating ``path`` starts),
    refused in one line, prefixed by ``what``, when it is a file or — with ``probe`` — when
    nothing can be created in it. The probe makes and removes a temporary folder there:
    ``os.access`` says yes to root on a read-only mount and for ``/proc``. One rule for an
    index's ``--out``, the eval and scan ``--out`` and ``--cache-dir``. A name longer than
    the file system allows is refused too: it would fail only after its parent folders were
    made (``--cache-dir user/new/<300 chars>`` left ``user/new``; #27 hostile pass)."""
    if any(len(os.fsencode(c)) > 255 for c in path.parts):
        raise InputError(
            f"{what}: {str(path)[:120]}... holds a name too long (nothing was written)"
        )
    ancestor = path
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{what}: {ancestor} is a file, not a folder (nothing was written)")
    if probe:
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".ragshield-probe-", dir=ancestor))
        except OSError as exc:
            raise InputError(
                f"{what}: {ancestor} is not writable ({exc.strerror or exc}); nothing was written"
            ) from None
    return ancestor


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temp sibling directory that replaces ``path`` only if the block succeeds,
    so an interrupted write never leaves a half-written index where a good one was, and
    never replaces anything but an empty folder or an index."""
    target = check_out_dir(path)
    recover(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(target, "tmp"), dir=target.parent))
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        yield tmp
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(stage: str | Path, path: str | Path) -> None:
    """Rename the finished folder ``stage`` to ``path`` (same file system), replacing an
    existing index only at the very end and only after checking it is one."""
    target, stage = check_out_dir(path), Path(stage)
    if not target.exists() or not any(target.iterdir()):
        os.replace(stage, target)  # POSIX rename replaces an empty folder atomically
        return
    old = target.with_name(f"{_prefix(target, 'old')}{secrets.token_hex(4)}")
    os.replace(target, old)
    try:
        os.replace(stage, target)
    except BaseException:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _prefix(target: Path, kind: str) -> str:
    return f".{target.name}.rs-{kind}-{os.getpid()}-"


def _pid_alive(pid: int) -> bool:
    if os.name != "posix":  # no safe liveness probe: treat every owner as alive
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to another user
        return True
    return True


def _only_index_files(folder: Path) -> bool:
    try:
        return all(
            e.name in INDEX_FILES and e.is_file(follow_symlinks=False) for e in os.scandir(folder)
        )
    except OSError:
        return False


def recover(path: str | Path) -> None:
    """Repair what a killed save left next to ``path``: restore the newest old index when
    ``path`` is missing, and delete stale temp (and superseded old) folders. A leftover
    counts as stale only if its name is ragshield's, its owner process is gone and it is
    older than this process; it is deleted only if it holds nothing but index files."""
    target = Path(path).absolute()
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    pattern = re.compile(rf"\.{re.escape(target.name)}\.rs-(tmp|old)-(\d+)-[a-z0-9_]+")
    temps: list[Path] = []
    olds: list[Path] = []
    for e in entries:
        m = pattern.fullmatch(e.name)
        if m is None or not e.is_dir(follow_symlinks=False):
            continue
        try:
            stale = not _pid_alive(int(m[2])) and e.stat().st_mtime < _STARTED
        except OSError:
            continue
        if stale:
            (temps if m[1] == "tmp" else olds).append(Path(e.path))
    legacy = target.with_name(f".{target.name}.old")  # name used before the rs- prefix
    if legacy.is_dir() and not legacy.is_symlink() and legacy.stat().st_mtime < _STARTED:
        olds.append(legacy)
    olds = sorted((o for o in olds if is_index_dir(o)), key=lambda o: o.stat().st_mtime)
    if not target.exists() and not target.is_symlink() and olds:
        os.replace(olds.pop(), target)
        log.warning("restored %s from the index a killed save had moved aside", target)
    if is_index_dir(target):
        temps += [o for o in olds if o != legacy]
    for leftover in temps:
        if _only_index_files(leftover):
            shutil.rmtree(leftover, ignore_errors=True)


def write_meta_dir(path: str | Path, meta: Mapping[str, Any]) -> None:
    with atomic_dir(path) as tmp:
        (tmp / "meta.json").write_text(json.dumps(dict(meta), indent=2), encoding="utf-8")


def read_meta(path: str | Path) -> dict[str, Any]:
    """The index metadata of ``path`` (after :func:`recover`), with ``dim`` checked."""
    if not Path(path).resolve().name:  # "/" has no name to recover beside (a ValueError)
        raise InputError(f"{path} is not a ragshield index (no meta.json).")
    recover(path)
    meta_path = Path(path) / "meta.json"
    if not meta_path.is_file():
        raise InputError(
            f"{path} is not a ragshield index (no meta.json). Build one with "
            "'ragshield index CORPUS --out DIR'."
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200]
        raise DataFormatError(meta_path, None, f"unreadable index metadata ({reason})") from None
    except OSError as exc:
        raise DataFormatError(meta_path, None, f"cannot read ({exc.strerror or exc})") from None
    if not isinstance(meta, dict) or "dim" not in meta:
        raise DataFormatError(meta_path, None, "index metadata lacks 'dim'")
    dim = meta["dim"]
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise DataFormatError(meta_path, None, f"'dim' must be a positive integer, got {dim!r}")
    return meta


def load_store(path: str | Path, *, uri: str | None = None) -> VectorStore:
    """Open the store an index directory describes (FAISS files, or a pgvector table).

    The kind comes from ``meta.json``; :data:`ragshield.store.registry.STORES` says which
    class opens it. ``uri`` (else ``RAGSHIELD_PG_URI``) overrides a server address the
    directory recorded.
    """
    from ragshield.store.registry import store_class

    path = Path(path)
    meta = read_meta(path)
    cls = store_class(str(meta.get("store", "faiss")), path / "meta.json")
    return cls.from_meta(meta, path, uri or os.environ.get("RAGSHIELD_PG_URI"))
