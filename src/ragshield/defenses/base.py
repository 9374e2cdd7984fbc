"""The PassageFilter seam and helpers every defense shares.

Direction of scores, decided once for all defenses: a *higher* suspicion score means *more*
likely adversarial. Every :class:`~ragshield.types.Decision` of a removal carries that
score under the key ``"suspicion"``; a test checks the convention over every registered
defense.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.types import FilterResult, RetrievedPassage


@runtime_checkable
class PassageFilter(Protocol):
    """A post-retrieval defense: given the query and what was retrieved, keep the safe part."""

    name: str

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult: ...


def check_retrieved(retrieved: object, owner: str) -> list[RetrievedPassage]:
    """Reject a bare string or non-passage items before a defense iterates over them."""
    if isinstance(retrieved, (str, bytes)):
        raise InputError(f"{owner}.filter expects a list of RetrievedPassage, got a bare string.")
    items = list(retrieved)  # type: ignore[call-overload]
    for i, r in enumerate(items):
        if not isinstance(r, RetrievedPassage):
            raise InputError(
                f"{owner}.filter expects RetrievedPassage items; item {i} is {type(r).__name__}."
            )
    return items


def passage_vectors(
    retrieved: Sequence[RetrievedPassage], encoder: Encoder | None, owner: str
) -> np.ndarray:
    """The retriever's vectors when every passage carries one, else encode the texts.

    Reusing the store's vectors is why a ragshield filter costs milliseconds per query.
    """
    if retrieved and all(r.embedding is not None for r in retrieved):
        return np.vstack([np.asarray(r.embedding, dtype=np.float32) for r in retrieved])
    if encoder is None:
        raise InputError(
            f"{owner} needs passage embeddings: pass an encoder, or give each RetrievedPassage "
            "its embedding (the pipeline does this for you)."
        )
    if not retrieved:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return encoder.encode([r.text for r in retrieved])
