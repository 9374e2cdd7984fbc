"""RAGDefender's pure math (Kim, Lee, Koo, ACSAC 2025, §4 Eq. 1-7), shared by the faithful
and the improved classes (:mod:`ragshield.defenses.ragdefender.filter`).

Pure functions on vectors and texts, so every equation is unit-testable on hand-built
inputs without a model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ragshield.embed.base import l2_normalize

Mode = Literal["single_hop", "multi_hop", "auto"]
_MODES = ("single_hop", "multi_hop", "auto")


# --------------------------------------------------------------------------- pure math


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of the rows (re-normalised, so any vectors work)."""
    x = l2_normalize(np.asarray(vectors, dtype=np.float32))
    sim = (x @ x.T).astype(np.float64)
    np.clip(sim, -1.0, 1.0, out=sim)
    return sim


def _off_diagonal(sim: np.ndarray) -> np.ndarray:
    """Row i holds sim(i, j) for every j != i: shape (n, n - 1)."""
    n = sim.shape[0]
    return sim[~np.eye(n, dtype=bool)].reshape(n, n - 1)


@dataclass(frozen=True)
class TermEvidence:
    """Eq. 1 inputs: the top-m TF-IDF terms, their summed scores, and who contains them."""

    terms: tuple[str, ...]
    scores: tuple[float, ...]
    presence: np.ndarray  # (n, m) bool: passage i contains term j
    n_tfidf: int  # passages containing more than m/2 of the terms


def tfidf_top_terms(texts: Sequence[str], m: int) -> TermEvidence:
    """§4.1 Eq. 1: TF-IDF over the retrieved set, the m terms with the highest summed score,
    and ``N_TF-IDF`` = passages containing more than m/2 of them.

    "Contains" is token membership under the vectoriser's own analyser (lower-cased), the
    paper's ``t_j ∈ r_i``. (The authors' code tests case-sensitive substrings of lower-cased
    terms, so "france" is never found in "France"; we do not copy that.)
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    n = len(texts)
    try:
        vec = TfidfVectorizer(stop_words="english")
        x = vec.fit_transform(list(texts))
    except ValueError:  # every token is a stop word (or the texts are empty)
        return TermEvidence((), (), np.zeros((n, 0), dtype=bool), 0)
    summed = np.asarray(x.sum(axis=0)).ravel()
    top = np.argsort(-summed, kind="stable")[:m]  # ties: vocabulary (alphabetical) order
    names = vec.get_feature_names_out()
    presence = (x[:, top] > 0).toarray()
    n_tfidf = int(np.sum(presence.sum(axis=1) > m / 2))
    return TermEvidence(
        terms=tuple(str(names[j]) for j in top),
        scores=tuple(float(summed[j]) for j in top),
        presence=presence,
        n_tfidf=n_tfidf,
    )


@dataclass(frozen=True)
class ClusteringEstimate:
    """Stage 1, single-hop (§4.1 Eq. 1-2)."""

    labels: np.ndarray  # agglomerative cluster id per passage (2 clusters)
    n_min: int
    terms: TermEvidence
    n_adv: int


def n_adv_from_clusters(n_passages: int, n_min: int, n_tfidf: int) -> int:
    """§4.1 Eq. 2: ``n_min`` if ``N_TF-IDF <= |R|/2`` else ``|R| - n_min``."""
    return n_min if n_tfidf <= n_passages / 2 else n_passages - n_min


def clustering_estimate(vectors: np.ndarray, texts: Sequence[str], m: int) -> ClusteringEstimate:
    """§4.1 clustering-based grouping: agglomerative clustering into two groups (scikit-learn
    defaults, Ward linkage, as the paper's §5 names scikit-learn's implementation), then the
    TF-IDF vote picks the minority or majority cluster as adversarial."""
    from sklearn.cluster import AgglomerativeClustering

    n = len(texts)
    terms = tfidf_top_terms(texts, m)
    if n < 2:
        return ClusteringEstimate(np.zeros(n, dtype=np.int64), 0, terms, 0)
    labels = AgglomerativeClustering(n_clusters=2).fit_predict(np.asarray(vectors))
    sizes = np.bincount(labels, minlength=2)
    n_min = int(sizes.min())
    return ClusteringEstimate(labels, n_min, terms, n_adv_from_clusters(n, n_min, terms.n_tfidf))


@dataclass(frozen=True)
class ConcentrationEstimate:
    """Stage 1, multi-hop (§4.1 Eq. 3)."""

    s_mean: np.ndarray
    s_median: np.ndarray
    flagged: np.ndarray  # bool: both factors above their global counterparts
    n_adv: int


def concentration_estimate(sim: np.ndarray) -> ConcentrationEstimate:
    """§4.1 Eq. 3: count passages whose mean *and* median similarity to the others exceed the
    mean of the means and the median of the medians (the paper's AND, self-pairs excluded).
    """
    n = sim.shape[0]
    if n < 2:
        z = np.zeros(n)
        return ConcentrationEstimate(z, z, np.zeros(n, dtype=bool), 0)
    others = _off_diagonal(sim)
    s_mean = others.mean(axis=1)
    s_median = np.median(others, axis=1)
    flagged = (s_mean > s_mean.mean()) & (s_median > np.median(s_median))
    return ConcentrationEstimate(s_mean, s_median, flagged, int(flagged.sum()))


def n_pairs_for(n_adv: int) -> int:
    """§4.2 Eq. 4: ``max(1, C(N_adv, 2))``."""
    return max(1, math.comb(max(n_adv, 0), 2))


@dataclass(frozen=True)
class PairScores:
    """Stage 2 (§4.2 Eq. 4-6): the top pairs and each passage's frequency score f_i."""

    pairs: np.ndarray  # (N_pairs, 2) int, most similar first
    pair_sims: np.ndarray  # (N_pairs,)
    f: np.ndarray  # (n,)


def frequency_scores(
    sim: np.ndarray, n_pairs: int, p: float, allowed: np.ndarray | None = None
) -> PairScores:
    """Eq. 5-6: take the ``n_pairs`` most similar pairs (i < j) and give each member
    ``sgn(sim)·|sim|^p`` per pair. ``allowed`` (pair mask over the upper triangle, optional)
    restricts the candidate pairs, e.g. to pairs inside detected groups. Vectorised: one
    argsort over the upper triangle, ``np.add.at`` for the sums.
    """
    n = sim.shape[0]
    iu, ju = np.triu_indices(n, k=1)
    s = sim[iu, ju]
    if allowed is not None:
        iu, ju, s = iu[allowed], ju[allowed], s[allowed]
    order = np.argsort(-s, kind="stable")[: max(n_pairs, 0)]  # ties: lower indices first
    i, j, ps = iu[order], ju[order], s[order]
    w = np.sign(ps) * np.abs(ps) ** p
    f = np.zeros(n, dtype=np.float64)
    np.add.at(f, i, w)
    np.add.at(f, j, w)
    return PairScores(pairs=np.stack([i, j], axis=1), pair_sims=ps, f=f)


def top_n_by_score(f: np.ndarray, n: int) -> np.ndarray:
    """Eq. 7: indices of the n largest scores (ties: lower index first)."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.argsort(-f, kind="stable")[:n]


def largest_gap_ratio(query_scores: np.ndarray) -> float:
    """Largest drop between consecutive sorted query similarities over the mean drop.

    1.0 means similarities decline evenly; a large value means a block of passages stands
    apart from the rest (the "score gap" of the paper's Appendix A).
    """
    s = np.sort(np.asarray(query_scores, dtype=np.float64))[::-1]
    if s.size < 3:
        return 1.0
    gaps = -np.diff(s)
    mean = float(gaps.mean())
    return float(gaps.max() / mean) if mean > 0 else 1.0


def _labels_to_groups(labels: np.ndarray) -> list[list[int]]:
    return [np.flatnonzero(labels == c).tolist() for c in np.unique(labels)]
