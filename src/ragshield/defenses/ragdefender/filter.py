"""RAGDefender (Kim, Lee, Koo, ACSAC 2025; seed ``ragdefender.txt`` §4), faithful and improved.

Example::

    from ragshield.defenses.ragdefender import RAGDefender, PaperRAGDefender
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    enc = SentenceTransformerEncoder()
    paper = PaperRAGDefender(encoder=enc, mode="single_hop")   # Eq. 1-7 as published
    ours = RAGDefender(encoder=enc)                            # guarded, multi-group
    result = ours.filter(question, retrieved)                  # a FilterResult
    print(result.details["n_adv"], result.details["groups"])

The paper's math lives in pure functions (:mod:`.math`: ``cosine_matrix``,
``tfidf_top_terms``, ``clustering_estimate``, ``frequency_scores``...), the attack evidence in
:mod:`.evidence`, the faithful class in :mod:`.paper`; all are
re-exported here. Every step is unit-testable on hand-built vectors without a model.

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

Real retrieval (issue #17) added the rest, because in a real index the top-k of a question
are on its topic and *dense by nature*: density alone removed ~40 % of the benign passages
of clean SQuAD retrievals and lost the golden paragraph for ~1 question in 3. Chosen on the
dev split of ``../shared/data/ontopic`` (SQuAD even-position articles, HotpotQA
non-targets), reported on the test split by ``benchmarks/bench_real_retrieval.py``:

* ``restated_question`` — a passage containing the whole question word for word is
  removed on its own (PoisonedRAG's black-box passages are ``question + "." + text``; 0 of
  the benign top-10 passages of the dev questions do that);
* ``require_evidence`` — a dense group is removed only with attack evidence: a restating
  member, a typo copy (whose original is then protected), a density no natural
  neighbourhood of the index reaches (``natural_similarity``, recorded at index time by
  :mod:`ragshield.defenses.calibration`, else ``dense_threshold``), or the signature of an
  evidenced tight group;
* operator trust — a passage whose id the *operator* named (``trusted_ids``; recorded at
  index time by ``ragshield index --trusted-ids FILE`` and read back by ``calibrate``) is
  never removed, and ``details["trusted_kept"]`` says so. Trust never comes from a record's
  own fields: an attacker who can add a record can write ``"trusted": true`` into it
  (issue #27: the demo's planted passages whitelisted themselves that way).

Adaptive attackers (issue #28) added wording-free evidence, each behind its own switch and
measured in ``benchmarks/bench_adaptive_poisoning.py`` (docs/results-poisoning.md): the
question echo per sentence (:mod:`.echo`), near-copy fact conflicts (:mod:`.claims`), the
planted group against the index's m-th-NN bars (:mod:`.groups`), the question coverage of a
group of passages (:mod:`.coverage`: a reworded, reordered or typo'd question prefix still
spells out most of the question) and the typo view (:mod:`.typos`: one-letter edits of
question words read back before the other stages judge a passage).

``RAGDefender(require_evidence=False, restated_question=False)`` is the density-only
behaviour of earlier releases (what the synthetic tables measured).

Over 500 lines because the class wires the paper's stages and the added evidence with 45
documented parameters; the computations live in math, evidence, echo, claims, groups,
coverage and typos.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from ragshield.defenses.params import Boolean, Interval, Options, ParamTable, StrList
from ragshield.defenses.ragdefender.claims import near_copy_conflicts
from ragshield.defenses.ragdefender.coverage import question_coverage
from ragshield.defenses.ragdefender.echo import EchoVectors, echo_scores
from ragshield.defenses.ragdefender.evidence import (
    calibrate_guard,
    char_trigram_cosine,
    content_words,
    dense_groups,
    group_signature,
    oov_rate,
    outlier_to_spare,
    restates_question,
    trigram_cosine_matrix,
    typo_copies,
)
from ragshield.defenses.ragdefender.groups import DEFAULT_BARS, knn_group_members
from ragshield.defenses.ragdefender.math import (
    ClusteringEstimate,
    ConcentrationEstimate,
    PairScores,
    TermEvidence,
    _labels_to_groups,
    clustering_estimate,
    concentration_estimate,
    cosine_matrix,
    frequency_scores,
    largest_gap_ratio,
    n_adv_from_clusters,
    n_pairs_for,
    tfidf_top_terms,
    top_n_by_score,
)
from ragshield.defenses.ragdefender.paper import Mode, PaperRAGDefender, _RAGDefenderBase
from ragshield.defenses.ragdefender.typos import normalise_to_question
from ragshield.embed.base import Encoder
from ragshield.types import FilterResult, RetrievedPassage

if TYPE_CHECKING:
    from ragshield.store.profile import IndexProfile

__all__ = [
    "ClusteringEstimate", "ConcentrationEstimate", "PairScores", "PaperRAGDefender",
    "RAGDefender", "TermEvidence", "calibrate_guard", "char_trigram_cosine",
    "clustering_estimate", "concentration_estimate", "content_words", "cosine_matrix",
    "dense_groups", "frequency_scores", "group_signature", "largest_gap_ratio",
    "n_adv_from_clusters", "n_pairs_for", "oov_rate", "outlier_to_spare",
    "restates_question", "tfidf_top_terms", "top_n_by_score", "trigram_cosine_matrix",
    "typo_copies",
]  # fmt: skip

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
    restated_question, restate_min_words: remove a passage holding the whole question (of
        at least that many words) verbatim.
    require_evidence: remove a dense group only with attack evidence (see above).
    signature_min_size: a loose group's signature-bearing members are removed only when
        at least this many remain (one benign topic passage may name the target answer;
        dev SQuAD PR x5 gold kept 0.758 -> 0.765, no other dev cell changed).
    dense_threshold, natural_similarity: group density that counts as evidence; the
        index's own calibration (``calibrate(profile)``) fills ``natural_similarity``.
    typo_view: judge every passage (but in the typo-copy stage) with its one-letter edits of
        question words read back and re-encoded (:mod:`.typos`).
    coverage_threshold, coverage_min_group, coverage_min_chars: at least
        ``coverage_min_group`` distinct passages each spelling out the question at
        ``coverage_threshold`` (0-100, :mod:`.coverage`) are a planted group; the member at
        its edge near the question is spared. 101 switches it off.
    group_knn, group_similarity, group_lexical: the planted *group* (:mod:`.groups`): a
        passage whose m-th most similar retrieved passage (m = 2, 3, 4; lexical near-copies
        at >= ``group_lexical`` 3-gram cosine not counted) is as close as the index's p99.9
        m-th-NN cosine is attack evidence. ``group_similarity`` None: the index's
        calibration (per m), else one bar for every m. ``echo_group_margin``: the echo pairs
        need both passages' 2nd neighbour within this of the 2nd-NN bar. Off by default
        (2.0): at 0.03 HotpotQA clean benign removed falls 0.023 -> 0.005 but typo'd,
        question-less and answer-spread groups lose their only evidence (adversarial
        majority 0.36 -> 0.93 on prefix-typo); measured in docs/results-poisoning.md.
    trusted_ids: passage ids the operator vouches for (never removed); the index's
        calibration adds the ids recorded at index time. Passage metadata is ignored.

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
        "signature_min_size": [Interval(int, 1, None)],
        "trusted_ids": [StrList()],
        "echo_pairs": [Boolean()],
        "echo_threshold": [_COSINE],
        "paraphrase_semantic": [_COSINE],
        "paraphrase_lexical": [Interval(Real, 0.0, 1.0)],
        "copy_conflicts": [Boolean()],
        "conflict_lexical": [Interval(Real, 0.0, 1.0)],
        "conflict_max_diff": [Interval(int, 1, None)],
        "claim_echo": [_COSINE],
        "conflict_echo_margin": [Interval(Real, 0.0, 2.0)],
        "group_knn": [Boolean()],
        "group_similarity": [_COSINE, None],
        "group_lexical": [Interval(Real, 0.0, 1.0)],
        "echo_group_margin": [Interval(Real, 0.0, 2.0)],
        "typo_view": [Boolean()],
        "coverage_threshold": [Interval(Real, 0.0, 101.0)],
        "coverage_min_group": [Interval(int, 3, None)],
        "coverage_min_chars": [Interval(int, 1, None)],
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
        signature_min_size: int = 2,  # real-retrieval dev: a lone benign passage names it
        trusted_ids: Collection[str] = (),  # operator-named only, never a record's own field
        echo_pairs: bool = True,
        echo_threshold: float = 0.75,  # dev: clean benign pairs 0 removed at >= 0.75
        paraphrase_semantic: float = 0.85,  # dev grid (0.75-0.85): clean benign removed 0
        paraphrase_lexical: float = 0.6,  # dev grid (0.5/0.6): catches rewritten prefixes
        copy_conflicts: bool = True,
        conflict_lexical: float = 0.9,  # dev: edits share >= 0.93 3-grams; season pages 0.8+
        conflict_max_diff: int = 6,  # an edited fact: a few words on each side
        conflict_echo_margin: float = 0.05,  # dev: an inserted claim sentence adds >= 0.1
        claim_echo: float = 1.0,  # off: dev HotpotQA clean benign removed 0.004 -> 0.030 at 0.7
        group_knn: bool = True,  # dev: benign flagged <= 0.005; `add` screens without it
        group_similarity: float | None = None,  # None: the index's p99.9 m-th-NN cosine
        group_lexical: float = 0.8,  # dev SQuAD answer-spread benign flagged 0.209 -> 0.004
        echo_group_margin: float = 2.0,  # off; 0.03 = clean-first (docs/results-poisoning.md)
        typo_view: bool = True,  # ours (issue #28): prefix-typo groups; see .typos
        coverage_threshold: float = 85.0,  # dev: benign HotpotQA max 80.6; 101 = off
        coverage_min_group: int = 3,  # dev: a gold paragraph + one planted is a pair
        coverage_min_chars: int = 20,  # a question of a few words occurs by chance
    ) -> None:
        self.typo_view = typo_view
        self.coverage_threshold = coverage_threshold
        self.coverage_min_group = coverage_min_group
        self.coverage_min_chars = coverage_min_chars
        self.echo_group_margin = echo_group_margin
        self.group_knn = group_knn
        self.group_similarity = group_similarity
        self.group_lexical = group_lexical
        self._group_bars: tuple[float, ...] = DEFAULT_BARS
        self.claim_echo = claim_echo
        self.conflict_echo_margin = conflict_echo_margin
        self.echo_pairs = echo_pairs
        self.echo_threshold = echo_threshold
        self.paraphrase_semantic = paraphrase_semantic
        self.paraphrase_lexical = paraphrase_lexical
        self.copy_conflicts = copy_conflicts
        self.conflict_lexical = conflict_lexical
        self.conflict_max_diff = conflict_max_diff
        self.trusted_ids = trusted_ids
        self.encoder = encoder
        self.restated_question = restated_question
        self.restate_min_words = restate_min_words
        self.require_evidence = require_evidence
        self.dense_threshold = dense_threshold
        self.natural_similarity = natural_similarity
        self.signature_min_size = signature_min_size
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
        self._echo = EchoVectors()

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
        if len(profile.group_similarity) == len(DEFAULT_BARS):
            self._group_bars = tuple(float(v) for v in profile.group_similarity)
        if profile.trusted_ids:
            self.trusted_ids = tuple(sorted({*self.trusted_ids, *profile.trusted_ids}))

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
            "trusted_kept": [], "unevidenced": [], "paraphrase_pairs": [], "conflicts": [], "claim_groups": [],
            "echo": None, "knn_group": [], "typo_view": [], "coverage": None,
            "coverage_group": [], "coverage_spared": None,
        }  # fmt: skip
        work = _Work(n)
        raw = [r.text for r in items]
        texts, vectors = self._stage_typo_view(query, raw, vectors, details)
        self._stage_restated(query, texts, work, details)
        if n < 2:
            details["guard"] = {"passed": False, "max_similarity": None}
            return self._finish(items, work, np.zeros(n), details, t0)
        sim = cosine_matrix(vectors)
        self._stage_coverage(query, texts, sim, scores, work, details)
        if not self._stage_guard(sim, work, details):
            return self._finish(items, work, np.zeros(n), details, t0)
        self._stage_typo_copies(sim, raw, work, details)  # the typos themselves are its evidence
        self._stage_signals(query, texts, work, details)
        self._stage_knn_groups(sim, work, details)
        self._stage_echo_pairs(sim, work, details)
        self._stage_conflicts(query, texts, work, details)
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

    def _stage_typo_view(
        self, query: str, texts: list[str], vectors: np.ndarray, details: dict[str, Any]
    ) -> tuple[list[str], np.ndarray]:
        """Every later stage (but the typo-copy one, whose evidence *is* the typos) judges a
        passage as if its one-letter edits of question words were spelt right
        (:mod:`.typos`); the few passages this changes are re-encoded, so the planted-group
        density and the echo see through a typo'd question prefix."""
        if not self.typo_view or not texts:
            return texts, vectors
        self.warm_up()
        assert self._vocabulary is not None
        fixed = [normalise_to_question(query, t, self._vocabulary) for t in texts]
        changed = [i for i, (_, c) in enumerate(fixed) if c > 0]
        details["typo_view"] = changed
        if not changed:
            return texts, vectors
        out = [t for t, _ in fixed]
        if self.encoder is not None:
            vectors = np.array(vectors, dtype=np.float32, copy=True)
            new = self._echo.whole(self.encoder, [out[i] for i in changed])
            vectors[changed] = new * np.linalg.norm(vectors[changed], axis=1, keepdims=True)
        return out, vectors

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

    def _stage_coverage(
        self,
        query: str,
        texts: Sequence[str],
        sim: np.ndarray,
        scores: np.ndarray,
        work: _Work,
        details: dict[str, Any],
    ) -> None:
        """Several passages that each spell out most of the question, letter by letter
        (:func:`~.coverage.question_coverage` >= ``coverage_threshold``): a planted group
        that reworded, reordered, dropped words of or put typos in PoisonedRAG's question
        prefix. One or two such passages are no evidence: SQuAD's questions are written
        from their gold paragraph, which then spells them out (dev: 0.8 % of clean benign
        passages reach 85, max 95.9), and a gold paragraph beside one planted passage is a
        pair. ``coverage_min_group`` distinct ones are (lexical near-copies count once,
        ``group_lexical``: mirrors of the gold paragraph are one passage); the member at
        the group's edge and near the question is spared (:func:`outlier_to_spare`, the
        gold paragraph the group was written about: SQuAD dev, 48 of 50 such benign
        passages in fired groups spared on the seven reworded-prefix rows). When some
        members were already caught (verbatim restatements), a member that lacks every word
        they all push (:func:`group_signature`, the target answer) is the genuine one and
        stays as well: the gold paragraph beside PoisonedRAG's own passages."""
        if self.coverage_min_group > len(texts):
            return
        cov = question_coverage(query, texts, self.coverage_min_chars)
        details["coverage"] = cov.round(1).tolist()
        hi = np.flatnonzero(cov >= self.coverage_threshold)
        if hi.size < self.coverage_min_group:
            return
        lex = work.lexical(texts)
        distinct: list[int] = []
        for i in hi.tolist():
            if all(lex[i, j] < self.group_lexical for j in distinct):
                distinct.append(i)
        if len(distinct) < self.coverage_min_group:
            return
        known = hi[work.evidence[hi]]  # already caught (a verbatim restatement)
        keep: set[int] = set()
        if known.size:  # what the caught ones push: a member without it is the genuine one
            sig = group_signature([texts[i] for i in known.tolist()], query)
            keep = {i for i in hi.tolist() if not work.evidence[i] and sig
                    and not sig & content_words(texts[i])}  # fmt: skip
        spared, _ = outlier_to_spare(sim, hi, scores, self.query_weight, self.spare_margin)
        if spared is not None and work.evidence[spared]:
            spared = None  # a verbatim restatement is never spared
        details["coverage_spared"] = spared
        for i in hi.tolist():
            if i == spared or i in keep:
                continue
            work.remove(i, f"one of {len(distinct)} passages spelling out the question "
                           f"(coverage {cov[i]:.0f})")  # fmt: skip
            work.evidence[i] = True
            details["coverage_group"].append(i)

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

    def _stage_signals(self, query: str, texts: Sequence[str], work: _Work,
                       details: dict[str, Any]) -> None:  # fmt: skip
        """The inputs of the wording-free stages: character 3-gram cosine between passages
        and, with an encoder, each passage's question echo (its sentence closest to the
        question, :mod:`~ragshield.defenses.ragdefender.echo`)."""
        if not (self.echo_pairs or self.copy_conflicts or self.group_knn):
            return
        work.lexical(texts)
        if self.encoder is None:
            return  # no sentence vectors without an encoder: echo evidence is skipped
        qv, sv, owner = self._echo.embed(self.encoder, query, texts)
        work.echo, _ = echo_scores(qv, sv, owner, len(texts))
        details["echo"] = work.echo.round(4).tolist()

    def group_bars(self) -> tuple[float, ...]:
        """The m-th-NN bars in use: ``group_similarity`` for every m when set, else the
        index's calibration, else :data:`~.groups.DEFAULT_BARS`."""
        if self.group_similarity is not None:
            return (float(self.group_similarity),) * len(self._group_bars)
        return self._group_bars

    def _stage_knn_groups(self, sim: np.ndarray, work: _Work, details: dict[str, Any]) -> None:
        """A planted group: passages with m retrieved neighbours as close as only 0.1 % of
        the index's passages have m neighbours (:func:`~.groups.knn_group_members`). Only
        the flagged members go: made evidence, a benign one took its whole on-topic group
        with it (dev clean benign removed HotpotQA 0.002 -> 0.014, SQuAD 0.000 -> 0.013)."""
        hits = knn_group_members(sim, work.lex, self.group_bars(), self.group_lexical)
        work.second = hits.kth[:, 0]
        if not self.group_knn:
            return
        for i in np.flatnonzero(hits.members).tolist():
            m = int(hits.rank[i])
            work.remove(i, f"one of a group of {m + 1}+ passages closer to each other than "
                           f"the index's p99.9 {m}-th-neighbour cosine")  # fmt: skip
            details["knn_group"].append(i)

    def _stage_conflicts(
        self, query: str, texts: Sequence[str], work: _Work, details: dict[str, Any]
    ) -> None:
        """Two lexical near-copies that differ in a few words disagree on a fact
        (:func:`~ragshield.defenses.ragdefender.claims.near_copy_conflicts`). The copy is removed when
        nothing else retrieved contains its differing words and either the original's words
        are supported elsewhere or the copy echoes the question more (an inserted claim
        sentence) by ``conflict_echo_margin``. Support counts only passages not already
        removed and not themselves written about the question (echo below
        ``echo_threshold``): an attacker who spreads his answer must not lend it support.
        Templated pages (seasons, editions) differ in facts too, but symmetrically: neither
        side wins, both stay."""
        if not self.copy_conflicts or work.lex is None:
            return
        witnesses = ~work.removed
        if work.echo is not None:  # a passage written about the question is no witness
            witnesses &= work.echo < self.echo_threshold
        for c in near_copy_conflicts(texts, work.lex, self.conflict_lexical, query,
                                     self.conflict_max_diff, witnesses):  # fmt: skip
            if not c.words:
                continue  # the suspect only lacks words: a shorter copy, not a new claim
            mine, theirs = c.support
            louder = (
                work.echo is not None
                and work.echo[c.suspect] - work.echo[c.other] >= self.conflict_echo_margin
            )
            if mine > 0 or not (theirs > 0 or louder) or work.removed[c.other]:
                continue
            work.remove(c.suspect, f"near-copy of passage {c.other} with a changed fact "
                                   f"({', '.join(c.words) or 'words removed'})")  # fmt: skip
            work.victim[c.other] = True  # no group evidence: its on-topic group is benign
            details["conflicts"].append({"suspect": c.suspect, "other": c.other,
                                         "words": list(c.words), "support": list(c.support)})  # fmt: skip

    def _stage_echo_pairs(self, sim: np.ndarray, work: _Work, details: dict[str, Any]) -> None:
        """Generated-kind density: two passages that both answer the question closely (a
        sentence within ``echo_threshold`` of it in embedding space) and say the same thing
        in different words (embedding cosine >= ``paraphrase_semantic``, character 3-gram
        cosine below ``paraphrase_lexical``). Natural near-copies are lexical and pass; a
        reworded, moved or dropped question changes neither measure. Both must also have a
        2nd retrieved neighbour within ``echo_group_margin`` of the index's 2nd-NN bar
        (:mod:`.groups`): alone, the pair evidence took a whole on-topic retrieval of
        season pages on HotpotQA (8 of 10 benign passages removed)."""
        if not self.echo_pairs or work.echo is None or work.lex is None:
            return
        echo = work.echo
        hi = echo >= self.echo_threshold
        para = (sim >= self.paraphrase_semantic) & (work.lex < self.paraphrase_lexical)
        para &= hi[:, None] & hi[None, :]
        if work.second is not None:  # the second signal: both sit in a dense neighbourhood
            dense = work.second >= self.group_bars()[0] - self.echo_group_margin
            para &= dense[:, None] & dense[None, :]
        np.fill_diagonal(para, False)
        for i in np.flatnonzero(para.any(axis=1)).tolist():
            j = int(np.flatnonzero(para[i])[0])
            work.remove(i, f"paraphrase of passage {j}, both echoing the question "
                           f"(echo {echo[i]:.2f})")  # fmt: skip
            work.evidence[i] = True
            details["paraphrase_pairs"].append([i, j])

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
                if not evidenced and work.echo is not None and work.lex is not None:
                    evidenced = self._claim_group(g, query, texts, work)
                    if evidenced:
                        details["claim_groups"].append(g.tolist())
                if level == "loose" and self.loose_signature and signature:
                    bearing = [bool(signature & content_words(texts[i])) for i in g.tolist()]
                    details["signature_kept"].extend(
                        i for i, b in zip(g.tolist(), bearing, strict=True) if not b
                    )
                    g = g[bearing]
                    if g.size < self.signature_min_size and not work.evidence[g].any():
                        details["signature_kept"].extend(g.tolist())
                        continue  # one topic passage that happens to name the target answer
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

    def _claim_group(self, g: np.ndarray, query: str, texts: Sequence[str], work: _Work) -> bool:
        """A group that *claims* something together: its members all answer the question
        closely (mean question echo >= ``claim_echo``), say it in different words (mean
        character 3-gram cosine below ``paraphrase_lexical``: not natural near-copies) and
        share a word the question does not use (the answer they push)."""
        assert work.echo is not None and work.lex is not None
        if g.size < 2 or float(work.echo[g].mean()) < self.claim_echo:
            return False
        sub = work.lex[np.ix_(g, g)]
        mean_lex = float((sub.sum() - np.trace(sub)) / (g.size * (g.size - 1)))
        if mean_lex >= self.paraphrase_lexical:
            return False
        return bool(group_signature([texts[i] for i in g.tolist()], query))

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
        """Operator trust last: a passage whose id the operator named in ``trusted_ids`` is
        never removed, and the details say which ones were kept for that reason. A record's
        own ``trusted`` field counts for nothing (anyone who can add a record can set it)."""
        trusted = frozenset(self.trusted_ids)
        for i in np.flatnonzero(work.removed).tolist():
            if items[i].passage.id in trusted:
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
        self.echo: np.ndarray | None = None  # closest sentence to the question, per passage
        self.lex: np.ndarray | None = None  # character 3-gram cosine between passages
        self.second: np.ndarray | None = None  # 2nd retrieved neighbour, near-copies aside

    def lexical(self, texts: Sequence[str]) -> np.ndarray:
        """:attr:`lex`, computed on first use (the coverage and the signal stages share it)."""
        if self.lex is None:
            self.lex = trigram_cosine_matrix(texts)
        return self.lex

    def remove(self, i: int, reason: str) -> None:
        self.removed[i] = True
        self.reasons.setdefault(i, reason)
