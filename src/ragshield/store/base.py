"""The VectorStore seam: passages with their unit vectors, searched by inner product."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

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
