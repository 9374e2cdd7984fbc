"""How InjectionGuard scores a passage's sentences and windows, and which it flags (the
pure functions behind :class:`ragshield.defenses.injection.detector.InjectionGuard`, which
re-exports them; the guard adds caching, calibration and the filter call).

Example::

    from ragshield.defenses.injection.scoring import pair_scores, segment, window_flags

    own, pair = pair_scores(head, rows)               # rows: head_rows(head, vectors, texts)
    flags = window_flags(own, pair, threshold)

Why a module of its own: these are what calibration, the training script and the guard
must compute identically (a threshold calibrated on one statistic and applied to another
holds nothing), so they live in one place with no state.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragshield.defenses.injection.context import offtopic
from ragshield.defenses.injection.features import feature_matrix, mention_kind
from ragshield.defenses.injection.head import InjectionHead
from ragshield.embed.base import l2_normalize
from ragshield.text import split_sentences

__all__ = [
    "NEIGHBOUR_POINTS", "Neighbours", "Scored", "head_rows", "mention_mask", "pair_scores", "segment", "window_flags",
    "window_scores",
]  # fmt: skip

#: ``Neighbours.neighbour_point`` -> the share of the index's sentences whose own score
#: reaches it (``fpr1`` is the operating point's threshold, on the window statistic)
NEIGHBOUR_POINTS = {"fpr1": 0.01, "fpr5": 0.05}


@dataclass(frozen=True)
class Neighbours:
    """How a sentence's neighbours count: read with it, and held with it once it is flagged.

    windows: also score each pair of neighbouring sentences (``True``: on the mean of the
        two sentence vectors; ``"text"``: on the encoding of their joined text, one more
        encoder call per pair at index time).
    hysteresis: at ``fpr0.1``, a neighbour of a flagged sentence is flagged too when its
        own score reaches the looser ``neighbour_point`` (:func:`window_flags`; the index's
        flag rate grows by at most twice the share flagged at ``fpr0.1``).
    neighbour_point: the looser threshold a neighbour's own score must reach to go with a
        flagged sentence: ``"fpr1"``, the index's 1 % point, or ``"fpr5"``, the score that 5 %
        of the index's own sentences reach alone (recorded at calibration as
        ``neighbour_threshold``; an index calibrated before it falls back to ``fpr1``).
    """

    windows: bool | Literal["text"] = True  # issue #23: instructions split in two
    # dev choice (bench_injection_dev.py): split 0.27 -> 0.70 at fpr0.1, nothing else moved
    hysteresis: bool = True
    # SQuAD dev (docs/results-injection.md, seventh session): split 0.70 -> 0.87 at fpr0.1,
    # dev index sentences flagged 0.0021 and dev hard negatives in articles 0.043 unchanged
    # (the 10 % point: split 0.88 but the index rate moved; 20 %: hard negatives 0.07)
    neighbour_point: Literal["fpr1", "fpr5"] = "fpr5"


_CLAUSE = re.compile(r"(?<=:)\s+(?=[\"“'A-Z])")


def segment(text: str, language: str = "en") -> list[str]:
    """Sentences of ``text``: lines first (a chat-turn marker starts a line), then
    ``sentencex`` sentences, then clauses after "colon + capital letter or quote"."""
    out: list[str] = []
    for line in text.splitlines():
        for s in split_sentences(line, language):
            out.extend(c.strip() for c in _CLAUSE.split(s) if c.strip())
    return out


def head_rows(head: InjectionHead, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """What the head reads per sentence: the unit vector, then the head's hand-made
    features of the normalised ``texts`` (none for a vector-only head)."""
    if not head.features:
        return vectors
    return np.hstack([vectors, feature_matrix(head.features, texts)])


def mention_mask(texts: Sequence[str]) -> np.ndarray:
    """Per normalised sentence: does :func:`~ragshield.defenses.injection.features.
    mention_kind` read it as a notice to a person or a description of AI?"""
    return np.array([bool(mention_kind(t)) for t in texts], dtype=bool)


def pair_scores(
    head: InjectionHead,
    rows: np.ndarray,
    mask: np.ndarray | None = None,
    discount: float | None = None,
    pair_vectors: np.ndarray | None = None,
    boost: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(own, pair)``: each sentence's score, and each neighbouring pair's (the mean of
    the two unit vectors, re-normalised — or ``pair_vectors``, the unit vectors of the two
    sentences' joined text, when given — with the larger of the two feature values;
    ``n - 1`` of them). ``rows`` as :func:`head_rows` makes them. With ``mask``
    (:func:`mention_mask`), a masked sentence's score is multiplied by ``discount``
    (default: the head's ``mention_discount``), and a window's when both its sentences
    are masked. Then each sentence's score ``s`` becomes ``1 - (1 - s)(1 - b)`` with
    ``b = min(boost * offtopic, 0.99)`` (``boost``: default the head's ``offtopic_boost``;
    :func:`~ragshield.defenses.injection.context.offtopic`), a window's with the smaller
    of its two sentences' ``b``: a noisy-OR of two pieces of evidence that keeps scores
    below 1 and their order among sentences with no boost (a plain sum saturated at 1 and
    tied the index's top sentences, which a 0.1 % threshold cannot separate)."""
    lam = head.mention_discount if discount is None else discount
    beta = head.offtopic_boost if boost is None else boost
    d = head.vector_dim
    own = head.score(rows) if len(rows) else np.zeros(0, dtype=np.float64)
    if mask is not None and lam < 1.0 and own.size:
        own = np.where(mask, own * lam, own)
    off = offtopic(rows[:, :d]) if beta > 0 and len(rows) >= 3 else None
    if off is not None:
        off = np.minimum(beta * off, 0.99)
        own = 1.0 - (1.0 - own) * (1.0 - off)
    if len(rows) < 2:
        return own, np.zeros(0, dtype=np.float64)
    pair = (
        l2_normalize((rows[:-1, :d] + rows[1:, :d]) / 2.0) if pair_vectors is None else pair_vectors
    )
    if rows.shape[1] > d:
        pair = np.hstack([pair, np.maximum(rows[:-1, d:], rows[1:, d:])])
    ps = head.score(pair)
    if mask is not None and lam < 1.0:
        ps = np.where(mask[:-1] & mask[1:], ps * lam, ps)
    if off is not None:
        ps = 1.0 - (1.0 - ps) * (1.0 - np.minimum(off[:-1], off[1:]))
    return own, ps


def window_flags(
    own: np.ndarray,
    pair: np.ndarray,
    threshold: float,
    low: float | None = None,
    ruled: np.ndarray | None = None,
) -> np.ndarray:
    """A sentence is flagged when its own score reaches ``threshold``, or when a window it
    shares with a neighbour does while *neither* sentence does alone (an instruction split
    in two; both halves go). A sentence that is flagged alone does not drag its genuine
    neighbour out with it — unless that neighbour's own score reaches ``low`` (hysteresis,
    as in edge detection: the other half of a split instruction is rarely strong enough on
    its own for the strict point, but a genuine sentence is rarely both next to a flagged
    one and over the looser point). ``ruled``: sentences a deterministic rule flagged; they
    are flagged, and hold their neighbours to ``low`` like any flagged sentence (the rule's
    trigger word sits in one half of a split instruction: the other half is the classifier's
    to judge, at the looser point)."""
    flag = own >= threshold
    if pair.size:
        split = (pair >= threshold) & ~flag[:-1] & ~flag[1:]
        flag = flag.copy()
        flag[:-1] |= split
        flag[1:] |= split
    if ruled is not None and ruled.size:  # after the windows: a rule flag blocks no window
        flag = flag | ruled
    if low is not None and low < threshold and flag.size > 1:
        weak = own >= low
        near = np.zeros_like(flag)
        near[:-1] |= flag[1:]
        near[1:] |= flag[:-1]
        flag = flag | (near & weak)
    return flag


def window_scores(
    head: InjectionHead, vectors: np.ndarray, mask: np.ndarray | None = None
) -> np.ndarray:
    """Per sentence: ``max(own score, pair score with the previous, with the next)`` — an
    upper bound of what :func:`window_flags` flags at any threshold, so a threshold
    calibrated on it flags at most the calibrated share of benign sentences."""
    own, pair = pair_scores(head, vectors, mask)
    best = own.copy()
    if pair.size:
        best[:-1] = np.maximum(best[:-1], pair)
        best[1:] = np.maximum(best[1:], pair)
    return best


@dataclass(frozen=True)
class Scored:
    """One passage's sentences with their scores and rule hits (cached per text)."""

    sentences: tuple[str, ...]
    own: np.ndarray
    pair: np.ndarray
    rules: tuple[tuple[str, ...], ...]
    #: per sentence: language-switch margin (``-inf``: no switch), ``None`` = not computed
    foreign: np.ndarray | None = None
    #: per sentence: the language margin alone, switch or not (``-inf``: too short)
    margins: np.ndarray | None = None
    #: per sentence: disguised words (:func:`~ragshield.defenses.injection.text.disguised_words`)
    disguised: np.ndarray | None = None

    @property
    def scores(self) -> np.ndarray:
        """max(own, neighbouring windows) per sentence (what calibration thresholds)."""
        best = self.own.copy()
        if self.pair.size:
            best[:-1] = np.maximum(best[:-1], self.pair)
            best[1:] = np.maximum(best[1:], self.pair)
        return best
