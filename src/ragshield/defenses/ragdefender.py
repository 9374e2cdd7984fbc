"""RAGDefender (Kim, Lee, Koo, ACSAC 2025; seed ``ragdefender.txt`` §4), faithful and improved.

Example::

    from ragshield.defenses.ragdefender import RAGDefender, PaperRAGDefender
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    enc = SentenceTransformerEncoder()
    paper = PaperRAGDefender(encoder=enc, mode="single_hop")   # Eq. 1-7 as published
    ours = RAGDefender(encoder=enc)                            # guarded, multi-group
    result = ours.filter(question, retrieved)                  # a FilterResult
    print(result.details["n_adv"], result.details["groups"])

The math lives in pure functions (``cosine_matrix``, ``tfidf_top_terms``,
``clustering_estimate``, ``concentration_estimate``, ``frequency_scores``...) shared by both
classes, so every step is unit-testable on hand-built vectors without a model.

:class:`PaperRAGDefender` follows §4 of the paper. Its Stage 1 always yields two clusters, so
it removes at least one passage from *every* set, clean or not. :class:`RAGDefender` keeps
the paper's Stage 2 (Eq. 4-7) and changes what feeds it, each change behind a flag and
measured in ``benchmarks/bench_poisoning.py`` against the faithful version:

* ``guard`` — remove nothing unless some pair of passages is more similar than any pair of
  a clean retrieval (threshold calibrated on the clean sets of a dev split);
* ``multi_group`` — find *every* dense group (average-linkage agglomerative clustering
  with a distance threshold) instead of one of two clusters, so several adversarial groups
  pushing different answers, and k > 10, are handled;
* ``typo_copies`` — drop a passage that is a noisier near-copy of another retrieved passage
  (higher out-of-vocabulary rate under the encoder's WordPiece vocabulary, most character
  3-grams shared): typo attacks (GARAG) perturb copies of the golden passage, which would
  otherwise sit in their group and go with them;
* ``spare_outlier`` — inside a loose group, keep the member at its edge that is closest to
  the query: the genuine passage the generated ones were written about;
* ``loose_signature`` — once a tight group is found, a loose-level member is removed only if
  it carries the tight group's *signature*: a word every tight member uses and the question
  does not (for PoisonedRAG-style attacks, the target answer). Benign passages on the
  question's topic join the loose group through topic words alone and are kept.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from ragshield.defenses.base import check_retrieved, passage_vectors
from ragshield.defenses.params import Boolean, Interval, Options, ParamsMixin, ParamTable
from ragshield.embed.base import Encoder, l2_normalize
from ragshield.errors import InputError, check_query
from ragshield.types import Decision, FilterResult, RetrievedPassage

if TYPE_CHECKING:
    from ragshield.defenses.calibration import IndexProfile

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
        t0 = time.perf_counter()
        self._check_common()
        items, vectors, scores = self._inputs(query, retrieved)
        n = len(items)
        mode = self.resolve_mode(scores)
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


# --------------------------------------------------------------------------- improved


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
    """:func:`char_trigram_cosine` for every pair at once: binary sparse 3-gram rows, one
    sparse product (the per-text set building is the only Python loop)."""
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


_COSINE = Interval(Real, -1.0, 1.0)


class RAGDefender(_RAGDefenderBase):
    """RAGDefender with a clean-set guard, multi-group detection and golden-passage sparing.

    Each change to the paper's algorithm is a flag (all on by default) so it can be measured
    against :class:`PaperRAGDefender`; ``benchmarks/bench_poisoning.py`` prints the
    ablation. Thresholds were calibrated on the *dev* split (even-indexed questions) of the
    shared NQ and HotpotQA poisoning sets with the packaged MiniLM encoder, and reported on
    the test split; re-calibrate them for another encoder (``calibrate_guard`` helps).

    Parameters
    ----------
    encoder: used only when passages carry no embedding.
    mode: ``"single_hop"``, ``"multi_hop"`` or ``"auto"``. With ``multi_group``, multi-hop
        mode removes a group of only *two* passages when they are at least
        ``pair_threshold`` similar, since the several golden passages of a multi-hop
        question can legitimately be a close pair. Without ``multi_group`` the mode picks the
        paper's Stage 1 rule, as in :class:`PaperRAGDefender`.
    m, p: the paper's TF-IDF term count (fallback Stage 1) and Eq. 6 exponent.
    guard: remove nothing unless some pair is at least ``guard_threshold`` similar. Clean
        retrievals have no such pair; the paper's rule removes >= 1 passage from them.
    multi_group: detect every dense group by cutting an average-linkage tree twice —
        ``tight_threshold`` (groups of >= 2), then, on what is left,
        ``loose_threshold`` (groups of >= ``loose_min_size``) — instead of the paper's two
        clusters; all group members are adversarial (N_adv = their count).
    typo_copies: drop passages that are noisier near-copies of another retrieved passage
        (``copy_threshold`` embedding cosine, ``lexical_threshold`` character 3-gram cosine,
        ``noise_margin`` higher out-of-vocabulary rate under the encoder's WordPiece
        vocabulary). The original stays.
    spare_outlier: in each group of >= 3, keep the member that sits at its edge and near the
        query (see :func:`outlier_to_spare`; ``spare_margin``, ``query_weight``).
    loose_signature: when tight groups exist, remove a loose-level member only if it uses a
        word of a tight group's :func:`group_signature` (no signature: remove as before).
    linkage: scipy linkage method of the group tree.

    ``details``: ``mode``, ``guard`` (passed or not, ``max_similarity``), ``groups``
    (index lists with their level), ``spared``, ``typo_copies`` (copy, original) pairs,
    ``n_adv``, ``pairs`` and ``f`` (Eq. 6 over the pairs inside groups, the suspicion score).
    """

    name = "ragdefender"
    _parameter_constraints: ClassVar[ParamTable] = {
        **_RAGDefenderBase._parameter_constraints,
        "guard": [Boolean()],
        "multi_group": [Boolean()],
        "typo_copies": [Boolean()],
        "spare_outlier": [Boolean()],
        "loose_signature": [Boolean()],
        "guard_threshold": [_COSINE],
        "tight_threshold": [_COSINE],
        "loose_threshold": [_COSINE],
        "pair_threshold": [_COSINE],
        "copy_threshold": [_COSINE],
        "lexical_threshold": [Interval(Real, 0.0, 1.0)],
        "noise_margin": [Interval(Real, 0.0, 100.0)],
        "spare_margin": [Interval(Real, -2.0, 100.0)],
        "query_weight": [Interval(Real, 0.0, 100.0)],
        "loose_min_size": [Interval(int, 2, None)],
        "linkage": [Options("average", "complete", "single")],
        "restated_question": [Boolean()],
        "restate_min_words": [Interval(int, 1, None)],
        "require_evidence": [Boolean()],
        "dense_threshold": [_COSINE],
        "natural_similarity": [_COSINE, None],
    }

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        mode: Mode = "single_hop",
        m: int = 5,  # §5: m = 5 TF-IDF terms (fallback Stage 1 only)
        p: float = 2.0,  # §4.2 Eq. 6, §6.6: p = 2
        auto_gap: float = 2.0,  # Appendix A score-gap example (see resolve_mode)
        guard: bool = True,
        guard_threshold: float = 0.61,  # calibrate_guard(dev clean sets): max pair 0.589 + 0.02
        multi_group: bool = True,
        tight_threshold: float = 0.75,  # dev grid; PoisonedRAG pairs p5 0.87, gold-PR p95 0.81
        loose_threshold: float = 0.55,  # dev grid; blind pairs median 0.66
        loose_min_size: int = 3,  # a loose *pair* also occurs in clean sets: need 3
        pair_threshold: float = 0.86,  # multi-hop: dev HotpotQA golden pairs reach 0.85
        typo_copies: bool = True,
        copy_threshold: float = 0.5,  # dev: GARAG copy vs golden cosine p5 0.42-0.58
        lexical_threshold: float = 0.55,  # dev: char 3-grams, copies ~0.75 vs others <= 0.49
        noise_margin: float = 0.15,  # dev: copies' OOV rate exceeds the original's by >= 0.15
        spare_outlier: bool = True,
        loose_signature: bool = True,
        spare_margin: float = 0.06,  # dev grid
        query_weight: float = 1.0,  # dev grid
        linkage: Literal["average", "complete", "single"] = "average",
        restated_question: bool = True,
        restate_min_words: int = 4,  # shorter questions occur verbatim in natural text
        require_evidence: bool = True,
        dense_threshold: float = 0.9,  # SQuAD dev index: 1-NN cosine p99.9 0.896
        natural_similarity: float | None = None,
    ) -> None:
        self.encoder = encoder
        self.restated_question = restated_question
        self.restate_min_words = restate_min_words
        self.require_evidence = require_evidence
        self.dense_threshold = dense_threshold
        self.natural_similarity = natural_similarity
        self.mode = mode
        self.m = m
        self.p = p
        self.auto_gap = auto_gap
        self.guard = guard
        self.guard_threshold = guard_threshold
        self.multi_group = multi_group
        self.tight_threshold = tight_threshold
        self.loose_threshold = loose_threshold
        self.loose_min_size = loose_min_size
        self.pair_threshold = pair_threshold
        self.typo_copies = typo_copies
        self.copy_threshold = copy_threshold
        self.lexical_threshold = lexical_threshold
        self.noise_margin = noise_margin
        self.spare_outlier = spare_outlier
        self.loose_signature = loose_signature
        self.spare_margin = spare_margin
        self.query_weight = query_weight
        self.linkage = linkage
        self._vocabulary: frozenset[str] | None = None

    def warm_up(self) -> None:
        """Load the whole-word WordPiece vocabulary of the packaged MiniLM (idempotent);
        it ships with the encoder package, so nothing is downloaded."""
        if self._vocabulary is None:
            from tokenizers import Tokenizer

            from ragshield.embed.sentence_transformer import packaged_model_path

            tok = Tokenizer.from_file(str(packaged_model_path() / "tokenizer.json"))
            self._vocabulary = frozenset(w for w in tok.get_vocab() if not w.startswith("##"))

    def _noise(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        assert self._vocabulary is not None
        return oov_rate(texts, self._vocabulary)

    def _check(self) -> None:
        self._check_common()

    def calibrate(self, profile: IndexProfile) -> None:
        """Take the index's natural nearest-neighbour similarity (recorded at index time,
        :mod:`ragshield.defenses.calibration`) unless ``natural_similarity`` was set."""
        if self.natural_similarity is None:
            self.natural_similarity = round(float(profile.natural_similarity), 4)

    def evidence_threshold(self) -> float:
        """Group density that no natural neighbourhood of the index reaches: the index's own
        calibration (``natural_similarity``, recorded at index time) when known, else
        ``dense_threshold``; never below ``tight_threshold``."""
        base = self.dense_threshold if self.natural_similarity is None else self.natural_similarity
        return max(base, self.tight_threshold)

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        self._check()
        items, vectors, scores = self._inputs(query, retrieved)
        n = len(items)
        mode = self.resolve_mode(scores)
        details: dict[str, Any] = {
            "mode": mode, "n_adv": 0, "groups": [], "spared": [], "typo_copies": [],
            "f": [0.0] * n, "pairs": [], "signature_kept": [], "restated": [],
            "trusted_kept": [], "unevidenced": [],
        }  # fmt: skip
        work = _Work(n)
        texts = [r.text for r in items]
        self._stage_restated(query, texts, work, details)
        if n < 2:
            details["guard"] = {"passed": False, "max_similarity": None}
            return self._finish(items, work, np.zeros(n), details, t0)
        sim = cosine_matrix(vectors)
        if not self._stage_guard(sim, work, details):
            return self._finish(items, work, np.zeros(n), details, t0)
        self._stage_typo_copies(sim, texts, work, details)
        if self.multi_group:
            self._stage_groups(query, sim, texts, scores, mode, work, details)
            np.fill_diagonal(work.allowed, False)
            iu = np.triu_indices(n, k=1)
            mask = work.allowed[iu]
            ps = frequency_scores(sim, int(mask.sum()), self.p, allowed=mask)
        else:
            ps = self._stage_paper(sim, vectors, texts, mode, work, details)
        details.update(pairs=ps.pairs.tolist(), f=ps.f.tolist())
        return self._finish(items, work, ps.f, details, t0)

    # ---- stages, in the order filter() runs them

    def _stage_restated(
        self, query: str, texts: Sequence[str], work: _Work, details: dict[str, Any]
    ) -> None:
        """Passages that contain the whole question verbatim: PoisonedRAG's black-box
        passages are ``question + "." + text`` so that they win retrieval. Natural text
        almost never restates a question of >= ``restate_min_words`` words word for word
        (real SQuAD / HotpotQA indexes: 0 of the benign top-10 passages of the dev
        questions), so one such passage is evidence on its own, with no group needed."""
        if not self.restated_question:
            return
        for i in np.flatnonzero(restates_question(query, texts, self.restate_min_words)):
            work.remove(int(i), "restates the question verbatim (PoisonedRAG's retrieval trick)")
            work.evidence[i] = True
            details["restated"].append(int(i))

    def _stage_guard(self, sim: np.ndarray, work: _Work, details: dict[str, Any]) -> bool:
        off = sim.copy()
        np.fill_diagonal(off, -np.inf)
        max_sim = float(off.max())
        passed = (not self.guard) or max_sim >= self.guard_threshold or bool(work.evidence.any())
        details["guard"] = {"passed": passed, "max_similarity": max_sim,
                            "threshold": self.guard_threshold if self.guard else None}  # fmt: skip
        return passed

    def _stage_typo_copies(
        self, sim: np.ndarray, texts: Sequence[str], work: _Work, details: dict[str, Any]
    ) -> None:
        if not self.typo_copies:
            return
        copies, pairs = typo_copies(
            sim, texts, self._noise,
            copy_threshold=self.copy_threshold,
            lexical_threshold=self.lexical_threshold,
            noise_margin=self.noise_margin,
        )  # fmt: skip
        for c, o in pairs:
            work.remove(c, f"noisier near-copy of passage {o} (typo perturbation)")
            work.allowed[c, o] = work.allowed[o, c] = True
            work.victim[o] = True
        work.evidence |= copies
        details["typo_copies"] = pairs

    def _stage_groups(
        self,
        query: str,
        sim: np.ndarray,
        texts: Sequence[str],
        scores: np.ndarray,
        mode: str,
        work: _Work,
        details: dict[str, Any],
    ) -> None:
        """Dense groups (tight, then loose). With ``require_evidence`` a group is removed only
        when it carries attack evidence beyond density: a member that restates the question
        or is a typo copy, a density no natural neighbourhood of the index reaches
        (:meth:`evidence_threshold`), or — for a loose group — the signature of an evidenced
        tight group (the target answer). On-topic retrievals are dense by nature; density
        alone removed ~40 % of their benign passages."""
        dense = self.evidence_threshold()
        levels = [
            ("tight", self.tight_threshold, 2),
            ("loose", self.loose_threshold, self.loose_min_size),
        ]
        signature: set[str] = set()
        pool = np.flatnonzero(~work.removed | work.evidence)
        for level, threshold, min_size in levels:
            for g in dense_groups(sim, pool, threshold, self.linkage):
                if g.size < min_size or (level == "loose" and work.removed[g].all()):
                    continue
                sub = sim[np.ix_(g, g)]
                density = float((sub.sum() - np.trace(sub)) / (g.size * (g.size - 1)))
                evidenced = bool(work.evidence[g].any()) or density >= dense
                if level == "loose" and self.loose_signature and signature:
                    bearing = [bool(signature & content_words(texts[i])) for i in g.tolist()]
                    details["signature_kept"].extend(
                        i for i, b in zip(g.tolist(), bearing, strict=True) if not b
                    )
                    g = g[bearing]
                    evidenced = evidenced or g.size > 0
                    if g.size == 0:
                        continue
                if self.require_evidence and not evidenced:
                    details["unevidenced"].append({"level": level, "members": g.tolist(),
                                                   "density": density})  # fmt: skip
                    continue
                if (
                    g.size == 2
                    and mode == "multi_hop"
                    and sim[g[0], g[1]] < self.pair_threshold
                    and not work.evidence[g].any()
                ):
                    continue  # may be two golden passages of one multi-hop question
                originals = g[self._copy_originals(g, texts) & ~work.evidence[g]]
                spared: int | None = None
                if originals.size == 0 and self.spare_outlier:
                    spared, _ = outlier_to_spare(
                        sim, g, scores, self.query_weight, self.spare_margin
                    )
                    if spared is not None and work.evidence[spared]:
                        spared = None  # a restated or typo-copied passage is never spared
                details["groups"].append({"level": level, "members": g.tolist(), "spared": spared,
                                          "density": density})  # fmt: skip
                if spared is not None:
                    details["spared"].append(spared)
                protected = (work.victim[g] & ~work.evidence[g]) | np.isin(g, originals)
                hit = g[(g != spared) & ~protected]
                if level == "tight":
                    signature |= group_signature([texts[i] for i in hit.tolist()], query)
                work.allowed[np.ix_(hit, hit)] = True
                for i in hit.tolist():
                    work.remove(
                        i, f"member of a dense group ({level}, average cosine >= {threshold})"
                    )
            pool = np.flatnonzero(~work.removed)

    def _copy_originals(self, group: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Members of a group that are the original of lexical near-copies inside it: GARAG
        makes typo copies of the golden passage, which then sits in their dense group. The
        cleanest of each near-copy cluster (lowest out-of-vocabulary rate, strictly below
        every copy's) is the original and stays; the copies go."""
        keep = np.zeros(group.size, dtype=bool)
        if not (self.typo_copies and self.require_evidence) or group.size < 2:
            return keep
        members = [texts[i] for i in group.tolist()]
        lex = trigram_cosine_matrix(members)
        np.fill_diagonal(lex, 0.0)
        noise = self._noise(members)
        for i in range(group.size):
            copies = np.flatnonzero(lex[i] >= self.lexical_threshold)
            same = np.array([members[j] == members[i] for j in copies], dtype=bool)
            cleaner = (noise[i] < noise[copies]) | (same & (i < copies))
            keep[i] = copies.size > 0 and bool(cleaner.all())  # exact duplicates: the first
        return keep

    def _stage_paper(
        self,
        sim: np.ndarray,
        vectors: np.ndarray,
        texts: Sequence[str],
        mode: str,
        work: _Work,
        details: dict[str, Any],
    ) -> PairScores:
        """The paper's Stage 1 + 2 on what the earlier stages left (``multi_group=False``)."""
        n = sim.shape[0]
        rest = np.flatnonzero(~work.removed)
        sub = sim[np.ix_(rest, rest)]
        if rest.size >= 2 and mode == "single_hop":
            est = clustering_estimate(vectors[rest], [texts[i] for i in rest.tolist()], self.m)
            n_adv_rest = est.n_adv
            details["groups"] = [rest[g].tolist() for g in _labels_to_groups(est.labels)]
            details["top_terms"] = list(est.terms.terms)
        elif rest.size >= 2:
            conc = concentration_estimate(sub)
            n_adv_rest = conc.n_adv
            details["groups"] = [rest[conc.flagged].tolist(), rest[~conc.flagged].tolist()]
        else:
            n_adv_rest = 0
        sub_ps = frequency_scores(sub, n_pairs_for(n_adv_rest), self.p)
        for i in rest[top_n_by_score(sub_ps.f, n_adv_rest)].tolist():
            work.remove(i, f"top-{n_adv_rest} frequency score f_i (Eq. 7)")
        f = np.zeros(n)
        f[rest] = sub_ps.f
        return PairScores(
            rest[sub_ps.pairs] if sub_ps.pairs.size else sub_ps.pairs, sub_ps.pair_sims, f
        )

    def _finish(
        self,
        items: list[RetrievedPassage],
        work: _Work,
        f: np.ndarray,
        details: dict[str, Any],
        t0: float,
    ) -> FilterResult:
        """Source trust last: a passage whose metadata says ``trusted`` is never removed, and
        the details say which ones were kept for that reason."""
        for i in np.flatnonzero(work.removed).tolist():
            if items[i].passage.metadata.get("trusted") is True:
                work.removed[i] = False
                details["trusted_kept"].append(i)
        remove = np.flatnonzero(work.removed)
        details["n_adv"] = int(remove.size)
        if len(details["f"]) != len(items):
            details["f"] = [0.0] * len(items)
        return self._result(items, remove, np.asarray(f, dtype=np.float64) if len(f) else f,
                            work.reasons, details, t0)  # fmt: skip


class _Work:
    """What the stages of one :meth:`RAGDefender.filter` call decide, shared between them."""

    def __init__(self, n: int) -> None:
        self.removed = np.zeros(n, dtype=bool)
        self.evidence = np.zeros(n, dtype=bool)  # restated or typo copy: attack evidence
        self.victim = np.zeros(n, dtype=bool)  # the original a typo copy was made from
        self.allowed = np.zeros((n, n), dtype=bool)  # pairs that feed Eq. 6
        self.reasons: dict[int, str] = {}

    def remove(self, i: int, reason: str) -> None:
        self.removed[i] = True
        self.reasons.setdefault(i, reason)


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
