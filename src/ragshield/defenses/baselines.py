"""Simple baselines that every poisoning defense should beat.

Example::

    from ragshield.defenses.baselines import SimilarityThresholdFilter

    f = SimilarityThresholdFilter(threshold=0.9)       # drop near-duplicate groups
    result = f.filter(question, retrieved)

:class:`SimilarityThresholdFilter` is RAGDefender's premise with none of its machinery:
adversarial passages are much more similar to each other than benign ones (§7 of the
RAGDefender paper: mean cosine 0.976 vs 0.309 on MS MARCO), so drop every passage that has a
near-duplicate in the retrieved set. :class:`PerplexityFilter` is the perplexity detector
PoisonedRAG and RAGDefender discuss, with the language-model scorer injected so this module
loads no model.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from numbers import Real
from typing import ClassVar, Literal

import numpy as np

from ragshield.defenses.base import check_retrieved, passage_vectors
from ragshield.defenses.params import Interval, IsCallable, Options, ParamsMixin, ParamTable
from ragshield.embed.base import Encoder, l2_normalize
from ragshield.errors import InputError, check_query
from ragshield.types import Decision, FilterResult, RetrievedPassage


def _result(
    name: str,
    items: list[RetrievedPassage],
    remove: np.ndarray,
    suspicion: np.ndarray,
    reason: str,
    details: dict[str, object],
    t0: float,
) -> FilterResult:
    return FilterResult(
        name=name,
        kept=tuple(r for r, x in zip(items, remove, strict=True) if not x),
        removed=tuple(r for r, x in zip(items, remove, strict=True) if x),
        decisions=tuple(
            Decision(
                index=i,
                passage_id=items[i].id,
                reason=reason,
                scores={"suspicion": float(suspicion[i])},
            )
            for i in np.flatnonzero(remove).tolist()
        ),
        details=details,
        seconds=time.perf_counter() - t0,
    )


class SimilarityThresholdFilter(ParamsMixin):
    """Remove passages that are suspiciously similar to another passage or to the query.

    Parameters
    ----------
    encoder: used only when passages carry no embedding.
    threshold: cosine similarity at or above which a passage is removed.
    against: ``"passages"`` — a passage's highest similarity to any *other* retrieved
        passage (near-duplicate groups; both members of a tight pair go); ``"query"`` — the
        retriever's score (cosine to the query; texts over-optimised for retrieval go).

    The suspicion score of a decision is the similarity that crossed the threshold.
    """

    name = "similarity-threshold"
    _parameter_constraints: ClassVar[ParamTable] = {
        "threshold": [Interval(Real, -1.0, 1.0)],
        "against": [Options("passages", "query")],
    }

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        threshold: float = 0.9,  # RAGDefender §7: adversarial pairs 0.976 vs benign 0.309
        against: Literal["passages", "query"] = "passages",
    ) -> None:
        self.encoder = encoder
        self.threshold = threshold
        self.against = against

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        self._validate_params()
        check_query(query)
        items = check_retrieved(retrieved, "SimilarityThresholdFilter", self.encoder)
        n = len(items)
        if self.against == "query":
            score = np.array([r.score for r in items], dtype=np.float64)
        elif n < 2:
            score = np.full(n, -1.0)
        else:
            x = l2_normalize(passage_vectors(items, self.encoder, "SimilarityThresholdFilter"))
            sim = (x @ x.T).astype(np.float64)
            np.fill_diagonal(sim, -np.inf)
            score = sim.max(axis=1)
        remove = score >= self.threshold
        reason = (
            f"near-duplicate of another passage (cosine >= {self.threshold})"
            if self.against == "passages"
            else f"query similarity >= {self.threshold}"
        )
        details: dict[str, object] = {"threshold": self.threshold, "against": self.against}
        details["max_similarity" if self.against == "passages" else "query_similarity"] = (
            score.tolist()
        )
        return _result(self.name, items, remove, score, reason, details, t0)


class PerplexityFilter(ParamsMixin):
    """Remove passages whose language-model perplexity exceeds a threshold.

    Parameters
    ----------
    encoder: accepted for the registry's uniform constructor; unused.
    scorer: ``texts -> perplexities`` (e.g. a small local causal LM). Injected so the
        defense is testable without a model and any LM can be plugged in. ``to_dict``
        saves it as its ``"module:function"`` path, so it must be a module-level function.
    threshold: perplexity above which a passage is removed. No paper default exists: set
        it from the perplexities of clean passages of your corpus (e.g. their 99th
        percentile).
    """

    name = "perplexity"
    _parameter_constraints: ClassVar[ParamTable] = {
        "scorer": [IsCallable(), None],
        "threshold": [Interval(Real, 0.0, None), None],
    }

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        scorer: Callable[[Sequence[str]], Sequence[float]] | None = None,
        threshold: float | None = None,
    ) -> None:
        self.encoder = encoder
        self.scorer = scorer
        self.threshold = threshold

    def _check_setup(self) -> None:
        if self.scorer is None:
            raise InputError(
                "PerplexityFilter needs a scorer: pass scorer=<callable texts -> perplexities>."
            )
        if self.threshold is None:
            raise InputError(
                "PerplexityFilter needs a threshold: pass threshold=<float>, e.g. the 99th "
                "percentile perplexity of clean passages of your corpus."
            )

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        self._validate_params()
        assert self.scorer is not None and self.threshold is not None  # _check_setup
        check_query(query)
        items = check_retrieved(retrieved, "PerplexityFilter", self.encoder)
        ppl = np.asarray(list(self.scorer([r.text for r in items])), dtype=np.float64)
        if ppl.shape != (len(items),):
            raise InputError(
                f"PerplexityFilter's scorer returned {ppl.size} values for {len(items)} passages."
            )
        remove = ppl > self.threshold
        return _result(
            self.name,
            items,
            remove,
            ppl,
            f"perplexity > {self.threshold}",
            {"threshold": self.threshold, "perplexity": ppl.tolist()},
            t0,
        )
