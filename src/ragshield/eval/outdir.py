"""Report folders the evaluation harnesses may write into: never one ragshield did not write.

Example::

    from ragshield.eval.outdir import claim_out_dir

    out = claim_out_dir("runs/poisoning", "poisoning", {"results.md", "results.json"})
    (out / "results.md").write_text(table)

Why: ``--out`` names a folder and the harness picks the file names inside it
(``results.md``, ``extraction.json``, ...), so pointed at a user's folder it would
silently replace their files of the same name. A folder is ours when it is new, empty or
carries :data:`MARKER` (written on the first claim). Only the marker counts: a user's folder
that happens to hold only a ``results.md`` is theirs (issue #27, root cause 3). Anything
else — and a folder that cannot be written — is refused with one line before a single byte
is written, so an hours-long run is not started only to fail at the end. The scan command keeps its own marker (``.ragshield-scan``, :mod:`ragshield.scan.run`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from ragshield.errors import InputError
from ragshield.store.persist import writable_ancestor

MARKER = ".ragshield-eval"


def check_results_dir(out_dir: str | os.PathLike[str], own_names: Collection[str] = ()) -> Path:
    """``out_dir`` as a :class:`Path` if the harness may write there; leaves nothing behind.

    ``own_names`` (the harness's file names) only shapes the message for an unmarked
    folder holding nothing else: it may be an old run, but only its owner can say so.
    """
    out = Path(out_dir)
    try:
        if not out.exists():
            writable_ancestor(out, f"--out {out}")
            return out
        if not out.is_dir():
            raise InputError(f"--out {out} is a file; choose a folder (nothing was written).")
        if (out / MARKER).is_file():
            writable_ancestor(out, f"--out {out}")
            return out
        entries = sorted(p.name for p in out.iterdir())
    except OSError as exc:
        raise InputError(f"--out {out}: {exc.strerror or exc} (nothing was written).") from None
    if entries:
        foreign = [name for name in entries if name not in own_names]
        named = foreign or entries  # name the user's own files first
        shown = ", ".join(named[:3]) + (", ..." if len(named) > 3 else "")
        hint = (
            ""
            if foreign
            else f" (an earlier run's? create {out / MARKER} to let ragshield replace them)"
        )
        raise InputError(
            f"--out {out} holds files ragshield did not write ({shown}){hint}; choose a new "
            f"or empty folder (nothing was written)."
        )
    writable_ancestor(out, f"--out {out}")
    return out


def claim_out_dir(
    out_dir: str | os.PathLike[str], harness: str, own_names: Collection[str] = ()
) -> Path:
    """Check ``out_dir`` (:func:`check_results_dir`), create it and mark it as ragshield's."""
    out = check_results_dir(out_dir, own_names)
    try:
        out.mkdir(parents=True, exist_ok=True)
        marker = out / MARKER
        if not marker.is_file():
            marker.write_text(f"written by ragshield eval {harness}\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write ({exc.strerror or exc}).") from None
    return out


def check_cache_dir(cache_dir: str | os.PathLike[str] | None) -> None:
    """Refuse a ``--cache-dir`` that is a file or cannot be created/written, before the run
    (it was a traceback after the whole encode; issue #27, root cause 10). A cache folder
    may hold anything else: ragshield only adds its own hashed file names to it."""
    if cache_dir is None:
        return
    path = Path(cache_dir)
    try:
        if path.exists() and not path.is_dir():
            raise InputError(f"--cache-dir {path} is a file; choose a folder.")
        writable_ancestor(path, f"--cache-dir {path}")
    except OSError as exc:
        raise InputError(f"--cache-dir {path}: {exc.strerror or exc}.") from None
