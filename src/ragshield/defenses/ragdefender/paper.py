"""RAGDefender exactly as §4 of the paper describes it (Eq. 1-7), and the plumbing (input
checks, vectors, result assembly) it shares with ragshield's improved class."""

from __future__ import annotations

import time
from collections.abc import Sequence
from numbers import Real
from typing import Any, ClassVar, Literal

import numpy as np

from ragshield.defenses.base import check_retrieved, passage_vectors
from ragshield.defenses.params import Interval, Options, ParamsMixin, ParamTable
from ragshield.defenses.ragdefender.math import (
    _labels_to_groups,
    clustering_estimate,
    concentration_estimate,
    cosine_matrix,
    frequency_scores,
    largest_gap_ratio,
    n_pairs_for,
    top_n_by_score,
)
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_query
from ragshield.types import Decision, FilterResult, RetrievedPassage

Mode = Literal["single_hop", "multi_hop", "auto"]
_MODES = ("single_hop", "multi_hop", "auto")

# --------------------------------------------------------------------------- shared plumbing


class _RAGDefenderBase(ParamsMixin):
    """Validation, vectors and result assembly shared by the faithful and improved classes."""

    name = "ragdefender"
    encoder: Encoder | None
    mode: str
    m: int
    p: float
    auto_gap: float
    _parameter_constraints: ClassVar[ParamTable] = {
        "mode": [Options(*_MODES)],
        "m": [Interval(int, 1, None)],
        "p": [Interval(Real, 0.0, 16.0, closed="right")],
        "auto_gap": [Interval(Real, 1.0, 1e9)],
    }

    def _check_common(self) -> None:
        self._validate_params()  # the table of type(self): a subclass's covers everything

    def _inputs(
        self, query: str, retrieved: Sequence[RetrievedPassage]
    ) -> tuple[list[RetrievedPassage], np.ndarray, np.ndarray]:
        owner = type(self).__name__
        check_query(query)
        items = check_retrieved(retrieved, owner)
        if not items:
            return items, np.zeros((0, 0), dtype=np.float32), np.zeros(0)
        vectors = passage_vectors(items, self.encoder, owner)
        if items and vectors.shape[0] != len(items):
            raise InputError(f"{owner} got {vectors.shape[0]} vectors for {len(items)} passages.")
        scores = np.array([r.score for r in items], dtype=np.float64)
        return items, vectors, scores

    def _begin(
        self, query: str, retrieved: Sequence[RetrievedPassage]
    ) -> tuple[float, list[RetrievedPassage], np.ndarray, np.ndarray, str]:
        """What both filters do first: start the clock (``filter_ms``), check the
        parameters and the inputs, and pick the mode from the query scores."""
        t0 = time.perf_counter()
        self._check_common()
        items, vectors, scores = self._inputs(query, retrieved)
        return t0, items, vectors, scores, self.resolve_mode(scores)

    def resolve_mode(self, query_scores: np.ndarray) -> str:
        """``auto``: single-hop clustering when the query similarities show a dominant gap.

        The paper's own worked example (Appendix A) chooses clustering-based grouping
        "due to the score gap characteristics": one block of passages sits clearly above
        the rest, i.e. the set splits in two, which is what the two-cluster rule assumes.
        Without such a gap the passages are spread out, and the concentration rule, which
        assumes no cluster count, is the safer estimate. The threshold is ``auto_gap``.
        """
        if self.mode != "auto":
            return self.mode
        return "single_hop" if largest_gap_ratio(query_scores) >= self.auto_gap else "multi_hop"

    def _result(
        self,
        items: list[RetrievedPassage],
        remove: np.ndarray,
        suspicion: np.ndarray,
        reasons: dict[int, str],
        details: dict[str, Any],
        t0: float,
    ) -> FilterResult:
        removed_idx = sorted(int(i) for i in remove)
        removed_set = set(removed_idx)
        decisions = tuple(
            Decision(
                index=i,
                passage_id=items[i].id,
                reason=reasons.get(i, "adversarial"),
                scores={"suspicion": float(suspicion[i]), "f": float(details["f"][i])},
            )
            for i in removed_idx
        )
        return FilterResult(
            name=self.name,
            kept=tuple(r for i, r in enumerate(items) if i not in removed_set),
            removed=tuple(items[i] for i in removed_idx),
            decisions=decisions,
            details=details,
            seconds=time.perf_counter() - t0,
        )


# --------------------------------------------------------------------------- faithful


class PaperRAGDefender(_RAGDefenderBase):
    """RAGDefender exactly as §4 of the paper describes it (Eq. 1-7).

    Parameters
    ----------
    encoder: used only when the passages carry no embedding (the pipeline attaches them).
    mode: ``"single_hop"`` (clustering-based grouping), ``"multi_hop"`` (concentration-based
        grouping) or ``"auto"`` (see :meth:`resolve_mode`).
    m: TF-IDF top terms for Eq. 1.
    p: weighting exponent of Eq. 6.
    auto_gap: largest-gap / mean-gap ratio of the sorted query similarities above which
        ``auto`` picks single-hop.

    ``details`` of the result: ``mode``, ``n_adv``, ``groups`` (stage-1 groups as index
    lists), ``top_terms``, ``term_scores``, ``n_tfidf``, ``n_min``, ``s_mean``/``s_median``
    (multi-hop), ``pairs``, ``f`` (one per passage). Decisions carry ``suspicion = f_i``.
    """

    name = "ragdefender-paper"

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        mode: Mode = "single_hop",
        m: int = 5,  # §5 "Hyperparameter Selection": m = 5 TF-IDF terms
        p: float = 2.0,  # §4.2 Eq. 6 and §6.6 Table 7: p = 2
        auto_gap: float = 2.0,  # Appendix A: gap 0.054 vs mean gap 0.024 -> clustering
    ) -> None:
        self.encoder = encoder
        self.mode = mode
        self.m = m
        self.p = p
        self.auto_gap = auto_gap

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0, items, vectors, _, mode = self._begin(query, retrieved)
        n = len(items)
        details: dict[str, Any] = {"mode": mode, "n_adv": 0, "groups": [], "f": [0.0] * n}
        if n < 2:
            return self._result(items, np.zeros(0, dtype=np.int64), np.zeros(n), {}, details, t0)
        sim = cosine_matrix(vectors)
        if mode == "single_hop":
            est = clustering_estimate(vectors, [r.text for r in items], self.m)
            n_adv = est.n_adv
            details.update(
                groups=_labels_to_groups(est.labels),
                n_min=est.n_min,
                top_terms=list(est.terms.terms),
                term_scores=list(est.terms.scores),
                n_tfidf=est.terms.n_tfidf,
            )
        else:
            conc = concentration_estimate(sim)
            n_adv = conc.n_adv
            details.update(
                groups=[
                    np.flatnonzero(conc.flagged).tolist(),
                    np.flatnonzero(~conc.flagged).tolist(),
                ],
                s_mean=conc.s_mean.tolist(),
                s_median=conc.s_median.tolist(),
            )
        ps = frequency_scores(sim, n_pairs_for(n_adv), self.p)
        remove = top_n_by_score(ps.f, n_adv)
        details.update(n_adv=int(n_adv), pairs=ps.pairs.tolist(), f=ps.f.tolist())
        reasons = {int(i): f"top-{n_adv} frequency score f_i (Eq. 7)" for i in remove}
        return self._result(items, remove, ps.f, reasons, details, t0)
