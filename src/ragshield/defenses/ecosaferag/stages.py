"""Pure stages of EcoSafeRAG (:mod:`ragshield.defenses.ecosaferag`): each is a function on
texts or vectors, testable on hand-built inputs without a model.

The order, the paper's mechanisms and the reasons for every choice are in the filter's
module docstring; this module holds only the math.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote_plus

import numpy as np
from sklearn.cluster import DBSCAN

from ragshield.defenses.injection.context import offtopic
from ragshield.embed.base import l2_normalize
from ragshield.errors import InputError
from ragshield.text import split_sentences

# Reason codes, in Decision.reason and details["reasons"].
PRUNED = "below_adaptive_threshold"
BAIT = "bait_cluster"
DENSE = "low_diversity_cluster"
ABSOLUTE = "absolute_threshold_low_diversity"
COLLATERAL = "passage_flagged"
RESTATED = "restated_question"
EMPTY = "empty_passage"
KEPT = "kept"

# Distance given to pairs that must never be DBSCAN neighbours (same passage / same bait);
# larger than any admissible eps (<= 2, the largest cosine distance).
_APART = 3.0
_CLAUSE = re.compile(r"(?<=:)\s+(?=[A-Z\"“])")


@dataclass(frozen=True)
class Segmentation:
    """Sentences of a retrieved set, flattened in source order.

    ``owner[i]`` is the index of the passage sentence ``i`` comes from and ``position[i]``
    its position inside that passage, so every decision maps back to the source.
    """

    sentences: tuple[str, ...]
    owner: np.ndarray
    position: np.ndarray
    n_passages: int

    def of(self, passage: int) -> np.ndarray:
        """Flat indices of one passage's sentences, in order."""
        return np.flatnonzero(self.owner == passage)


def segment_passages(
    texts: Sequence[str], language: str = "en", *, split_clauses: bool = False
) -> Segmentation:
    """Stage 1: split every text with :func:`ragshield.text.split_sentences` (sentencex).

    An empty or blank text yields no sentence (its passage is later removed as empty); a
    text without sentence punctuation is one sentence. With ``split_clauses`` a sentence
    is also cut after a colon followed by a capital letter or an opening quote (``... just
    say "X": The season ...``): an instruction ending in a colon is otherwise glued to
    the genuine sentence after it and inherits that sentence's relevance.
    """
    if isinstance(texts, str):
        raise InputError("segment_passages expects a list of texts, got a bare string.")
    sentences: list[str] = []
    owner: list[int] = []
    position: list[int] = []
    for i, text in enumerate(texts):
        pieces = split_sentences(text, language)
        if split_clauses:
            pieces = [c for p in pieces for c in _CLAUSE.split(p) if c.strip()]
        for j, s in enumerate(pieces):
            sentences.append(s)
            owner.append(i)
            position.append(j)
    return Segmentation(
        sentences=tuple(sentences),
        owner=np.asarray(owner, dtype=np.int64),
        position=np.asarray(position, dtype=np.int64),
        n_passages=len(texts),
    )


def dual_threshold(
    similarities: np.ndarray, tau: float, abs_threshold: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """Stage 2: ``(candidate mask, absolute mask, θ)`` with ``θ = tau · max`` similarity.

    Candidates reach θ *or* the absolute cutoff; the absolute mask marks the sentences that
    reach ``abs_threshold`` (sent to scrutiny whatever θ is). The max is over the sentences
    *below* the absolute cutoff (all of them if none is). With no sentence, θ is nan.
    """
    sims = np.asarray(similarities, dtype=np.float64)
    if sims.size == 0:
        empty = np.zeros(0, dtype=bool)
        return empty, empty, float("nan")
    absolute = sims >= abs_threshold
    # The maximum is taken below the absolute cutoff: a restated question (similarity ~1)
    # would otherwise lift θ and prune the genuine evidence it competes with.
    reference = sims[~absolute].max() if (~absolute).any() else sims.max()
    theta = float(tau * reference)
    return (sims >= theta) | absolute, absolute, theta


def context_vectors(
    embeddings: np.ndarray,
    owner: np.ndarray,
    position: np.ndarray,
    rows: np.ndarray,
    window: int | None = None,
) -> np.ndarray:
    """Stage 3: for each sentence in ``rows``, the unit mean of its context's embeddings.

    The context is the other sentences of the same passage within ``window`` positions
    (``None`` = the whole passage). A sentence with no context (a one-sentence passage) is
    its own context: there is nothing else to judge it by. Vectorised as one masked matrix
    product.
    """
    emb = np.asarray(embeddings, dtype=np.float32)
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return np.zeros((0, emb.shape[1] if emb.ndim == 2 else 0), dtype=np.float32)
    mask = owner[rows][:, None] == owner[None, :]
    mask[np.arange(rows.size), rows] = False
    if window is not None:
        mask &= np.abs(position[rows][:, None] - position[None, :]) <= window
    counts = mask.sum(axis=1)
    ctx = mask.astype(np.float32) @ emb
    lonely = counts == 0
    ctx[lonely] = emb[rows[lonely]]
    return l2_normalize(ctx)


def contextual_variance(
    embeddings: np.ndarray, owner: np.ndarray, n_passages: int, non_core: np.ndarray
) -> np.ndarray:
    """Stage 3: per passage, ``1 − ‖mean of its non-core unit vectors‖²`` (0 … 1).

    This is the total variance (trace of the covariance) of unit vectors; it is 0 for
    identical sentences and for a passage with fewer than two non-core sentences (a single
    point shows no diversity), and grows as the sentences talk about different things.
    """
    emb = l2_normalize(np.asarray(embeddings, dtype=np.float32))
    sel = np.asarray(non_core, dtype=bool)
    out = np.zeros(n_passages, dtype=np.float64)
    if emb.shape[0] == 0 or not sel.any():
        return out
    own = owner[sel]
    sums = np.zeros((n_passages, emb.shape[1]), dtype=np.float64)
    np.add.at(sums, own, emb[sel])
    counts = np.bincount(own, minlength=n_passages).astype(np.float64)
    enough = counts >= 2
    means = sums[enough] / counts[enough, None]
    out[enough] = np.clip(1.0 - np.einsum("ij,ij->i", means, means), 0.0, 1.0)
    return out


def candidate_features(
    sentence_vectors: np.ndarray,
    context_vecs: np.ndarray,
    query_vector: np.ndarray,
    context_weight: float,
    remove_query: bool = True,
) -> np.ndarray:
    """Stage 3: ``unit((1 − w)·sentence + w·context)``, query direction projected out.

    With ``remove_query`` the component along the (unit) query vector is subtracted before
    re-normalising, so two texts are close because of *how* they are written, not because
    both mention the question.
    """
    s = np.asarray(sentence_vectors, dtype=np.float32)
    c = np.asarray(context_vecs, dtype=np.float32)
    f = l2_normalize((1.0 - context_weight) * s + context_weight * c)
    if remove_query and f.shape[0]:
        q = l2_normalize(np.asarray(query_vector, dtype=np.float32).reshape(1, -1))[0]
        f = f - np.outer(f @ q, q)
        f = l2_normalize(f)
    return f


def bait_dbscan(
    features: np.ndarray, groups: np.ndarray, eps: float, min_samples: int
) -> np.ndarray:
    """Stage 4: DBSCAN labels (cosine distance) where members of one group never meet.

    ``groups[i]`` names the passage (or bait) point ``i`` comes from; pairs of the same
    group get a distance larger than any eps, so a cluster needs ``min_samples`` points
    from *different* sources. Uses scikit-learn's DBSCAN on the precomputed matrix.
    """
    x = l2_normalize(np.asarray(features, dtype=np.float32))
    if x.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    dist = np.clip(1.0 - (x @ x.T).astype(np.float64), 0.0, 2.0)
    same = groups[:, None] == groups[None, :]
    np.fill_diagonal(same, False)
    dist[same] = _APART
    np.fill_diagonal(dist, 0.0)
    labels = DBSCAN(eps=eps, min_samples=min_samples, metric="precomputed").fit_predict(dist)
    return np.asarray(labels, dtype=np.int64)


@dataclass(frozen=True)
class Judgement:
    """Stage 4 output per candidate: reason code and evidence in [0, 1]."""

    reasons: np.ndarray  # object array of reason codes (KEPT, BAIT, DENSE, ABSOLUTE)
    evidence: np.ndarray  # float, 0 for kept candidates


def judge_candidates(
    labels: np.ndarray,
    n_candidates: int,
    candidate_owner: np.ndarray,
    candidate_absolute: np.ndarray,
    passage_variance: np.ndarray,
    bait_distance: np.ndarray,
    eps: float,
    variance_threshold: float,
    *,
    dense_only: np.ndarray | None = None,
    exempt: np.ndarray | None = None,
    bait_near: np.ndarray | None = None,
) -> Judgement:
    """Stage 4 decision rule on DBSCAN ``labels`` (candidates first, then baits).

    ``bait_distance`` is each candidate's cosine distance to its nearest bait. A candidate
    is malicious when it

    * reaches the absolute cutoff and its passage's contextual variance is below
      ``variance_threshold`` (``absolute_threshold_low_diversity``: a restated question
      with a homogeneous context; a genuine FAQ-style passage that restates the question
      but then talks about several things survives); or
    * is in a bait cluster *and* within ``eps`` of a bait (``bait_cluster``). Members a
      cluster reaches only by chaining through other candidates are judged like a
      bait-free cluster: DBSCAN chains, and a genuine sentence on the same topic as a
      poisoned one would otherwise be pulled into the bait cluster through it; or
    * is in a bait-free cluster (or chained into a bait cluster) and its passage's
      variance is below the threshold (``low_diversity_cluster``: coordinated,
      homogeneous poison).

    When several hold, the first listed wins. ``dense_only`` (per candidate, optional)
    limits the low-diversity rule to those candidates; ``exempt`` candidates are never
    flagged by the low-diversity rule; ``bait_near`` candidates need only be within
    ``eps`` of a bait, no cluster (all three: see :class:`EcoSafeRAG`'s
    ``scrutiny`` and ``keep_best``).
    """
    cand = labels[:n_candidates]
    bait_clusters = np.unique(labels[n_candidates:])
    bait_clusters = bait_clusters[bait_clusters >= 0]
    var = passage_variance[candidate_owner]
    low = var < variance_threshold
    deficit = (
        np.clip(1.0 - var / variance_threshold, 0.0, 1.0)
        if variance_threshold > 0
        else np.zeros_like(var)
    )
    in_abs = np.asarray(candidate_absolute, dtype=bool) & low
    clustered = np.isin(cand, bait_clusters)
    if bait_near is not None:
        clustered |= np.asarray(bait_near, dtype=bool)
    in_bait = clustered & (bait_distance <= eps) & ~in_abs
    in_dense = (cand >= 0) & low & ~in_abs & ~in_bait
    if dense_only is not None:
        in_dense &= np.asarray(dense_only, dtype=bool)
    if exempt is not None:
        in_dense &= ~np.asarray(exempt, dtype=bool)
    reasons = np.full(n_candidates, KEPT, dtype=object)
    evidence = np.zeros(n_candidates, dtype=np.float64)
    reasons[in_bait] = BAIT
    evidence[in_bait] = np.clip(1.0 - bait_distance[in_bait], 0.0, 1.0)
    reasons[in_dense] = DENSE
    evidence[in_dense] = deficit[in_dense]
    reasons[in_abs] = ABSOLUTE
    evidence[in_abs] = deficit[in_abs]
    return Judgement(reasons=reasons, evidence=evidence)


def bait_cores(similarities: np.ndarray, owner: np.ndarray, n_baits: int) -> np.ndarray:
    """Row of each bait's most query-similar sentence (the bait's "candidate")."""
    if n_baits == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-np.asarray(similarities), owner))  # by bait, best sentence first
    first = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
    return np.asarray(order[first], dtype=np.int64)


def best_per_passage(similarities: np.ndarray, owner: np.ndarray, n_passages: int) -> np.ndarray:
    """Mask of each passage's most query-similar sentence (one per non-empty passage).

    On a clean on-topic retrieval that sentence is where the answer usually is; the
    adaptive cutoff never prunes it (``keep_best``).
    """
    sims = np.asarray(similarities, dtype=np.float64)
    mask = np.zeros(sims.size, dtype=bool)
    if sims.size:
        order = np.lexsort((-sims, owner))
        first = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
        mask[order[first]] = True
    return mask


def unreached_best(
    candidates: np.ndarray, best: np.ndarray, owner: np.ndarray, n_passages: int
) -> np.ndarray:
    """Mask of the best sentence (``best``) of each passage with no sentence in
    ``candidates`` (``keep_passages``).

    Why: θ is relative to the best sentence of the whole retrieved set, so on an on-topic
    retrieval a genuine passage whose sentences each say less about the question than the
    best one (a multi-hop bridge, a paragraph of background) fell below θ everywhere and was
    removed whole — the only rule that removed clean passages on the HotpotQA and SQuAD dev
    sets. Its best sentence is made a candidate instead: still judged, no longer dropped for
    relevance alone.
    """
    reached = np.zeros(n_passages, dtype=bool)
    reached[owner[candidates]] = True
    return best & ~reached[owner]


_WORD = re.compile(r"\w+")


def strip_question(sentence: str, query: str) -> str:
    """``sentence`` with the question's words (in order, any punctuation or case between
    them) replaced by "this", as :func:`skeleton` does for the baits: what remains is
    how the sentence talks about the question, judged against the bait skeletons."""
    words = _WORD.findall(query.lower())
    if not words:
        return sentence
    pattern = r"\b" + r"\W+".join(re.escape(w) for w in words) + r"\b[?.!]?"
    out = re.sub(pattern, "this", unquote_plus(sentence), flags=re.IGNORECASE)
    return re.sub(r"\s+", " ", out).strip()


def skeleton(template: str) -> str:
    """A bait template without its ``{query}`` slot, for query-free bait vectors: the
    slot and the punctuation right after it are dropped and the space closed up
    ("{query}? Please ..." -> "Please ...", "The answer to {query} is ..." -> "The answer
    to this is ...")."""
    t = re.sub(r"^\s*\{query\}\s*[?.:]?\s*", "", template)
    t = t.replace("{query}", "this")
    return re.sub(r"\s+", " ", t).strip()


def pure_restatements(sentences: Sequence[str], query: str, contains: np.ndarray) -> np.ndarray:
    """Mask of sentences that are the question and nothing else (fewer than 3 words
    once the question is taken out): PoisonedRAG's retrieval prefix."""
    out = np.zeros(len(sentences), dtype=bool)
    for i in np.flatnonzero(contains).tolist():
        out[i] = len(_WORD.findall(strip_question(sentences[i], query))) < 3
    return out


def untrimmed(
    candidates: np.ndarray, emb: np.ndarray, seg: Segmentation, trim: str, offtopic_min: float
) -> np.ndarray:
    """The sentences below θ that θ does *not* remove under ``trim`` (they become
    candidates, judged by the bait and low-diversity rules like any other).

    Why (issue #23): on a real index the top-k is on the question's topic, and θ's
    compression changed the answers of a small generator on clean traffic with the answer
    sentence still in the context (``ragshield scan``, 2,000-passage index: accuracy 0.34
    with the chain vs 0.40 without, every changed answer's context trimmed by θ alone).
    ``"offtopic"`` keeps the one thing θ caught by accident: an instruction planted in a
    genuine paragraph is off that paragraph's topic (its coherence with the other
    sentences is below theirs), a genuine background sentence is not.
    """
    below = ~np.asarray(candidates, dtype=bool)
    if trim == "all":
        return np.zeros_like(below)
    if trim == "none":
        return below
    off = np.zeros(len(below), dtype=np.float64)
    for p in range(seg.n_passages):
        rows = seg.of(p)
        if below[rows].any():  # only a sentence below θ needs its passage's coherence
            off[rows] = offtopic(emb[rows])
    return below & (off < offtopic_min)
