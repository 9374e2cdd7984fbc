"""Index directories: written atomically, opened by what their ``meta.json`` says."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ragshield.errors import DataFormatError, InputError
from ragshield.store.base import VectorStore


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temp sibling directory that replaces ``path`` only if the block succeeds,
    so an interrupted write never leaves a half-written index where a good one was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_meta_dir(path: str | Path, meta: Mapping[str, Any]) -> None:
    with atomic_dir(path) as tmp:
        (tmp / "meta.json").write_text(json.dumps(dict(meta), indent=2), encoding="utf-8")


def read_meta(path: str | Path) -> dict[str, Any]:
    meta_path = Path(path) / "meta.json"
    if not meta_path.is_file():
        raise InputError(
            f"{path} is not a ragshield index (no meta.json). Build one with "
            "'ragshield index CORPUS --out DIR'."
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataFormatError(meta_path, None, f"unreadable index metadata ({exc})") from exc
    if not isinstance(meta, dict) or "dim" not in meta:
        raise DataFormatError(meta_path, None, "index metadata lacks 'dim'")
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
