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
question words read back before the other stages judge a passage). Provenance is an extra
layer after them all (:mod:`.provenance`): of two retrieved near-copies, the one the index
held first (``added_at``, stamped by ``ragshield add``) is spared and the later removed;
and a group that is the added passages' doing (``spare_built``: its built members alone are
no group, or only an added group's answer evidenced it) keeps its built members — planted
passages gather round the genuine page they were written about.

``RAGDefender(require_evidence=False, restated_question=False)`` is the density-only
behaviour of earlier releases (what the synthetic tables measured).

The ~45 parameters are grouped per stage in frozen dataclasses (:mod:`.settings`:
``RAGDefender(echo=EchoParams(echo_threshold=0.7))``); every flat name still works as a
keyword, an attribute and a config key (``RAGDefender(echo_threshold=0.7)``). The stages
live in :mod:`.stages` (per-passage evidence) and :mod:`.grouping` (dense groups); this
class wires them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from numbers import Real
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ragshield.defenses.params import Boolean, Interval, Options, ParamTable, StrList
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
from ragshield.defenses.ragdefender.grouping import GroupStages
from ragshield.defenses.ragdefender.groups import DEFAULT_BARS
from ragshield.defenses.ragdefender.math import (
    ClusteringEstimate,
    ConcentrationEstimate,
    PairScores,
    TermEvidence,
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
from ragshield.defenses.ragdefender.provenance import added_at
from ragshield.defenses.ragdefender.settings import (
    CopyParams,
    CoverageParams,
    EchoParams,
    EvidenceParams,
    GroupingParams,
    KnnParams,
    PaperParams,
)
from ragshield.defenses.ragdefender.stages import Work
from ragshield.embed.base import Encoder
from ragshield.types import FilterResult, RetrievedPassage

if TYPE_CHECKING:
    from ragshield.store.calibration_novelty import Novelty
    from ragshield.store.profile import IndexProfile

__all__ = [
    "ClusteringEstimate",
    "ConcentrationEstimate",
    "CopyParams",
    "CoverageParams",
    "EchoParams",
    "EvidenceParams",
    "GroupingParams",
    "KnnParams",
    "PairScores",
    "PaperParams",
    "PaperRAGDefender",
    "RAGDefender",
    "TermEvidence",
    "calibrate_guard",
    "char_trigram_cosine",
    "clustering_estimate",
    "concentration_estimate",
    "content_words",
    "cosine_matrix",
    "dense_groups",
    "frequency_scores",
    "group_signature",
    "largest_gap_ratio",
    "n_adv_from_clusters",
    "n_pairs_for",
    "oov_rate",
    "outlier_to_spare",
    "restates_question",
    "tfidf_top_terms",
    "top_n_by_score",
    "trigram_cosine_matrix",
    "typo_copies",
]  # fmt: skip

_COSINE = Interval(Real, -1.0, 1.0)
# each stage's defaults (frozen, so one shared instance is safe)
_PAPER, _GROUPING, _COPIES = PaperParams(), GroupingParams(), CopyParams()
_EVIDENCE, _ECHO, _KNN, _COVERAGE = EvidenceParams(), EchoParams(), KnnParams(), CoverageParams()


class RAGDefender(GroupStages, _RAGDefenderBase):
    """RAGDefender with a clean-set guard, multi-group detection and golden-passage sparing.

    Each change to the paper's algorithm is a flag (all on by default) so it can be measured
    against :class:`PaperRAGDefender`; ``benchmarks/bench_poisoning.py`` prints the
    ablation. Thresholds were calibrated on the *dev* split (even-indexed questions) of the
    shared NQ and HotpotQA poisoning sets with the packaged MiniLM encoder, and reported on
    the test split; re-calibrate them for another encoder (``calibrate_guard`` helps).

    Parameters
    ----------
    The constructor takes one frozen dataclass per stage (``paper``, ``grouping``,
    ``copies``, ``evidence``, ``echo``, ``knn``, ``coverage``: :mod:`.settings`, where each
    default is cited) and any of their fields by its flat name, listed here.

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
    neighbourhood_bars: on an index whose typical top-10 neighbourhood (its median 9th-NN
        cosine, recorded at index time) is tighter than ``loose_threshold``, the tight,
        loose, paraphrase and question-echo bars rise by the difference (:meth:`bar_shift`;
        an FAQ base).
    restated_question, restate_min_words: remove a passage holding the whole question (of
        at least that many words) verbatim.
    restate_min_passages: how many restating passages that takes: ``None`` = 1, or 2 once
        the index's profile says its passages hold questions (``IndexProfile.qa_corpus``:
        in an FAQ the gold entry restates the user's question).
    require_evidence: remove a dense group only with attack evidence (see above).
    signature_min_size: a loose group's signature-bearing members are removed only when
        at least this many remain (one benign topic passage may name the target answer;
        dev SQuAD PR x5 gold kept 0.758 -> 0.765, no other dev cell changed).
    dense_threshold, natural_similarity: group density that counts as evidence; the
        index's own calibration (``calibrate(profile)``) fills ``natural_similarity``.
    derivative_novelty, derivative_min_rare, derivative_echo: a passage with at least
        ``derivative_min_rare`` rare words, at most ``derivative_novelty`` of them absent
        from its ten nearest index passages, and a sentence at ``derivative_echo`` or closer
        to the question is removed: written about the question from what the index already
        says (:mod:`ragshield.store.calibration_novelty`; needs :meth:`use_novelty`, else
        the stage is off; ``derivative_novelty=-1`` switches it off).
    derivative_siblings: such a passage is kept when at least this many of its index
        neighbours (present when the index was built) share its template vocabulary: a
        series page (a year's honours list, a league's events) whose rare words its
        siblings use too; ``0`` exempts none.
    inserted_claims: remove a near-copy (``conflict_lexical``) of another retrieved passage
        that holds all its sentences and adds one or two, one of which echoes the question
        more than the original by ``conflict_echo_margin`` (an edited gold copy with a claim
        sentence written in); the original stays.
    typo_view: judge every passage (but in the typo-copy stage) with its one-letter edits of
        question words read back and re-encoded (:mod:`.typos`).
    coverage_threshold, coverage_min_group, coverage_min_chars: at least
        ``coverage_min_group`` distinct passages each spelling out the question at
        ``coverage_threshold`` (0-100, :mod:`.coverage`) are a planted group; the member at
        its edge near the question is spared. 101 switches it off. ``lone_echo``: one
        passage that spells out the question (``coverage_threshold``) in a sentence this
        close to it in embedding space is removed on its own (2.0 = off). ``lone_claim``:
        one passage whose echo + coverage / 100 reaches this and that uses a word no
        passage below that bar uses is removed on its own (> 2 = off); with
        ``lone_claim_index`` > 0 only when that share of those words occurs in no indexed
        passage outside the retrieved set (needs the index's novelty table).
        ``lone_claim_added``: the same bar for passages that entered after the index was
        built (``added_at``), where only passages the index was built with can vouch;
        ``lone_claim_short``: that bar for such a passage shorter than ``short_words``
        words (planted passages are short by design), or with fewer than ``short_rare``
        words rare in the index (needs its novelty table; 0 = off); sentences quoted from
        an earlier retrieved passage count for neither.
    group_knn, group_similarity, group_lexical: the planted *group* (:mod:`.groups`): a
        passage whose m-th most similar retrieved passage (m = 2, 3, 4; lexical near-copies
        at >= ``group_lexical`` 3-gram cosine not counted) is as close as the index's p99.9
        m-th-NN cosine is attack evidence. ``group_similarity`` None: the index's
        calibration (per m), else one bar for every m. ``echo_group_margin``: the echo pairs
        need both passages' 2nd neighbour within this of the 2nd-NN bar. Off by default
        (2.0): at 0.03 HotpotQA clean benign removed falls 0.023 -> 0.005 but typo'd,
        question-less and answer-spread groups lose their only evidence (adversarial
        majority 0.36 -> 0.93 on prefix-typo); measured in docs/results-poisoning.md.
    provenance: of two retrieved near-copies (``group_lexical`` 3-gram cosine) the one the
        index held first is spared and the later one removed (:mod:`.provenance`; the
        order is ``added_at``, which ``ragshield add`` stamps): ``"restore"`` when the
        filter had removed the earlier one, ``"facts"`` also when the later one changes a
        fact of a kept earlier one, ``"off"``. Without ``added_at`` on either side, or at
        equal instants, the other stages' decision stands.
    trusted_ids: passage ids the operator vouches for (never removed); the index's
        calibration adds the ids recorded at index time. Passage metadata is ignored but
        for ``added_at`` (provenance, stamped by ``ragshield add`` over the record's own).

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
        "neighbourhood_bars": [Boolean()],
        "restated_question": [Boolean()],
        "restate_min_words": [Interval(int, 1, None)],
        "restate_min_passages": [Interval(int, 1, None), None],
        "require_evidence": [Boolean()],
        "dense_threshold": [_COSINE],
        "natural_similarity": [_COSINE, None],
        "signature_min_size": [Interval(int, 1, None)],
        "signature_distinct": [Boolean()],
        "density_lexical": [Interval(Real, 0.0, 1.01)],
        "derivative_novelty": [Interval(Real, -1.0, 1.0)],
        "derivative_min_rare": [Interval(int, 1, None)],
        "derivative_echo": [_COSINE],
        "derivative_siblings": [Interval(int, 0, None)],
        "trusted_ids": [StrList()],
        "echo_pairs": [Boolean()],
        "echo_threshold": [_COSINE],
        "paraphrase_semantic": [_COSINE],
        "paraphrase_lexical": [Interval(Real, 0.0, 1.0)],
        "numbers_disagree": [Boolean()],
        "copy_conflicts": [Boolean()],
        "conflict_lexical": [Interval(Real, 0.0, 1.0)],
        "conflict_max_diff": [Interval(int, 1, None)],
        "inserted_claims": [Boolean()],
        "provenance": [Options("off", "restore", "facts")],
        "claim_echo": [_COSINE],
        "conflict_echo_margin": [Interval(Real, 0.0, 2.0)],
        "group_knn": [Boolean()],
        "group_similarity": [_COSINE, None],
        "group_lexical": [Interval(Real, 0.0, 1.0)],
        "echo_group_margin": [Interval(Real, 0.0, 2.0)],
        "claim_consensus": [Boolean()],
        "consensus_vocabulary": [Boolean()],
        "consensus_echo": [_COSINE],
        "consensus_min_group": [Interval(int, 2, None)],
        "consensus_pair_echo": [Interval(Real, -1.0, 2.0)],
        "typo_view": [Boolean()],
        "coverage_threshold": [Interval(Real, 0.0, 101.0)],
        "coverage_min_group": [Interval(int, 3, None)],
        "coverage_min_chars": [Interval(int, 1, None)],
        "lone_echo": [Interval(Real, -1.0, 2.0)],
        "lone_claim": [Interval(Real, 0.0, 3.0)],
        "lone_claim_added": [Interval(Real, 0.0, 3.0)],
        "lone_claim_short": [Interval(Real, 0.0, 3.0)],
        "short_words": [Interval(int, 1, None)],
        "short_rare": [Interval(int, 0, None)],
        "lone_claim_index": [Interval(Real, 0.0, 1.0)],
    }

    _own_params: ClassVar[tuple[str, ...]] = ("mode", "trusted_ids")

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        mode: Mode = "single_hop",
        paper: PaperParams = _PAPER,
        grouping: GroupingParams = _GROUPING,
        copies: CopyParams = _COPIES,
        evidence: EvidenceParams = _EVIDENCE,
        echo: EchoParams = _ECHO,
        knn: KnnParams = _KNN,
        coverage: CoverageParams = _COVERAGE,
        trusted_ids: Collection[str] = (),  # operator-named only, never a record's own field
        **flat: Any,
    ) -> None:
        """Each stage's defaults, with their citations, are in :mod:`.settings`; ``flat``
        takes any of their fields by name (``echo_threshold=0.7``) over its stage."""
        super().__init__()
        self.encoder = encoder
        self.mode = mode
        self.trusted_ids = trusted_ids
        stages = {"paper": paper, "grouping": grouping, "copies": copies,
                  "evidence": evidence, "echo": echo, "knn": knn, "coverage": coverage}  # fmt: skip
        self._set_stages(stages, flat)

    def _check(self) -> None:
        self._check_common()

    def calibrate(self, profile: IndexProfile) -> None:
        """Take the index's natural nearest-neighbour similarity (recorded at index time,
        :mod:`ragshield.defenses.calibration`) unless ``natural_similarity`` was set, how
        many restating passages are evidence unless ``restate_min_passages`` was set, and
        how tight its top-10 neighbourhoods are (the bars' shift, ``neighbourhood_bars``)."""
        if self.evidence.natural_similarity is None:
            self.natural_similarity = round(float(profile.natural_similarity), 4)
        if len(profile.group_similarity) == len(DEFAULT_BARS):
            self._group_bars = tuple(float(v) for v in profile.group_similarity)
        if profile.trusted_ids:
            self.trusted_ids = tuple(sorted({*self.trusted_ids, *profile.trusted_ids}))
        if profile.common_words:
            self._index_words = frozenset(profile.common_words)
        if profile.neighbourhood_similarity is not None:
            self._neighbourhood = float(profile.neighbourhood_similarity)
        if self.evidence.restate_min_passages is None and profile.qa_corpus is not None:
            self.restate_min_passages = 2 if profile.qa_corpus else 1

    def use_novelty(self, table: Mapping[str, Novelty] | None) -> None:
        """The index-side novelty of the index's passages (the table ``ragshield index``
        stores and ``add`` extends, :mod:`ragshield.store.calibration_novelty`; every pipeline
        opening the index hands it over), read by the ``derivative`` stage; ``None``
        switches the stage off (no table). Kept as handed (read, never written): a copy of
        one entry per passage at every call would cost the filter-aware oracle what
        ``NoveltyIndex.with_added``'s overlay saves."""
        self._novelty = table

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0, items, vectors, scores, mode = self._begin(query, retrieved)
        n = len(items)
        details: dict[str, Any] = {
            "mode": mode, "n_adv": 0, "groups": [], "spared": [], "typo_copies": [],
            "f": [0.0] * n, "pairs": [], "signature_kept": [], "quoted_kept": [], "restated": [],
            "trusted_kept": [], "unevidenced": [], "paraphrase_pairs": [], "conflicts": [], "claim_groups": [],
            "echo": None, "knn_group": [], "typo_view": [], "coverage": None,
            "coverage_group": [], "coverage_spared": None, "consensus": None, "lone": [],
            "derivative": [], "lone_claim": [], "lone_claim_held": [], "provenance": [], "built_spared": [], "added_group": [],
        }  # fmt: skip
        work = Work(n, [added_at(r.passage.metadata) for r in items])
        raw = [r.text for r in items]
        texts, vectors = self._stage_typo_view(query, raw, vectors, details)
        self._stage_restated(query, texts, work, details)
        if n < 2:
            details["guard"] = {"passed": False, "max_similarity": None}
            return self._finish(items, work, np.zeros(n), details, t0)
        sim = cosine_matrix(vectors)
        self._stage_coverage(query, texts, sim, scores, work, details)
        self._stage_signals(query, texts, work, details)
        self._stage_lone_restatement(query, texts, work, details)
        ids = [r.passage.id for r in items]
        self._stage_lone_claim(query, texts, ids, work, details)
        self._stage_derivative(ids, work, details)
        if not self._stage_guard(sim, work, details):
            self._stage_provenance(query, texts, work, details)
            return self._finish(items, work, np.zeros(n), details, t0)
        self._stage_typo_copies(sim, raw, work, details)  # the typos themselves are its evidence
        self._stage_knn_groups(sim, work, details)
        self._stage_echo_pairs(query, texts, sim, work, details)
        self._stage_conflicts(query, texts, work, details)
        self._stage_consensus(query, texts, sim, scores, work, details)
        self._stage_added_group(query, texts, sim, work, details)
        if self.grouping.multi_group:
            self._stage_groups(query, sim, texts, scores, mode, work, details)
            np.fill_diagonal(work.allowed, False)
            iu = np.triu_indices(n, k=1)
            mask = work.allowed[iu]
            ps = frequency_scores(sim, int(mask.sum()), self.paper.p, allowed=mask)
        else:
            ps = self._stage_paper(sim, vectors, texts, mode, work, details)
        details.update(pairs=ps.pairs.tolist(), f=ps.f.tolist())
        self._stage_provenance(query, texts, work, details)  # last: it reads every decision
        return self._finish(items, work, ps.f, details, t0)

    def _finish(
        self,
        items: list[RetrievedPassage],
        work: Work,
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
