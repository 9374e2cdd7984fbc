"""Attack evidence beyond density for ragshield's RAGDefender: lexical near-copies and
typo noise (GARAG), dense groups and their answer signature (PoisonedRAG's target), the
group member to spare, and a passage that restates the question word for word.

Hand-written because no library computes these exact signals; each is a small pure function
over texts or a similarity matrix, unit-tested in ``tests/test_ragdefender.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

from ragshield.errors import InputError

_WORD = re.compile(r"[^\W\d_]+")


def oov_rate(texts: Sequence[str], vocabulary: frozenset[str]) -> np.ndarray:
    """Share of each text's (lower-cased, alphabetic) words that are not a whole-word entry
    of the encoder's WordPiece vocabulary, i.e. that the tokenizer must split into pieces.

    A misspelt word is almost never a whole vocabulary entry, so typo-perturbed copies
    (GARAG) score ~0.47 while natural passages score ~0.06 (dev golden passages: p95 0.18).
    A cheap proxy for WordPiece fragmentation (set look-ups, no tokenisation). Only
    *differences* between near-copies are used, so rare names alone trigger nothing.
    """
    out = np.zeros(len(texts), dtype=np.float64)
    for k, text in enumerate(texts):
        words = _WORD.findall(text.lower())
        if words:
            out[k] = sum(w not in vocabulary for w in words) / len(words)
    return out


@lru_cache(maxsize=20000)  # a real index returns the same passages again and again
def _char_trigrams(text: str) -> frozenset[str]:
    grams: set[str] = set()
    for w in text.lower().split():
        w = f" {w} "
        grams.update(w[i : i + 3] for i in range(len(w) - 2))
    return frozenset(grams)


def char_trigram_cosine(a: str, b: str) -> float:
    """Cosine of the two texts' sets of word-bounded character 3-grams.

    High for a text and its typo copy (GARAG vs golden: median 0.75), low for two texts
    that merely say the same thing (PoisonedRAG or blind vs golden: p95 0.40-0.49).
    """
    return _set_cosine(_char_trigrams(a), _char_trigrams(b))


def _set_cosine(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


def typo_copies(
    sim: np.ndarray,
    texts: Sequence[str],
    noise: Callable[[Sequence[str]], np.ndarray],
    *,
    copy_threshold: float,
    lexical_threshold: float,
    noise_margin: float,
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Passages that are noisier copies of another retrieved passage.

    ``i`` is a copy of ``j`` when they are close in embedding space (``copy_threshold``),
    ``i`` is at least ``noise_margin`` noisier (``noise``, e.g. :func:`oov_rate`) and they
    share most character 3-grams (``lexical_threshold``). Returns the copy mask and the
    ``(copy, original)`` pairs. Noise is measured only for passages with a close
    neighbour and 3-grams only for the candidate pairs.
    """
    n = sim.shape[0]
    mask = np.zeros(n, dtype=bool)
    close = sim >= copy_threshold
    np.fill_diagonal(close, False)
    involved = np.flatnonzero(close.any(axis=1)).tolist()
    if len(involved) < 2:
        return mask, []
    level = np.zeros(n)
    level[involved] = noise([texts[i] for i in involved])
    ii, jj = np.nonzero(close & (level[:, None] - level[None, :] >= noise_margin))
    if ii.size == 0:
        return mask, []
    cand = np.union1d(ii, jj)
    lex = trigram_cosine_matrix([texts[k] for k in cand])
    pos = np.searchsorted(cand, np.arange(n))  # index of a passage within `cand`
    ok = lex[pos[ii], pos[jj]] >= lexical_threshold
    mask[ii[ok]] = True
    return mask, [(int(a), int(b)) for a, b in zip(ii[ok], jj[ok], strict=True)]


def trigram_cosine_matrix(texts: Sequence[str]) -> np.ndarray:
    """:func:`char_trigram_cosine` for every pair at once. A retrieved top-k (up to 64
    texts) intersects the cached 3-gram sets pair by pair (C-level set operations, ~0.1 ms
    at k = 10); larger lists use binary sparse rows and one sparse product."""
    if len(texts) <= _PAIRWISE_MAX:
        sets = [_char_trigrams(t) for t in texts]
        n = len(sets)
        out = np.zeros((n, n), dtype=np.float64)
        for i in range(n):
            out[i, i] = 1.0 if sets[i] else 0.0
            for j in range(i + 1, n):
                out[i, j] = out[j, i] = _set_cosine(sets[i], sets[j])
        return out
    from scipy.sparse import csr_matrix

    vocab: dict[str, int] = {}
    indptr = [0]
    indices: list[int] = []
    for t in texts:
        indices.extend(vocab.setdefault(g, len(vocab)) for g in _char_trigrams(t))
        indptr.append(len(indices))
    x = csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(texts), max(len(vocab), 1)))
    inter = np.asarray((x @ x.T).toarray(), dtype=np.float64)
    size = np.sqrt(np.diag(inter))
    denom = np.outer(size, size)
    return np.divide(inter, denom, out=np.zeros_like(inter), where=denom > 0)


_PAIRWISE_MAX = 64  # above this many texts the sparse product is faster (ours, measured)


def dense_groups(
    sim: np.ndarray, members: np.ndarray, threshold: float, linkage: str
) -> list[np.ndarray]:
    """Flat clusters of ``members`` whose average-linkage (or ``linkage``) cosine similarity
    is at least ``threshold``: one cut of a scipy hierarchical-clustering tree."""
    if members.size < 2:
        return [members] if members.size else []
    from scipy.cluster.hierarchy import fcluster
    from scipy.cluster.hierarchy import linkage as tree
    from scipy.spatial.distance import squareform

    dist = 1.0 - sim[np.ix_(members, members)]
    dist = np.clip((dist + dist.T) / 2.0, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    labels = fcluster(
        tree(squareform(dist, checks=False), method=linkage), 1.0 - threshold, "distance"
    )
    return [members[labels == c] for c in np.unique(labels)]


_TOKEN = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> frozenset[str]:
    """Lower-cased word tokens minus English stop words (scikit-learn's list)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(w for w in _TOKEN.findall(text.lower()) if w not in ENGLISH_STOP_WORDS)


def group_signature(texts: Sequence[str], query: str) -> frozenset[str]:
    """Words every text of a group uses and the query does not: what a batch of generated
    passages asserts beyond the question (PoisonedRAG's target answer). Empty if none."""
    if not texts:
        return frozenset()
    common = frozenset.intersection(*(content_words(t) for t in texts))
    return common - content_words(query)


def outlier_to_spare(
    sim: np.ndarray, group: np.ndarray, query_scores: np.ndarray, query_weight: float, margin: float
) -> tuple[int | None, np.ndarray]:
    """The member of a group (size >= 3) that does not belong to it, if any.

    A batch of generated adversarial passages is mutually similar; a genuine passage that
    the batch was written *about* (the golden one) joins the group through them but sits at
    its edge: its mean similarity to the others is below the others' mean similarity among
    themselves (the *deficit*), and it is more similar to the query than the group is on
    average (retrieval ranks the answer-bearing passage high). score = deficit +
    ``query_weight`` × query excess; the best-scoring member is spared when its score is at
    least ``margin``. Returns the spared index (or None) and every member's score.
    """
    k = group.size
    if k < 3:
        return None, np.zeros(k)
    sub = sim[np.ix_(group, group)].copy()
    np.fill_diagonal(sub, 0.0)
    row = sub.sum(axis=1)
    total = row.sum()  # each pair counted twice
    mine = row / (k - 1)
    others = (total - 2.0 * row) / ((k - 1) * (k - 2))
    q = query_scores[group]
    score = (others - mine) + query_weight * (q - q.mean())
    best = int(np.argmax(score))
    return (int(group[best]) if score[best] >= margin else None), score


_WORDS = re.compile(r"[a-z0-9]+")


def restates_question(query: str, texts: Sequence[str], min_words: int = 4) -> np.ndarray:
    """Which texts contain every word of the question, in order and contiguous (case and
    punctuation ignored). Questions shorter than ``min_words`` never match."""
    q = _WORDS.findall(query.lower())
    out = np.zeros(len(texts), dtype=bool)
    if len(q) < min_words:
        return out
    needle = " " + " ".join(q) + " "
    for i, t in enumerate(texts):
        out[i] = needle in " " + " ".join(_WORDS.findall(t.lower())) + " "
    return out


def calibrate_guard(
    max_pair_similarities: Sequence[float], quantile: float = 1.0, margin: float = 0.02
) -> float:
    """A guard threshold from clean retrieval sets: the given quantile of their largest
    pairwise similarity plus a margin (use a dev split, never the sets you report on)."""
    v = np.asarray(max_pair_similarities, dtype=np.float64)
    if v.size == 0:
        raise InputError("calibrate_guard needs at least one clean set's max pair similarity.")
    return float(np.quantile(v, quantile) + margin)
