"""EcoSafeRAG's 25 hyper-parameters, grouped by the stage that reads them (issue #22).

Example::

    from ragshield.defenses.ecosaferag import Clustering, EcoSafeRAG, Screening

    EcoSafeRAG(encoder=enc, screening=Screening(tau=0.3), clustering=Clustering(eps=0.5))
    EcoSafeRAG(encoder=enc, tau=0.3, eps=0.5)      # the same filter, flat names
    EcoSafeRAG(encoder=enc, clustering={"eps": 0.5})  # a group as a config table

Why groups: one constructor taking 22 arguments hid which stage reads what. Each group is a
frozen dataclass named after its stage, and its field names are the flat parameter names
they always were, so every config written before (a TOML ``[defenses.ecosaferag]`` table,
``to_dict`` output, ``PRESETS``, a benchmark's ``**{"eps": v}``) still reads the same:
:class:`~ragshield.defenses.params.StagedParams` sends each flat name to its group. The constraint table stays keyed by
the flat names, so the error text ("The 'eps' parameter of EcoSafeRAG ...") is unchanged.

Choices where the paper (only a summary is available; no public code) leaves a detail
open — each is a field below; the defaults were selected on the NQ dev split (even
question positions) by ``benchmarks/bench_ecosaferag.py``, never on test questions:

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
* baits: the paper's 4 types x 4 (our wording), see "Real retrieval" below for how they
  are encoded now (``bait_skeleton``) and the fifth family;
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

Real retrieval (issue #17). The choices above were made on synthetic retrieved sets
(golden passage + golden passages of *other* questions), where off-topic benign text is
pruned by relevance alone. On a real index the top-k of a question are on its topic and
alike, and the filter then lost answers and let question-prefixed injections through.
Measured with ``benchmarks/bench_ecosaferag.py --only real``: SQuAD v1.1 dev articles
(``ontopic/``, articles sorted by title, even positions = dev; 308 questions, seed 0),
MiniLM + FaissStore, real top-k, one planted passage per question in a copy of the index.
``PRESETS["paper"]`` restores the earlier behaviour; each change is its own flag:

* ``keep_best`` (off by default): a passage's most query-similar sentence is never pruned
  by θ, and, when it reaches θ in a passage that does not restate the question, never
  flagged by the low-diversity rule. Dev: answer kept 0.919 with or without it (the
  answer losses were false flags, not θ), while on the NQ dev sets it cut the token
  saving from 0.64 to 0.43 (it keeps one sentence of every off-topic passage);
* ``scrutiny``: the low-diversity rules judge only passages that restate the question (a
  sentence at the absolute cutoff, or the question's words verbatim, URL-decoded):
  paragraphs of one article are legitimately alike (variance 0.11–0.17 is common) and
  the rule removed them. Such restating passages are, in turn, held to a stricter bait
  test: a sentence within ``eps`` of any bait is flagged, no cluster needed;
* ``flag_restatement``: a sentence that *is* the question (nothing else once the question
  is taken out) flags its passage whole (``restated_question``): PoisonedRAG's retrieval
  prefix. The paper preset caught these by accident (the bait "Q?" sentences, emptied by
  the query projection, clustered with the restated question); this names the rule.
  Cost: an FAQ-style passage quoting the exact question is removed too (none in SQuAD);
* ``strip_question``: a sentence holding the question verbatim is judged by what
  surrounds it (question replaced by "this", as in the bait skeletons, re-encoded: only
  attack-like sentences pay for it). Without it, off-topic injections quoting the question
  were caught 0.50 instead of 1.00 on dev. Such a sentence inside genuine text (a
  hijacked page) loses only itself, not its passage: NQ dev hijack, gold kept 0.30 when
  the whole passage went, 0.93 now;
* ``bait_skeleton``: baits are the templates without their ``{query}`` slot, every
  sentence a bait point, encoded once per filter; per-query bait encoding (16 texts) was
  most of the latency;
* ``keep_passages`` (issue #23 follow-up): θ trims sentences, never a whole retrieved
  passage; a passage with no sentence at θ keeps its best one, which is then judged like
  any candidate. θ is relative to the best sentence of the whole set, so on an on-topic
  top-10 a genuine passage whose sentences each say less than the best one (a multi-hop
  bridge, background) fell below it everywhere: on the clean dev sets *every* passage
  EcoSafeRAG removed was removed this way (HotpotQA non-targets 30 of 560 retrieved,
  SQuAD even articles 44 of 1,320; ``below_adaptive_threshold`` only), and the chain
  ``ragdefender,ecosaferag`` removed 0.057 of clean HotpotQA dev passages against
  ragdefender's 0.004 alone. With it: 0.004 (both), and no dev attack setting of the
  poisoning benchmark reached the context more often (``docs/results-injection.md``);
* ``trim`` (issue #23 follow-up, eighth session): θ removes a sentence below it only when
  that sentence is also off its passage's topic (``"offtopic"``: the passage's other
  sentences cohere with each other at least ``offtopic_min`` more than with it); the other
  sentences below θ become candidates, judged like any. Found on ``ragshield scan`` at size
  (2,000-passage index, 50 SQuAD *test* questions, qwen2.5-0.5b): clean accuracy 0.34 for
  ``ragdefender,ecosaferag`` vs 0.40 without a filter; the three questions it lost had the
  answer sentence in the context and lost only sentences θ pruned (no bait, context or
  language rule fired), i.e. the compression moved a small model's answer. Then chosen on
  SQuAD *dev* (150 questions, real top-10, ``benchmarks/bench_ecosaferag.py``'s plants):
  clean sentences removed 0.287 (``"all"``) -> 0.022 (``"offtopic"``, 0.3) / 0.053 (0.2) /
  0.001 (``"none"``); answer kept 0.873 -> 0.880 (no filter 0.880); every planted setting
  caught as before except an instruction written into the gold passage (0.856 -> 0.829 /
  0.849 / 0.767) — θ had caught those by accident, being off-topic; ``offtopic_min = 0.3``
  prunes 7 % of the clean sentences below θ. The same scan's clean accuracy with it: 0.42
  (no answer lost, one gained); ``PRESETS["paper"]`` keeps ``"all"``;
* ``bait_types`` adds an ``exfiltration`` family (URL / tool leaks, our wording);
* ``cache_size``: sentences and their vectors are cached per passage text;
  :meth:`~ragshield.defenses.ecosaferag.EcoSafeRAG.precompute` fills it at index time;
* ``max_chars``: a passage is read up to 20,000 characters (cut at a space), the rest is
  dropped with a ``truncated_over_max_chars`` decision (suspicion 0, not a verdict). We cut
  rather than reject: a long genuine document keeps its head, and an instruction hidden
  past the limit never reaches the generator either (issue #15: a 50 MB passage took
  > 200 s and 8 GB; now 0.5 s, 0.67 GB peak for the whole process with the model).

Dev figures (answer string kept in the 5 best survivors at k=5, no filter 0.925; planted
passages at k=10: caught among retrieved):

========================================  =====  ======  ======  ======  ======
configuration (dev)                       clean  prefix  hijack  offtop  suffix
========================================  =====  ======  ======  ======  ======
no filter                                 0.925  0.000   0.020   0.086   0.027
paper preset (before #17)                 0.893  1.000   0.882   0.756   0.875
default                                   0.919  1.000   1.000   1.000   1.000
default, ``scrutiny=False``               0.903  0.997   1.000   0.201   1.000
default, ``bait_skeleton=False``          0.909  1.000   1.000   1.000   1.000
default, ``flag_restatement=False``       0.919  1.000   0.865   1.000   0.774
default, paper's 4 bait families only     0.919  1.000   1.000   1.000   1.000
========================================  =====  ======  ======  ======  ======

(the ablation rows were measured with ``keep_best``/``strip_question`` on, before their
defaults were settled; "hijack" = the question + a genuine paragraph of the article
carrying an instruction; the paper preset's catches of restated questions depend on
float noise: the restated "Q?" minus its projection on the query is a near-zero vector
that DBSCAN may or may not place, so reruns differ by up to 0.13 on hijack/suffix.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from numbers import Real
from typing import Any, Literal

from ragshield.defenses.ecosaferag.baits import BAIT_TEMPLATES, ECOSAFERAG_BAIT_TYPES
from ragshield.defenses.params import Boolean, Interval, OptionList, Options, ParamTable

Scope = Literal["passage", "sentence"]
#: What the adaptive cutoff θ removes: ``"all"`` sentences below it (the paper's
#: compression), only those below it that are also off their passage's topic
#: (``"offtopic"``), or none (``"none"``; every sentence is then judged).
Trim = Literal["all", "offtopic", "none"]


@dataclass(frozen=True)
class Reading:
    """Stage 1: how passages are cut into sentences and how many are kept encoded.

    language: sentencex language code. split_clauses: also cut after "colon + capital
    letter" (:func:`~ragshield.defenses.ecosaferag.stages.segment_passages`). max_chars:
    characters of a passage the filter reads; the rest is cut (and never reaches the
    generator). cache_size: passages whose sentences and vectors are kept (by text hash);
    0 disables it.
    """

    language: str = "en"  # the benchmarks' corpora are English
    split_clauses: bool = True  # ragshield addition, not in the paper: see module docstring
    max_chars: int = 20_000  # issue #15: bounds segmentation/encoding of one passage
    cache_size: int = 8192  # passages (~6 sentences x 1.5 kB each: ~75 MB when full)


@dataclass(frozen=True)
class Screening:
    """Stage 2: the dual threshold and the rules for passages that restate the question.

    tau: ``θ = tau · max`` sentence–query similarity. abs_threshold: sentences at or above
    it go to scrutiny. keep_best: never prune a passage's most query-similar sentence by θ,
    nor flag it by the bait or low-diversity rules when it reaches θ in a passage that does
    not restate the question. scrutiny: the low-diversity rule judges only passages that
    restate the question. strip_question: judge a sentence holding the question by what
    surrounds it. flag_restatement: a sentence that is the question flags its passage.
    keep_passages: θ trims sentences but never removes a retrieved passage whole: a
    passage with no sentence at θ keeps its most query-similar one as a candidate (judged
    by the bait and low-diversity rules like any other).
    trim: which sentences below θ are removed: ``"all"`` (the paper: θ is its compression),
    ``"offtopic"`` (only those whose passage's other sentences agree with each other more
    than with it by at least ``offtopic_min``, :func:`ragshield.defenses.injection.context.offtopic`;
    the others become candidates, judged like any) or ``"none"`` (every sentence is judged).
    qa_corpus: the passages are questions with their answers (an FAQ, a support or Q&A
    base), where the gold entry restates the user's question: then neither a verbatim
    restatement nor a sentence at the absolute cutoff marks a passage for scrutiny or flags
    it. ``None``: from the index profile (``IndexProfile.qa_corpus``), else off.
    """

    tau: float = 0.4  # paper: θ = τ·max (PEERS.md), τ not given -> NQ dev sweep
    abs_threshold: float = 0.92  # paper's absolute cutoff (seed, PEERS.md): 0.92
    keep_best: bool = False  # issue #17 option: no SQuAD dev gain, costs NQ tokens
    scrutiny: bool = True  # issue #17 (not in the paper): SQuAD dev, see module docstring
    strip_question: bool = True  # issue #17: judge what surrounds a restated question
    flag_restatement: bool = True  # issue #17: the question as a sentence of its own
    keep_passages: bool = (
        True  # issue #23 (not in the paper): θ alone removed 0.03-0.05 of clean dev passages
    )
    qa_corpus: bool | None = None  # ours: ChatDoctor FAQ, every gold entry was removed
    trim: Trim = "offtopic"  # issue #23 (paper: "all"): the scan's clean cost, see docstring
    offtopic_min: float = 0.3  # SQuAD dev: prunes 7 % of clean below-θ sentences, see docstring


@dataclass(frozen=True)
class Features:
    """Stage 3: what a candidate (and a bait sentence) looks like to the clustering.

    context_window: ±sentences forming a candidate's context; ``None`` = whole passage.
    context_weight: weight of the context vector (0 = sentence only, 1 = context only).
    remove_query: project the query direction out of every feature.
    """

    context_window: int | None = None  # paper: context = other sentences (PEERS.md)
    context_weight: float = 0.0  # not given; NQ dev sweep: any context mix raised ASR
    remove_query: bool = True  # not in the paper; NQ dev: without it gold kept ~0.1


@dataclass(frozen=True)
class Clustering:
    """Stage 4: bait-guided DBSCAN and what a flag removes.

    eps, min_samples: DBSCAN radius (cosine distance) and density. variance_threshold:
    contextual variance below which a passage counts as homogeneous. scope: what a
    bait-cluster flag removes, the whole ``"passage"`` or the ``"sentence"``.
    """

    eps: float = 0.6  # paper: DBSCAN eps 0.6 (PEERS.md; seed's eps sweep)
    min_samples: int = 4  # paper: DBSCAN min_samples 4 (PEERS.md)
    variance_threshold: float = 0.25  # Eq. 6 gives no value: NQ dev-split sweep
    scope: Scope = "sentence"  # not given; NQ dev hijack: a hijacked page keeps its facts


@dataclass(frozen=True)
class Baiting:
    """The synthetic attack passages clustered with the candidates (stage 4's guide).

    bait_types: built-in families (:data:`~ragshield.defenses.ecosaferag.baits.BAIT_TEMPLATES`).
    baits: custom templates containing ``{query}``; replace ``bait_types``; an empty list
    disables baits. bait_query: instantiate the baits with the query (only with
    ``bait_skeleton=False``); ``False`` uses a fixed phrase. bait_skeleton: baits are the
    templates without their ``{query}`` slot, encoded once per filter.
    """

    bait_types: Sequence[str] = ECOSAFERAG_BAIT_TYPES  # paper's 4 x 4 (PEERS.md) + exfil.
    baits: Sequence[str] | None = None  # none: the families above
    bait_query: bool = True  # paper: baits are built for the question at hand
    bait_skeleton: bool = True  # issue #17 speed: baits encoded once per filter


#: The groups in constructor order: keyword argument name -> dataclass.
GROUPS: dict[str, type[Any]] = {
    "reading": Reading,
    "screening": Screening,
    "features": Features,
    "clustering": Clustering,
    "baiting": Baiting,
}
#: Each flat parameter name -> the group holding it.
FLAT: dict[str, str] = {f.name: group for group, cls in GROUPS.items() for f in fields(cls)}

#: The flat names' allowed forms (:mod:`ragshield.defenses.params`).
CONSTRAINTS: ParamTable = {
    "tau": [Interval(Real, 0.0, 1.0)],
    "abs_threshold": [Interval(Real, 0.0, 1.0, closed="right")],
    "context_window": [Interval(int, 1, None), None],
    "context_weight": [Interval(Real, 0.0, 1.0)],
    "eps": [Interval(Real, 0.0, 2.0, closed="right")],
    "min_samples": [Interval(int, 1, None)],
    "variance_threshold": [Interval(Real, 0.0, 1.0)],
    "scope": [Options("passage", "sentence")],
    "trim": [Options("all", "offtopic", "none")],
    "offtopic_min": [Interval(Real, 0.0, 1.0)],
    "max_chars": [Interval(int, 1, None)],
    "cache_size": [Interval(int, 0, None)],
    # every on/off switch (the fields annotated bool: string annotations here)
    **{f.name: [Boolean()] for cls in GROUPS.values() for f in fields(cls) if f.type == "bool"},
    "bait_types": [OptionList(*BAIT_TEMPLATES)],  # unread (unchecked) when baits given
    "qa_corpus": [Boolean(), None],
}
