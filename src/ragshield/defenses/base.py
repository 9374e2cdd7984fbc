"""The PassageFilter seam and the input checks every defense shares.

The suspicion convention, decided once for all defenses: every
:class:`~ragshield.types.Decision` a filter returns carries ``scores["suspicion"]``, a
finite float where *higher* means *more* likely adversarial. The scale is the defense's own
(a cosine, a perplexity, RAGDefender's frequency score f_i, EcoSafeRAG's evidence in
[0.5, 1]), so suspicions are compared within one defense, never across defenses. A filter
that removes a passage says so with at least one decision whose ``index`` is the passage's
position in the input. ``tests/defenses/test_defense_contract.py`` checks this over every registered
defense.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.limits import check_passages_size
from ragshield.types import FilterResult, RetrievedPassage


@runtime_checkable
class PassageFilter(Protocol):
    """A post-retrieval defense: given the query and what was retrieved, keep the safe part.

    ``filter`` returns a :class:`FilterResult` whose ``kept`` and ``removed`` together hold
    every input passage once (``kept`` may hold rewritten copies, e.g. sentence-trimmed), in
    input order, with decisions following the suspicion convention of this module.

    A filter may also define ``warm_up() -> None`` (see :class:`WarmUp`): it loads heavy
    state (a model, a vocabulary) now instead of on the first query, and is idempotent, so
    a service calls it at start-up and a second call costs nothing. It is optional, so it is
    not part of this protocol's required members: call it through :func:`warm_up`.
    """

    name: str

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult: ...


@runtime_checkable
class WarmUp(Protocol):
    """The optional part of a filter (or encoder, generator): idempotent heavy loading."""

    def warm_up(self) -> None: ...


def warm_up(component: object) -> None:
    """Call ``component.warm_up()`` if it has one (a filter without heavy state has none)."""
    if isinstance(component, WarmUp):
        component.warm_up()


def check_retrieved(
    retrieved: object, owner: str, encoder: Encoder | None = None
) -> list[RetrievedPassage]:
    """The retrieved passages as a list, or an :class:`InputError` saying what is wrong.

    Rejects ``None``, a bare string (never iterated per character), items that are not
    :class:`RetrievedPassage`, and embeddings that are not usable vectors: non-numeric,
    not 1-D, NaN/Inf, of different lengths, or — when ``encoder`` is given — of a length
    other than the encoder's. Checked here, once, so a filter that does not read the
    vectors still refuses to pass corrupt ones on to the next stage. Inputs beyond
    :class:`ragshield.limits.InputLimits` are refused here too, before any work.
    """
    if isinstance(retrieved, (str, bytes)):
        raise InputError(f"{owner}.filter expects a list of RetrievedPassage, got a bare string.")
    if not isinstance(retrieved, Iterable):
        raise InputError(
            f"{owner}.filter expects a list of RetrievedPassage, got {type(retrieved).__name__}."
        )
    items = list(retrieved)
    for i, r in enumerate(items):
        if not isinstance(r, RetrievedPassage):
            raise InputError(
                f"{owner}.filter expects RetrievedPassage items; item {i} is {type(r).__name__}."
            )
    check_passages_size([r.text for r in items], f"{owner}.filter")
    dims = {
        _embedding_dim(r.embedding, i, owner)
        for i, r in enumerate(items)
        if r.embedding is not None
    }
    if len(dims) > 1:
        raise InputError(
            f"{owner} got passage embeddings of different dimensions ({sorted(dims)}): "
            "every passage must come from the same index."
        )
    if dims and encoder is not None:
        _check_encoder_dim(dims.pop(), encoder, owner)
    return items


def _embedding_dim(embedding: object, i: int, owner: str) -> int:
    a = np.asarray(embedding)
    if a.dtype.kind not in "iuf" or a.ndim != 1 or a.size == 0:
        raise InputError(
            f"{owner}: the embedding of passage {i} must be a non-empty 1-D numeric vector. "
            f"Got {a.dtype} of shape {a.shape} instead."
        )
    with np.errstate(over="ignore"):  # beyond float32's range is as unusable as Inf
        finite = np.isfinite(a.astype(np.float32)).all()
    if not finite:
        raise InputError(
            f"{owner}: the embedding of passage {i} contains NaN or Inf (or values beyond "
            "float32's range): re-index the passage."
        )
    return int(a.size)


def _check_encoder_dim(dim: int, encoder: Encoder, owner: str) -> None:
    if dim != encoder.dim:
        raise InputError(
            f"{owner}: the passage embeddings are {dim}-d but the encoder "
            f"{encoder.name!r} makes {encoder.dim}-d vectors: the index was built with "
            "another encoder; pass that encoder, or re-index."
        )


def passage_vectors(
    retrieved: Sequence[RetrievedPassage], encoder: Encoder | None, owner: str
) -> np.ndarray:
    """The retriever's vectors when every passage carries one, else encode the texts.

    Reusing the store's vectors is why a ragshield filter costs milliseconds per query.
    Expects the list :func:`check_retrieved` returned; the stacked vectors are checked
    against ``encoder``'s dimension when there is an encoder (asking an unloaded encoder for
    its dimension loads it, which the pipeline has done already to encode the query).
    """
    if retrieved and all(r.embedding is not None for r in retrieved):
        try:
            with np.errstate(over="ignore"):
                x = np.vstack([np.asarray(r.embedding, dtype=np.float32) for r in retrieved])
        except (ValueError, TypeError):
            x = np.zeros((0, 0), dtype=np.float32)
        if x.shape[0] != len(retrieved) or not np.isfinite(x).all():
            check_retrieved(retrieved, owner)  # names the passage and what is wrong with it
            raise InputError(f"{owner}: the passage embeddings do not form a matrix.")
        if encoder is not None:
            _check_encoder_dim(x.shape[1], encoder, owner)
        return x
    if encoder is None:
        raise InputError(
            f"{owner} needs passage embeddings: pass an encoder, or give each RetrievedPassage "
            "its embedding (the pipeline does this for you)."
        )
    if not retrieved:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    return encoder.encode([r.text for r in retrieved])
