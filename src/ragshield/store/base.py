"""The VectorStore seam: passages with their unit vectors, searched by inner product."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ragshield.errors import InputError
from ragshield.types import Passage, RetrievedPassage


@runtime_checkable
class VectorStore(Protocol):
    """Every store speaks inner product on L2-normalised vectors (== cosine).

    ``search`` returns, per query row, up to ``k`` passages best first, each with its stored
    vector so post-retrieval defenses never re-encode.
    """

    @property
    def dim(self) -> int: ...

    def add(self, passages: Sequence[Passage], vectors: np.ndarray) -> None: ...

    def search(self, query_vectors: np.ndarray, k: int) -> list[list[RetrievedPassage]]: ...

    def save(self, path: str | Path) -> None: ...

    def __len__(self) -> int: ...


def check_batch(passages: Sequence[Passage], vectors: np.ndarray, dim: int) -> np.ndarray:
    """The checks every store makes on ``add``; returns contiguous float32 vectors."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise InputError(f"vectors must have shape (n, {dim}); got {tuple(vectors.shape)}.")
    if len(passages) != vectors.shape[0]:
        raise InputError(
            f"{len(passages)} passages but {vectors.shape[0]} vectors: they must match."
        )
    return vectors


def check_k(k: object, n: int | None = None) -> int:
    """``k`` must be an int in ``1..n`` (``n`` = passages in the index, when known)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be an int >= 1. Got {k!r} instead.")
    if n is not None:
        if n == 0:
            raise InputError("the index is empty: add passages before searching.")
        if k > n:
            raise InputError(f"k ({k}) must be at most the number of passages in the index ({n}).")
    return k


def check_queries(query_vectors: np.ndarray, dim: int) -> np.ndarray:
    q = np.ascontiguousarray(np.atleast_2d(query_vectors), dtype=np.float32)
    if q.shape[1] != dim:
        raise InputError(f"query vectors must have {dim} columns; got {q.shape[1]}.")
    return q
