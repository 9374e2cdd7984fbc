"""Attacks by name: one table for corpus attacks and query attacks.

Example::

    from ragshield.attacks.registry import available, build_attack

    print(available("corpus"))        # poisoning / injection generators
    print(available("query"))         # extraction attackers
    attack = build_attack("injection-offtopic")
    texts = attack.craft("who wrote the iliad", "Virgil", n=3, seed=0)

Why one registry: the CLI (``ragshield scan``, ``eval``), the evaluation harnesses and
config files must resolve a name the same way; before, attacks were named in three places
(``eval.poisoning``, ``eval.extraction``, ``eval.injection``). Each entry is
``"module:Class"`` plus preset constructor parameters, imported on use so ``import
ragshield`` stays light (the LLM-backed attacks pull in torch only when built).

Two kinds (see :mod:`ragshield.attacks.base`):

* ``"corpus"`` — :class:`~ragshield.attacks.base.CorpusAttack`:
  ``craft(question, target_answer, n, *, seed) -> list[str]`` passages to plant;
* ``"query"`` — :class:`~ragshield.attacks.base.QueryAttack`: ``run(ask)``, a black-box
  attacker of the deployed system (extraction).

The data-backed names of the poisoning evaluation (``poisonedrag``, ``blind``, ``garag``:
the published passages in ``../shared/data``) are not here: the generators that write new
passages for any corpus have their own names (``poisonedrag-blackbox``, ``misleading``,
``garag-typos``) so one name never means two things.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ragshield.errors import InputError

Kind = Literal["corpus", "query"]
KINDS: tuple[str, ...] = ("corpus", "query")


@dataclass(frozen=True)
class AttackSpec:
    """One registered attack: where its class lives and the parameters its name presets."""

    name: str
    kind: Kind
    target: str | Callable[..., Any]  # "package.module:Class", or a factory registered in code
    summary: str
    params: Mapping[str, Any] = field(default_factory=dict)


def _spec(name: str, kind: Kind, target: str, summary: str, **params: Any) -> AttackSpec:
    return AttackSpec(name, kind, target, summary, params)


_A = "ragshield.attacks"
_AD = f"{_A}.adaptive"
#: Adaptive attacks (issue #28; :mod:`ragshield.attacks.adaptive`): they take an
#: ``AttackTarget`` through ``craft_for(target, n, seed=...)``.
_ADAPTIVE: tuple[AttackSpec, ...] = (
    *(
        _spec(f"prefix-{op}", "corpus", f"{_AD}:PrefixRewriteAttack",
              f"PoisonedRAG bodies behind the question with {what}", rewrite=op)
        for op, what in (
            ("drop", "words dropped"), ("synonym", "words replaced by synonyms"),
            ("reorder", "its clauses reordered"), ("statement", "a statement instead"),
            ("typo", "typos"),
        )
    ),
    *(
        _spec(f"question-{pos}", "corpus", f"{_AD}:PrefixRewriteAttack",
              f"PoisonedRAG bodies with the verbatim question at the {pos}",
              rewrite="none", position=pos)
        for pos in ("middle", "end")
    ),
    _spec("no-question", "corpus", f"{_AD}:PrefixRewriteAttack",
          "no question at all: retrieval through the body (Tan et al., ACL 2024)",
          rewrite="none", position="none"),
    _spec("answer-spread", "corpus", f"{_AD}:AnswerSpreadAttack",
          "the wrong answer worded differently per passage, mixed with edited genuine copies"),
    _spec("facet-spread", "corpus", f"{_A}.facets:FacetSpreadAttack",
          "the wrong answer beside a different sentence of the gold page in each passage"),
    _spec("near-duplicate", "corpus", f"{_AD}:NearDuplicateAttack",
          "the gold passage with the right answer replaced (arXiv 2604.00387)"),
    _spec("excerpt-edit", "corpus", f"{_A}.excerpt_edit:ExcerptEditAttack",
          "an excerpt of the gold page, answer changed, cut below the near-copy bar"),
    _spec("meta-epistemic", "corpus", f"{_AD}:MetaEpistemicAttack",
          "one passage calling the other sources outdated (CorruptRAG-AK, arXiv 2605.05632)"),
    _spec("meta-epistemic-long", "corpus", f"{_A}.padded:PaddedMetaEpistemicAttack",
          "the meta-epistemic note padded with the gold page past the short-passage bar"),
    _spec("meta-epistemic-own", "corpus", f"{_A}.padded:OwnPaddedMetaEpistemicAttack",
          "the meta-epistemic note padded past the bar with sentences no page holds"),
    _spec("meta-epistemic-named", "corpus", f"{_A}.padded:NamedPaddedMetaEpistemicAttack",
          "the meta-epistemic note citing a made-up source full of rare names"),
    _spec("meta-epistemic-borrowed", "corpus",
          f"{_A}.padded:BorrowedPaddedMetaEpistemicAttack",
          "the meta-epistemic note citing a made-up source named from the gold page"),
    _spec("prefix-llm", "corpus", f"{_AD}:LLMParaphraseAttack",
          "PoisonedRAG bodies behind an LLM paraphrase of the question (opt-in, needs a model)"),
    _spec("filter-aware", "corpus", f"{_A}.filter_aware:FilterAwareAttack",
          "black-box search against the deployed chain: plants only variants that survive"),
)  # fmt: skip
_REGISTRY: dict[str, AttackSpec] = {
    s.name: s
    for s in (
        _spec(
            "poisonedrag-blackbox",
            "corpus",
            f"{_A}.poisonedrag:PoisonedRAGAttack",
            "LLM-written passages asserting the target answer, question-prefixed "
            "(Zou et al., USENIX Security 2025, black-box)",
        ),
        _spec(
            "poisonedrag-whitebox",
            "corpus",
            f"{_A}.poisonedrag_whitebox:PoisonedRAGWhiteBoxAttack",
            "PoisonedRAG passages whose question prefix is HotFlip-optimised against the "
            "index's encoder (Zou et al. 2025, white-box)",
        ),
        _spec(
            "misleading",
            "corpus",
            f"{_A}.misleading:MisleadingPassageAttack",
            "LLM-written misleading background passages, no question prefix (Tan et al., ACL 2024)",
        ),
        _spec(
            "garag-typos",
            "corpus",
            f"{_A}.garag:TypoAttack",
            "typo copies of a source passage, genetic search keeping retriever similarity "
            "(Cho et al., EMNLP 2024); needs craft_from(question, passage, ...)",
        ),
        _spec(
            "injection",
            "corpus",
            f"{_A}.injection:PromptInjectionAttack",
            "instruction passages: question + instruction at start/middle/end",
        ),
        _spec(
            "injection-family",
            "corpus",
            f"{_A}.injection_families:FamilyInjectionAttack",
            "bastioncorpus injections (one family; issue #23) planted into on-topic text",
        ),
        _spec(
            "injection-adaptive",
            "corpus",
            f"{_A}.injection_adaptive:AdaptiveInjectionAttack",
            "black-box search for an injection the deployed chain lets through (rewordings, "
            "translation, framing, splitting, encodings, placement; issue #23)",
        ),
        _spec(
            "injection-blend",
            "corpus",
            f"{_A}.injection_blend:BlendInjectionAttack",
            "grey-box hill climb over camouflaged injections (forms, topic words, synonyms, "
            "typos, pieces, glyphs; issue #23's held-out attacker)",
        ),
        _spec(
            "injection-offtopic",
            "corpus",
            f"{_A}.planting:PlantedInstructionAttack",
            "the injected instruction alone, as a new passage",
            payload="injection",
            framing="off-topic",
        ),
        _spec(
            "injection-question",
            "corpus",
            f"{_A}.planting:PlantedInstructionAttack",
            "question + '.' + injected instruction, as a new passage",
            payload="injection",
            framing="question",
        ),
        _spec(
            "suffix",
            "corpus",
            f"{_A}.suffix:AdversarialSuffixAttack",
            "PoisonedRAG-style carrier + published GCG suffix (Zou et al. 2023)",
        ),
        _spec(
            "suffix-offtopic",
            "corpus",
            f"{_A}.planting:PlantedInstructionAttack",
            "a statement of the target answer + GCG suffix, no question",
            payload="suffix",
            framing="off-topic",
        ),
        _spec(
            "suffix-question",
            "corpus",
            f"{_A}.planting:PlantedInstructionAttack",
            "question + statement of the target answer + GCG suffix",
            payload="suffix",
            framing="question",
        ),
        *_ADAPTIVE,
        _spec(
            "rag-thief",
            "query",
            f"{_A}.extraction.rag_thief:RAGThief",
            "adaptive knowledge-base extraction with chunk memory (Jiang et al. 2024)",
        ),
        _spec(
            "rag-thief-canary-aware",
            "query",
            f"{_A}.extraction.canary_aware:CanaryAwareThief",
            "adaptive RAG-Thief: asks for copies without canary markers or long verbatim runs",
        ),
        _spec(
            "worm",
            "query",
            f"{_A}.extraction.worm:WormAttack",
            "self-replicating extraction prompt with collision search (Cohen et al. 2024)",
        ),
        _spec(
            "worm-one",
            "query",
            f"{_A}.extraction.worm:OneDocumentWorm",
            "adaptive worm: one document per answer, no reference codes (evades the "
            "recovery, breadth and verbatim rules by construction)",
        ),
    )
}


def register(
    name: str, target: str | Callable[..., Any], kind: Kind, summary: str = "", **params: Any
) -> AttackSpec:
    """Add (or replace) an attack; ``target`` is ``"package.module:Class"`` or, for code that
    defines an attack at run time, the class / factory itself."""
    if kind not in KINDS:
        raise InputError(f"attack kind must be one of {', '.join(KINDS)}. Got {kind!r} instead.")
    if isinstance(target, str) and ":" not in target:
        raise InputError(f"attack target must look like 'package.module:Class'. Got {target!r}.")
    spec = AttackSpec(name, kind, target, summary, params)
    _REGISTRY[name] = spec
    return spec


def available(kind: str | None = None) -> list[str]:
    """Registered names, sorted; ``kind`` = ``"corpus"`` or ``"query"`` narrows the list."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"attack kind must be one of {', '.join(KINDS)}. Got {kind!r} instead.")
    return sorted(n for n, s in _REGISTRY.items() if kind is None or s.kind == kind)


def get_spec(name: str, kind: str | None = None) -> AttackSpec:
    """The entry for ``name``; an unknown name (or one of another kind) lists the names."""
    spec = _REGISTRY.get(name)
    if spec is None or (kind is not None and spec.kind != kind):
        label = f"{kind} attack" if kind else "attack"
        raise InputError(
            f"unknown {label} {name!r}; available: {', '.join(available(kind)) or '(none)'}."
        )
    return spec


def attack_class(name: str, kind: str | None = None) -> Any:
    """The class behind ``name`` (imported now)."""
    target = get_spec(name, kind).target
    return target if callable(target) else load_target(target, name)


def load_target(target: str, name: str | None = None) -> Any:
    """Import ``"package.module:Class"``; a failure is a user error naming the attack."""
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(f"cannot load attack {name or target!r} from {target!r}: {exc}") from exc


def build_attack(name: str, *, kind: str | None = None, **params: Any) -> Any:
    """Build the attack ``name``: its preset parameters overridden by ``params``.

    A parameter the class does not take is a user error naming the attack, not a
    ``TypeError``.
    """
    spec = get_spec(name, kind)
    cls = attack_class(name, kind)
    try:
        return cls(**{**spec.params, **params})
    except TypeError as exc:
        raise InputError(f"bad parameters for attack {name!r}: {exc}") from exc
