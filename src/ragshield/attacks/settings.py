"""The attack settings of ``ragshield scan`` and ``ragshield eval retrieval``: ONE table.

Example::

    from ragshield.attacks.settings import SETTINGS, expand, resolve

    resolve("mixed-2x").attacks          # ('poisonedrag-blackbox', 'misleading', 'garag-typos')
    expand(["clean", "adaptive"])        # clean + every adaptive setting
    resolve("filter-aware:200").budget   # 200 black-box calls per target

Why one table (issue #22): a setting used to be spelled in three places (``REAL_SETTINGS``,
``_COUNTS`` and an 80-line if-chain in ``eval.plant``). A row here names the registered
attack(s) (:mod:`ragshield.attacks.registry`) a setting plants, how many passages per
target, its group (the report shows one table per group) and the *shape* — how
:mod:`ragshield.eval.plant` turns the attack into planted passages (a shape is one
function there, resolved through a dict, never an if-chain). Adding a setting is one row.

Groups: ``clean`` (nothing planted), ``published`` (the papers' attack shapes),
``adaptive`` (an attacker who has read the defense, issue #28), ``injection`` (prompt
injection and adversarial suffixes), ``extraction`` (black-box knowledge-base
extraction, scored apart). ``--attacks all`` = every row not marked ``opt_in``; a group
name stands for its rows that are not ``opt_in``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragshield.errors import InputError

GROUPS: tuple[str, ...] = ("clean", "published", "adaptive", "injection", "extraction")
ALL = "all"
#: The filter-aware attacker's default budget of black-box calls per target (issue #28:
#: "e.g. 10 / 50 / 200"; the scan runs 50).
DEFAULT_BUDGET = 50
FILTER_AWARE = "filter-aware"


@dataclass(frozen=True)
class Setting:
    """One row: ``shape`` is the key of the planting function in
    :data:`ragshield.eval.plant.PLANTERS`; ``count`` passages per target (0 = none);
    ``opt_in`` rows run only when named (they cost model time or gradient steps)."""

    name: str
    group: str
    attacks: tuple[str, ...]
    count: int
    shape: str
    summary: str
    opt_in: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def budget(self) -> int:
        """Black-box calls per target (the ``filter-aware`` shape), else 0."""
        return int(self.params.get("budget", 0))

    @property
    def needs_chain(self) -> bool:
        """True when the planted texts depend on the defense chain (searched per chain)."""
        return self.shape == "searched"


def _row(name: str, group: str, attacks: tuple[str, ...], count: int, shape: str,
         summary: str, **kw: Any) -> Setting:  # fmt: skip
    return Setting(name, group, attacks, count, shape, summary, **kw)


_PR = ("poisonedrag-blackbox",)
_MIXED = ("poisonedrag-blackbox", "misleading", "garag-typos")

#: Every setting, in report order.
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        _row("clean", "clean", (), 0, "none", "nothing planted: what a defense costs"),
        _row("poisonedrag-1", "published", _PR, 1, "pool", "one PoisonedRAG passage"),
        _row("poisonedrag", "published", _PR, 5, "pool", "five PoisonedRAG passages"),
        _row("mixed-2x", "published", _MIXED, 10, "pool",
             "PoisonedRAG, blind and GARAG interleaved, up to 10 distinct passages"),
        _row("mixed-4x", "published", _MIXED, 20, "pool", "the same mix, up to 20"),
        _row("injection-prefixed", "injection", ("injection-question",), 1, "instruction",
             "question + injected instruction"),
        _row("injection-offtopic", "injection", ("injection-offtopic",), 1, "instruction",
             "an instruction alone"),
        _row("injection-hijack", "injection", ("injection-offtopic",), 1, "hijack",
             "the gold passage itself carries an instruction"),
        _row("suffix", "injection", ("suffix",), 1, "suffix",
             "a PoisonedRAG passage + a published GCG suffix"),
        *(  # issue #23: injections nobody at ragshield wrote, one row per family
            _row(f"injection-{fam.replace('_', '-')}", "injection", ("injection-family",), 1,
                 "family", f"bastioncorpus '{fam}' instruction inside the gold passage",
                 params={"family": fam})
            for fam in ("direct_injection", "instruction_override", "jailbreak_persona",
                        "indirect_injection", "exfiltration", "delimiter_injection",
                        "obfuscation")
        ),
        *(
            _row(f"prefix-{op}", "adaptive", (f"prefix-{op}",), 5, "adaptive",
                 f"PoisonedRAG bodies, question prefix rewritten ({op})")
            for op in ("drop", "synonym", "reorder", "statement", "typo")
        ),
        _row("question-middle", "adaptive", ("question-middle",), 5, "adaptive",
             "the verbatim question in the middle of the body"),
        _row("question-end", "adaptive", ("question-end",), 5, "adaptive",
             "the verbatim question at the end of the body"),
        _row("no-question", "adaptive", ("no-question",), 5, "adaptive",
             "no question: retrieval through the body (Tan et al.)"),
        _row("answer-spread", "adaptive", ("answer-spread",), 5, "adaptive",
             "wrong answer worded differently, mixed with edited genuine copies"),
        _row("facet-spread", "adaptive", ("facet-spread",), 5, "adaptive",
             "the wrong answer beside a different part of the gold page, passages unalike"),
        _row("near-duplicate", "adaptive", ("near-duplicate",), 1, "adaptive",
             "the gold passage with the right answer replaced"),
        _row("excerpt-edit", "adaptive", ("excerpt-edit",), 1, "adaptive",
             "an excerpt of the gold passage, answer replaced, under the near-copy bar"),
        _row("meta-epistemic", "adaptive", ("meta-epistemic",), 1, "adaptive",
             "one passage calling the other sources outdated (CorruptRAG-AK)"),
        _row("meta-epistemic-long", "adaptive", ("meta-epistemic-long",), 1, "adaptive",
             "the meta-epistemic note padded past the short-passage bar"),
        _row("meta-epistemic-own", "adaptive", ("meta-epistemic-own",), 1, "adaptive",
             "the meta-epistemic note padded past the bar with sentences of its own"),
        _row("meta-epistemic-named", "adaptive", ("meta-epistemic-named",), 1, "adaptive",
             "the meta-epistemic note citing a made-up source full of names"),
        _row("meta-epistemic-borrowed", "adaptive", ("meta-epistemic-borrowed",), 1,
             "adaptive", "the same, its names borrowed from the gold page"),
        _row(FILTER_AWARE, "adaptive", (FILTER_AWARE,), 5, "searched",
             "black-box search against the deployed chain; only survivors planted",
             params={"budget": DEFAULT_BUDGET}),
        _row("poisonedrag-whitebox", "adaptive", ("poisonedrag-whitebox",), 5, "precomputed",
             "HotFlip-optimised prefixes against the index's encoder", opt_in=True),
        _row("prefix-llm", "adaptive", ("prefix-llm",), 5, "adaptive",
             "PoisonedRAG bodies behind an LLM paraphrase of the question", opt_in=True),
        _row("extraction", "extraction", ("rag-thief", "worm"), 0, "query",
             "black-box knowledge-base extraction (CRR), scored apart"),
    )
}  # fmt: skip


def resolve(name: str) -> Setting:
    """The row for ``name``; ``filter-aware:N`` is the filter-aware row with budget N."""
    base, _, arg = name.strip().partition(":")
    row = SETTINGS.get(base)
    if row is None or (arg and row.shape != "searched"):
        raise InputError(
            f"unknown setting {name!r}; available: {', '.join(SETTINGS)}, "
            f"{FILTER_AWARE}:N (budget), groups {', '.join(GROUPS)}, {ALL}."
        )
    if not arg:
        return row
    try:
        budget = int(arg)
    except ValueError:
        budget = 0
    if budget < 1:
        raise InputError(f"setting {name!r}: the budget must be an integer >= 1. Got {arg!r}.")
    return dataclasses.replace(row, name=name.strip(), params={**row.params, "budget": budget})


def known(name: str) -> bool:
    try:
        resolve(name)
    except InputError:
        return False
    return True


def in_group(group: str) -> tuple[str, ...]:
    """The non-opt-in settings of ``group`` (``all`` = every non-opt-in setting)."""
    return tuple(
        s.name for s in SETTINGS.values() if not s.opt_in and (group == ALL or s.group == group)
    )


def expand(names: Iterable[str]) -> list[str]:
    """Setting names with ``all`` and group names expanded, de-duplicated in order; an
    unknown name is a user error listing what exists."""
    out: list[str] = []
    for n in (x.strip() for x in names):
        if not n:
            continue
        if n == ALL or (n in GROUPS and n not in SETTINGS):
            out += in_group(n)
        else:
            out.append(resolve(n).name)
    return list(dict.fromkeys(out))


def group_of(name: str) -> str:
    """The group of a setting name (``filter-aware:200`` -> ``adaptive``)."""
    return resolve(name).group
