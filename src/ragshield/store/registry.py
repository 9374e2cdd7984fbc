"""Store kinds by name: the ``store`` field of an index's ``meta.json`` -> the class that
opens it.

Each class answers ``from_meta(meta, path, uri) -> VectorStore`` (``uri`` overrides a
server address the pointer recorded, e.g. to add a password). Adding a store is one module
with that classmethod plus one line here; :func:`ragshield.store.persist.load_store` is a
lookup in this table, so ``persist`` never imports a store module at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ragshield.errors import DataFormatError, InputError
from ragshield.store.base import VectorStore

# kind -> "module:Class"; imported on use (pgvector needs the [pg] extra).
STORES: dict[str, str] = {
    "faiss": "ragshield.store.faiss_store:FaissStore",
    "pgvector": "ragshield.store.pgvector_store:PgVectorStore",
}
# the extra that installs each kind's dependencies (named in the error when they are absent)
EXTRAS: dict[str, str] = {"pgvector": "pg"}


class StoreClass(Protocol):
    """What a store kind must offer to be opened from an index directory."""

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], path: Path, uri: str | None) -> VectorStore: ...


def store_class(kind: str, meta_path: Path | None = None) -> StoreClass:
    """The class registered for ``kind`` (DataFormatError for a kind no entry names)."""
    try:
        target = STORES[kind]
    except KeyError:
        raise DataFormatError(
            meta_path or Path("meta.json"),
            None,
            f"unknown store kind {kind!r}; known: {', '.join(sorted(STORES))}",
        ) from None
    module, _, attr = target.partition(":")
    try:
        cls: StoreClass = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        extra = EXTRAS.get(kind)
        hint = f': pip install "ragshield[{extra}]"' if extra else ""
        raise InputError(f"the {kind} store cannot be loaded ({exc}){hint}") from exc
    return cls
