"""EcoSafeRAG (Yao et al., EMNLP 2025 Findings; seed ``ecosaferag.txt``): sentence-level
context analysis with bait-guided DBSCAN.

Example::

    from ragshield.defenses.ecosaferag import EcoSafeRAG
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    f = EcoSafeRAG(encoder=SentenceTransformerEncoder())
    res = f.filter(question, retrieved)           # a FilterResult
    for d in res.decisions:                       # one Decision per removed sentence
        print(d.reason, d.scores["suspicion"], d.text)
    clean_contexts = [r.text for r in res.kept]   # only the kept sentences, source order

The method, stage by stage (each stage is a pure function below, so it is testable on
hand-built vectors without a model):

1. :func:`segment_passages` — every retrieved passage is cut into sentences with the
   offline ``sentencex`` segmenter; each sentence keeps its passage index and position.
   Cutting breaks the continuous token sequence adversarial suffixes and injected
   instructions rely on (paper, Mechanism 1).
2. :func:`dual_threshold` — sentences whose query similarity reaches the adaptive cutoff
   ``θ = tau · max similarity`` of this retrieval are candidates, the rest are pruned as
   irrelevant (this is where the 48–80 % token saving comes from). Sentences at or above
   the absolute cutoff (0.92) are candidates *regardless*, and are put under scrutiny:
   natural text almost never restates the question that closely, attacks that must be
   retrieved for it do (PoisonedRAG prefixes the question itself).
3. :func:`context_vectors` / :func:`contextual_variance` — each candidate is represented
   by itself plus the mean of its *context* (the other sentences of its passage inside a
   window); a passage's contextual variance is the spread ``1 − ‖mean‖²`` of its
   non-core sentences' unit vectors (non-core = below the absolute cutoff, i.e. not a
   restatement of the question). Machine-written poison is homogeneous: low variance.
4. :func:`bait_dbscan` / :func:`judge_candidates` — synthetic bait passages built from
   known attack structures (:mod:`ragshield.defenses.baits`) are clustered together with
   the candidates (DBSCAN, cosine). A candidate is malicious when it joins a bait
   cluster, when it sits in a bait-free dense cluster and its passage is low-diversity,
   or when it is above the absolute cutoff and its passage is low-diversity.
5. The generator gets only the clean candidates, in source order.

Choices where the paper (only a summary is available; no public code) leaves a detail
open — each is a constructor argument; the defaults were selected on the NQ dev split
(even question positions) by ``benchmarks/bench_ecosaferag.py``, never on test questions:

* adaptive cutoff: ``θ = tau · max`` (PEERS.md: "θ = τ·max similarity", τ not given),
  the max taken over the sentences *below* the absolute cutoff, so a restated question
  (similarity ~1) cannot lift θ and prune the genuine evidence; dev: ``tau = 0.4``
  (0.2 keeps more gold but saves ~20 % of the tokens, 0.5+ loses gold fast);
* context window: all other sentences of the passage (PEERS.md: "a candidate's context =
  the other sentences of its passage"); ``context_window=w`` restricts it to ±w;
* feature: ``(1 − context_weight) · sentence + context_weight · context``, then the query
  direction is projected out (``remove_query=True``). Every candidate and every bait
  mentions the question, so without the projection DBSCAN groups by topic and absorbs the
  golden passage into the bait cluster (dev: gold answer kept fell to ~0.1); after it,
  what is left is *how* a passage talks about the question (instructions, pleading, a
  forced answer) — the attack structure. On dev every context mix raised the attack
  success (0.3: +5 points, 0.5: +23 points), so ``context_weight = 0``: the context enters
  through the contextual variance, which the paper names as the signal;
* contextual variance: the spread of the passage's non-core sentences, compared with
  ``variance_threshold`` (dev: 0.25);
* a passage never vouches for itself: two sentences of the same passage (or bait) are
  never neighbours in DBSCAN, otherwise any long passage forms a "dense cluster" of its
  own near-identical context vectors;
* DBSCAN chains: a candidate counts as a bait-cluster member only when it is within eps
  of a bait itself; one reached only through other candidates is judged by the
  low-diversity rule (otherwise a genuine sentence on the same facts as a poisoned one is
  pulled into the bait cluster through it);
* baits are whole passages instantiated with the question (the paper's 4 types x 4;
  query-independent baits were far weaker on dev);
* clause split (``split_clauses=True``, a ragshield addition): sentencex does not end a
  sentence at a colon, so an instruction ending in ``":`` (the published PromptInject
  strings do) was glued to the genuine sentence after it and kept with it. Found on the
  test table of the held-out ``injection-published`` setting, then checked on dev: the
  split left every other dev cell unchanged (clean gold kept 0.93 both ways) and cut
  that setting's dev ASR from 0.72 to 0.28;
* a flag on one candidate removes only the flagged sentence (``scope="sentence"``: a
  hijacked genuine passage keeps its facts) or its whole passage (``"passage"``).
  Low-diversity and absolute-cutoff flags are properties of the passage and always remove
  it whole, and so does any flag in a passage that restates the question (an attacker
  wrote it to be retrieved: its other sentences are no evidence).

Suspicion (``Decision.scores["suspicion"]``, higher = more adversarial): 0 for a sentence
pruned as irrelevant (not judged adversarial, only off-topic); ``0.5 + 0.5·e`` for a
sentence judged malicious, where ``e`` in [0, 1] is the evidence — cosine similarity to
the nearest bait for a bait-cluster flag, ``1 − variance / variance_threshold`` for a
low-diversity or absolute-cutoff flag. So ``suspicion ≥ 0.5`` means "judged malicious".
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from sklearn.cluster import DBSCAN

from ragshield.defenses.baits import BAIT_TEMPLATES, DEFAULT_BAIT_TYPES, build_baits
from ragshield.defenses.base import check_retrieved
from ragshield.embed.base import Encoder, l2_normalize
from ragshield.errors import InputError, check_float, check_int, check_query
from ragshield.text import split_sentences
from ragshield.types import Decision, FilterResult, RetrievedPassage

Scope = Literal["passage", "sentence"]

# Reason codes, in Decision.reason and details["reasons"].
PRUNED = "below_adaptive_threshold"
BAIT = "bait_cluster"
DENSE = "low_diversity_cluster"
ABSOLUTE = "absolute_threshold_low_diversity"
COLLATERAL = "passage_flagged"
EMPTY = "empty_passage"
#: What query-independent baits (``bait_query=False``) are instantiated with.
GENERIC_QUERY = "this question"
KEPT = "kept"

# Distance given to pairs that must never be DBSCAN neighbours (same passage / same bait);
# larger than any admissible eps (<= 2, the largest cosine distance).
_APART = 3.0
_FIXED_CACHE = 4096  # query-independent bait sentences kept per filter
_CLAUSE = re.compile(r"(?<=:)\s+(?=[A-Z\"“])")


# --------------------------------------------------------------------------- pure stages


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

    When several hold, the first listed wins.
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
    in_bait = np.isin(cand, bait_clusters) & (bait_distance <= eps) & ~in_abs
    in_dense = (cand >= 0) & low & ~in_abs & ~in_bait
    reasons = np.full(n_candidates, KEPT, dtype=object)
    evidence = np.zeros(n_candidates, dtype=np.float64)
    reasons[in_bait] = BAIT
    evidence[in_bait] = np.clip(1.0 - bait_distance[in_bait], 0.0, 1.0)
    reasons[in_dense] = DENSE
    evidence[in_dense] = deficit[in_dense]
    reasons[in_abs] = ABSOLUTE
    evidence[in_abs] = deficit[in_abs]
    return Judgement(reasons=reasons, evidence=evidence)


# --------------------------------------------------------------------------- the filter


class EcoSafeRAG:
    """Sentence-level poisoning / injection / suffix defense (a :class:`PassageFilter`).

    Parameters
    ----------
    encoder: embeds sentences, baits and the query (required at ``filter`` time: the
        retriever's passage vectors cannot stand in for sentence vectors).
    tau: adaptive cutoff coefficient, ``θ = tau · max`` sentence–query similarity.
    abs_threshold: absolute similarity cutoff; sentences at or above it go to scrutiny.
    context_window: ±sentences forming a candidate's context; ``None`` = whole passage.
    context_weight: weight of the context vector in a candidate's feature (0 = sentence
        only, 1 = context only).
    eps, min_samples: DBSCAN radius (cosine distance) and density.
    variance_threshold: contextual variance below which a passage counts as homogeneous.
    bait_types: built-in bait families (:data:`ragshield.defenses.baits.BAIT_TEMPLATES`).
    baits: custom bait templates containing ``{query}``; replaces ``bait_types``. An empty
        list disables baits (ablation: no cold-start help).
    bait_query: instantiate the baits with the query (as attacks mention it); ``False``
        uses a fixed phrase instead, so the baits are encoded once per filter (faster,
        but far weaker on the dev split: see the benchmark).
    remove_query: project the query direction out of every feature (see module docstring).
    scope: what a bait-cluster flag removes: the whole ``"passage"`` or the ``"sentence"``.
    language: sentencex language code for segmentation.
    split_clauses: also cut sentences after "colon + capital letter" (see
        :func:`segment_passages`).

    ``details`` of a result: ``theta``, ``max_similarity``, ``n_sentences``,
    ``n_candidates``, ``n_kept_sentences``, ``n_baits``, ``labels`` (per candidate),
    ``bait_clusters``, ``variance`` (per passage), ``flagged_passages``, ``words_before``,
    ``words_after``, ``timings``.
    """

    name = "ecosaferag"

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        tau: float = 0.4,  # paper: θ = τ·max (PEERS.md), τ not given -> NQ dev sweep
        abs_threshold: float = 0.92,  # paper's absolute cutoff (seed, PEERS.md): 0.92
        context_window: int | None = None,  # paper: context = other sentences (PEERS.md)
        context_weight: float = 0.0,  # not given; NQ dev sweep: any context mix raised ASR
        eps: float = 0.6,  # paper: DBSCAN eps 0.6 (PEERS.md; seed's eps sweep)
        min_samples: int = 4,  # paper: DBSCAN min_samples 4 (PEERS.md)
        variance_threshold: float = 0.25,  # Eq. 6 gives no value: NQ dev-split sweep
        bait_types: Sequence[str] = DEFAULT_BAIT_TYPES,  # paper: 4 types x 4 = 16 (PEERS.md)
        baits: Sequence[str] | None = None,
        bait_query: bool = True,
        remove_query: bool = True,
        scope: Scope = "sentence",
        language: str = "en",
        split_clauses: bool = True,  # ragshield addition, not in the paper: see docstring
    ) -> None:
        self.encoder = encoder
        self.tau = tau
        self.abs_threshold = abs_threshold
        self.context_window = context_window
        self.context_weight = context_weight
        self.eps = eps
        self.min_samples = min_samples
        self.variance_threshold = variance_threshold
        self.bait_types = bait_types
        self.baits = baits
        self.bait_query = bait_query
        self.remove_query = remove_query
        self.scope = scope
        self.language = language
        self.split_clauses = split_clauses
        self._fixed: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------ config

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments (without the encoder), so ``EcoSafeRAG(encoder=e,
        **f.get_params())`` rebuilds an identical filter from a config file."""
        return {
            "tau": self.tau,
            "abs_threshold": self.abs_threshold,
            "context_window": self.context_window,
            "context_weight": self.context_weight,
            "eps": self.eps,
            "min_samples": self.min_samples,
            "variance_threshold": self.variance_threshold,
            "bait_types": list(self.bait_types),
            "baits": None if self.baits is None else list(self.baits),
            "bait_query": self.bait_query,
            "remove_query": self.remove_query,
            "scope": self.scope,
            "language": self.language,
            "split_clauses": self.split_clauses,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.name, "params": self.get_params()}

    @classmethod
    def from_dict(cls, data: dict[str, Any], encoder: Encoder | None = None) -> EcoSafeRAG:
        if data.get("type") != cls.name:
            raise InputError(f"not an {cls.name} config: type is {data.get('type')!r}.")
        return cls(encoder=encoder, **dict(data.get("params", {})))

    def _check_params(self) -> None:
        owner = type(self).__name__
        check_float(self.tau, "tau", owner, low=0.0, high=1.0)
        check_float(self.abs_threshold, "abs_threshold", owner, low=0.0, high=1.0, low_open=True)
        if self.context_window is not None:
            check_int(self.context_window, "context_window", owner, low=1)
        check_float(self.context_weight, "context_weight", owner, low=0.0, high=1.0)
        check_float(self.eps, "eps", owner, low=0.0, high=2.0, low_open=True)
        check_int(self.min_samples, "min_samples", owner, low=1)
        check_float(self.variance_threshold, "variance_threshold", owner, low=0.0, high=1.0)
        if self.scope not in ("passage", "sentence"):
            raise InputError(
                f"The 'scope' parameter of {owner} must be one of 'passage', 'sentence'. "
                f"Got {self.scope!r} instead."
            )
        for flag in ("remove_query", "bait_query", "split_clauses"):
            if not isinstance(getattr(self, flag), bool):
                raise InputError(
                    f"The '{flag}' parameter of {owner} must be a bool. "
                    f"Got {getattr(self, flag)!r} instead."
                )
        bad_types = isinstance(self.bait_types, str) or any(
            t not in BAIT_TEMPLATES for t in self.bait_types
        )
        if self.baits is None and bad_types:
            raise InputError(
                f"The 'bait_types' parameter of {owner} must be a list of names from "
                f"{', '.join(BAIT_TEMPLATES)}. Got {self.bait_types!r} instead."
            )
        if self.encoder is None:
            raise InputError(
                f"{owner} needs an encoder to embed sentences: pass encoder=... (the "
                "retriever's passage vectors cannot stand in for sentence vectors)."
            )

    def bait_texts(self, query: str) -> list[str]:
        """The bait passages for ``query`` (the same for every query when
        ``bait_query=False``)."""
        q = query if self.bait_query else GENERIC_QUERY
        if self.baits is None:
            return build_baits(q, self.bait_types)
        return build_baits(q, templates=self.baits) if len(self.baits) else []

    def _encode_all(
        self, query: str, sentences: tuple[str, ...], bait_sentences: tuple[str, ...]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(query vector, sentence vectors, bait sentence vectors)`` in one encoder call.

        Bait sentences that do not mention the query are the same for every query: they
        are encoded once and kept in this filter (``_fixed``), so each query only pays for
        its own sentences and the ~16 query-bearing bait sentences.
        """
        assert self.encoder is not None
        needle = query.strip().rstrip("?").strip() if self.bait_query else GENERIC_QUERY
        fresh = [s for s in dict.fromkeys(bait_sentences) if needle in s or s not in self._fixed]
        vecs = l2_normalize(self.encoder.encode([query, *sentences, *fresh]))
        n = 1 + len(sentences)
        lookup = dict(zip(fresh, vecs[n:], strict=True))
        for s, v in lookup.items():
            if needle not in s and len(self._fixed) < _FIXED_CACHE:
                self._fixed[s] = v
        dim = vecs.shape[1]
        bait = (
            np.vstack([lookup[s] if s in lookup else self._fixed[s] for s in bait_sentences])
            if bait_sentences
            else np.zeros((0, dim), dtype=np.float32)
        )
        return vecs[0], vecs[1:n], bait

    def warm_up(self) -> None:
        """Load the encoder's model now rather than on the first query."""
        warm = getattr(self.encoder, "warm_up", None)
        if callable(warm):
            warm()

    # ------------------------------------------------------------------ the call

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        self._check_params()
        check_query(query)
        items = check_retrieved(retrieved, type(self).__name__)
        assert self.encoder is not None
        timings: dict[str, float] = {}

        # 1. segmentation
        seg = segment_passages(
            [r.text for r in items], self.language, split_clauses=self.split_clauses
        )
        timings["segment"] = time.perf_counter() - t0
        bait_texts = self.bait_texts(query)
        bait_seg = segment_passages(bait_texts, self.language, split_clauses=self.split_clauses)

        t1 = time.perf_counter()
        q, emb, bait_emb = self._encode_all(query, seg.sentences, bait_seg.sentences)
        timings["encode"] = time.perf_counter() - t1

        # 2. dual threshold
        t2 = time.perf_counter()
        sims = (emb @ q).astype(np.float64)
        cand_mask, abs_mask, theta = dual_threshold(sims, self.tau, self.abs_threshold)
        cand = np.flatnonzero(cand_mask)
        variance = contextual_variance(emb, seg.owner, seg.n_passages, ~abs_mask)

        # 3. context vectors + features (candidates, then one core sentence per bait)
        feats = candidate_features(
            emb[cand],
            context_vectors(emb, seg.owner, seg.position, cand, self.context_window),
            q,
            self.context_weight,
            self.remove_query,
        )
        bait_rows = _bait_cores(bait_emb @ q, bait_seg.owner, bait_seg.n_passages)
        bait_feats = candidate_features(
            bait_emb[bait_rows],
            context_vectors(
                bait_emb, bait_seg.owner, bait_seg.position, bait_rows, self.context_window
            ),
            q,
            self.context_weight,
            self.remove_query,
        )
        timings["screen"] = time.perf_counter() - t2

        # 4. bait-guided DBSCAN + decision rule
        t3 = time.perf_counter()
        all_feats = np.vstack([feats, bait_feats]) if len(bait_rows) else feats
        groups = np.concatenate([seg.owner[cand], seg.n_passages + np.arange(len(bait_rows))])
        labels = bait_dbscan(all_feats, groups, self.eps, self.min_samples)
        bait_dist = (
            1.0 - (feats @ bait_feats.T).max(axis=1)
            if len(bait_rows) and len(cand)
            else np.full(len(cand), np.inf)
        )
        judged = judge_candidates(
            labels, len(cand), seg.owner[cand], abs_mask[cand], variance, bait_dist,
            self.eps, self.variance_threshold,
        )  # fmt: skip
        timings["cluster"] = time.perf_counter() - t3

        return self._assemble(
            items, seg, sims, cand, abs_mask, judged, labels, variance, theta,
            len(bait_rows), timings, t0,
        )  # fmt: skip

    def _assemble(
        self,
        items: list[RetrievedPassage],
        seg: Segmentation,
        sims: np.ndarray,
        cand: np.ndarray,
        abs_mask: np.ndarray,
        judged: Judgement,
        labels: np.ndarray,
        variance: np.ndarray,
        theta: float,
        n_baits: int,
        timings: dict[str, float],
        t0: float,
    ) -> FilterResult:
        """Turn per-candidate verdicts into per-sentence reasons and new passages."""
        n = len(seg.sentences)
        reason = np.full(n, PRUNED, dtype=object)
        suspicion = np.zeros(n, dtype=np.float64)
        cluster = np.full(n, -1, dtype=np.int64)
        reason[cand] = judged.reasons
        flagged_c = judged.reasons != KEPT
        suspicion[cand[flagged_c]] = 0.5 + 0.5 * judged.evidence[flagged_c]
        cluster[cand] = labels[: len(cand)]

        # Whole-passage removal: low diversity / absolute flags always; a bait flag when
        # scope="passage" or when the passage restates the question (it is under scrutiny:
        # an attacker wrote it to be retrieved, so its other sentences are not evidence).
        scrutinised = np.zeros(seg.n_passages, dtype=bool)
        scrutinised[seg.owner[abs_mask]] = True
        whole = flagged_c & (
            (judged.reasons != BAIT) | (self.scope == "passage") | scrutinised[seg.owner[cand]]
        )
        flagged_passages = sorted({int(p) for p in seg.owner[cand[whole]]})
        for p in flagged_passages:
            rows = seg.of(p)
            top = float(suspicion[rows].max())
            spill = rows[reason[rows] == KEPT]
            spill = np.concatenate([spill, rows[reason[rows] == PRUNED]])
            reason[spill] = COLLATERAL
            suspicion[spill] = top

        kept: list[RetrievedPassage] = []
        removed: list[RetrievedPassage] = []
        decisions: list[Decision] = []
        words_before = words_after = 0
        for i, r in enumerate(items):
            rows = seg.of(i)
            words_before += len(r.text.split())
            keep_rows = rows[reason[rows] == KEPT]
            for k in rows[reason[rows] != KEPT]:
                decisions.append(
                    Decision(
                        index=i,
                        passage_id=r.id,
                        reason=str(reason[k]),
                        unit="sentence",
                        text=seg.sentences[k],
                        scores={
                            "suspicion": float(suspicion[k]),
                            "similarity": float(sims[k]),
                            "theta": theta,
                            "abs_threshold": float(self.abs_threshold),
                            "cluster": float(cluster[k]),
                            "variance": float(variance[i]),
                            "position": float(seg.position[k]),
                        },
                    )
                )
            if rows.size == 0:
                decisions.append(
                    Decision(
                        index=i, passage_id=r.id, reason=EMPTY, unit="passage",
                        scores={"suspicion": 0.0},
                    )
                )  # fmt: skip
            if keep_rows.size == 0:
                removed.append(r)
                continue
            text = " ".join(seg.sentences[k] for k in keep_rows)
            words_after += len(text.split())
            unchanged = keep_rows.size == rows.size
            meta = {
                **dict(r.passage.metadata),
                "original_text": r.text,
                "kept_positions": [int(seg.position[k]) for k in keep_rows],
            }
            kept.append(
                RetrievedPassage(
                    passage=replace(r.passage, text=text, metadata=meta),
                    score=r.score,
                    rank=r.rank,
                    embedding=r.embedding if unchanged else None,
                )
            )
        details: dict[str, Any] = {
            "theta": theta,
            "max_similarity": float(sims.max()) if sims.size else float("nan"),
            "n_sentences": n,
            "n_candidates": int(cand.size),
            "n_kept_sentences": int(np.sum(reason == KEPT)),
            "n_baits": n_baits,
            "labels": labels[: len(cand)].tolist(),
            "bait_clusters": sorted({int(v) for v in labels[len(cand) :] if v >= 0}),
            "variance": variance.tolist(),
            "flagged_passages": flagged_passages,
            "words_before": words_before,
            "words_after": words_after,
            "timings": timings,
        }
        return FilterResult(
            name=self.name,
            kept=tuple(kept),
            removed=tuple(removed),
            decisions=tuple(decisions),
            details=details,
            seconds=time.perf_counter() - t0,
        )


def _bait_cores(similarities: np.ndarray, owner: np.ndarray, n_baits: int) -> np.ndarray:
    """Row of each bait's most query-similar sentence (the bait's "candidate")."""
    if n_baits == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((-np.asarray(similarities), owner))  # by bait, best sentence first
    first = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
    return np.asarray(order[first], dtype=np.int64)
