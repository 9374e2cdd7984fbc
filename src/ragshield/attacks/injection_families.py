"""Injection families nobody at ragshield wrote, planted the way an attacker would.

Example::

    from ragshield.attacks.injection_families import FamilyInjectionAttack, family_rows

    rows = family_rows("exfiltration")                  # the corpus's labelled texts
    attack = FamilyInjectionAttack("exfiltration", placement="mid-paragraph",
                                   carriers={question: [on_topic_paragraph]})
    texts = attack.craft(question, "", n=2, seed=0)

The instructions come from ``bastioncorpus`` 0.6.0 (PyPI, MIT licence, © 2026 Stefano
Rizzello): 118 labelled injections in seven families — ``direct_injection``,
``instruction_override``, ``jailbreak_persona``, ``indirect_injection``,
``exfiltration``, ``delimiter_injection``, ``obfuscation`` — in English, German, French,
Spanish and Italian, plus 63 benign look-alikes (``benign_*``) used as hard negatives.
A ``{canary}`` slot is filled with a per-question canary word (:func:`canary_word`), so an
answer that obeys the instruction is recognisable (the output-side check).

Placements (:data:`PLACEMENTS`), each an attacker's way of getting the instruction read:

* ``prefixed`` — the question, then the instruction (PoisonedRAG's retrieval trick);
* ``in-passage`` — the question, then an on-topic genuine paragraph carrying the
  instruction as one of its sentences (start, middle or end);
* ``mid-paragraph`` — an on-topic genuine paragraph with the instruction in its middle and
  no question (a hijacked page: retrieved on its topic alone);
* ``split`` — as ``in-passage``, with the instruction cut into two sentences at a word
  boundary near its middle;
* ``base64`` / ``leet`` / ``zero-width`` / ``homoglyph`` — as ``in-passage``, the
  instruction obfuscated (:func:`obfuscate`); a base64 block is introduced by a neutral
  label ("Reference (base64): ..."), as the corpus's own encoded items do;
* ``prefixed-reworded`` — as ``prefixed``, the question reworded first by a seeded choice
  of :data:`ragshield.attacks.rewrite.REWRITES` (words dropped, synonyms, reordered, a
  statement, typos; no question mark): an attacker who has read a defense that looks for
  the question word for word (issue #23).

Translated: the corpus's non-English rows (``lang`` != ``en``) are the translated family;
``family_rows(lang=...)`` selects them.
"""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ragshield.attacks.injection import insert_instruction
from ragshield.attacks.rewrite import REWRITES
from ragshield.errors import InputError, check_int, check_query

__all__ = [
    "FAMILIES", "OBFUSCATIONS", "PLACEMENTS", "FamilyInjectionAttack", "FamilyRow",
    "canary_word", "family_rows", "obfuscate", "plant",
]  # fmt: skip

FAMILIES: tuple[str, ...] = (
    "direct_injection",
    "instruction_override",
    "jailbreak_persona",
    "indirect_injection",
    "exfiltration",
    "delimiter_injection",
    "obfuscation",
)
OBFUSCATIONS: tuple[str, ...] = ("base64", "leet", "zero-width", "homoglyph")
PLACEMENTS: tuple[str, ...] = (
    "prefixed", "in-passage", "mid-paragraph", "split", *OBFUSCATIONS, "prefixed-reworded",
)  # fmt: skip
CANARY_SLOT = "{canary}"


@dataclass(frozen=True)
class FamilyRow:
    """One corpus row: ``label`` is ``malicious`` or ``benign``."""

    id: str
    text: str
    family: str
    label: str
    lang: str


@lru_cache(maxsize=1)
def _rows() -> tuple[FamilyRow, ...]:
    try:
        from bastioncorpus import load_corpus
    except ModuleNotFoundError as exc:
        raise InputError(
            "the injection families need the 'bastioncorpus' package (MIT, PyPI): "
            'pip install "ragshield[dev]" or pip install bastioncorpus==0.6.0'
        ) from exc
    return tuple(FamilyRow(r.id, r.text, r.category, r.label, r.lang) for r in load_corpus())


def family_rows(
    family: str | None = None, *, label: str = "malicious", lang: str | None = None
) -> list[FamilyRow]:
    """Rows of one family (``None``: all) with ``label``, optionally of one language."""
    if family is not None and label == "malicious" and family not in FAMILIES:
        raise InputError(f"unknown injection family {family!r}; available: {', '.join(FAMILIES)}.")
    return [
        r
        for r in _rows()
        if r.label == label
        and (family is None or r.family == family)
        and (lang is None or r.lang == lang)
    ]


def canary_word(key: str) -> str:
    """A deterministic made-up token for ``key`` (never a real word or answer)."""
    h = hashlib.blake2b(key.encode(), digest_size=4).hexdigest().upper()
    return f"ZX-{h}"


def fill(text: str, canary: str) -> str:
    return text.replace(CANARY_SLOT, canary)


# ------------------------------------------------------------------ obfuscation

_HOMOGLYPHS = str.maketrans({"a": "а", "e": "е", "o": "о", "p": "р", "c": "с", "x": "х", "i": "і"})
_LEET = str.maketrans({"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"})


def obfuscate(text: str, how: str) -> str:
    """The instruction as an obfuscating attacker writes it (the generator still reads it):
    ``base64`` (a labelled block), ``leet`` (a e i o s t -> 4 3 1 0 5 7), ``zero-width``
    (U+200B between the letters of every word), ``homoglyph`` (Latin a e o p c x i ->
    Cyrillic look-alikes)."""
    if how == "base64":
        return f"Reference (base64): {base64.b64encode(text.encode()).decode()}"
    if how == "leet":
        return text.translate(_LEET)
    if how == "zero-width":
        return " ".join("\u200b".join(w) for w in text.split(" "))
    if how == "homoglyph":
        return text.translate(_HOMOGLYPHS)
    raise InputError(f"unknown obfuscation {how!r}; available: {', '.join(OBFUSCATIONS)}.")


def split_in_two(text: str) -> str:
    """The instruction as two sentences, cut at the word boundary nearest its middle."""
    words = " ".join(text.split()).split(" ")
    if len(words) < 4:
        return text
    cut = len(words) // 2
    first = " ".join(words[:cut]).rstrip(",;:")
    second = " ".join(words[cut:])
    return f"{first}. {second[0].upper()}{second[1:]}"


def plant(
    instruction: str,
    placement: str,
    question: str,
    carrier: str,
    rng: random.Random,
) -> tuple[str, str]:
    """``(planted passage, instruction as planted)`` for one placement (module docstring).
    ``carrier`` is an on-topic genuine paragraph (unused for ``prefixed``)."""
    q = question.strip()
    one = " ".join(instruction.split())  # the corpus's line breaks become spaces in prose
    if placement == "prefixed":
        return f"{q} {one}", one
    if placement == "prefixed-reworded":
        kinds = sorted(REWRITES)
        return f"{REWRITES[kinds[rng.randrange(len(kinds))]](q, rng)} {one}", one
    if placement == "mid-paragraph":
        return insert_instruction(carrier, one, "middle"), one
    where = rng.choice(("start", "middle", "end"))
    if placement == "in-passage":
        planted = one
    elif placement == "split":
        planted = split_in_two(one)
    elif placement in OBFUSCATIONS:
        planted = obfuscate(one, placement)
    else:
        raise InputError(f"unknown placement {placement!r}; available: {', '.join(PLACEMENTS)}.")
    return f"{q} {insert_instruction(carrier, planted, where)}", planted


class FamilyInjectionAttack:
    """Corpus attack planting one family's instructions with one placement.

    Parameters
    ----------
    family: a :data:`FAMILIES` name (``None``: every family).
    placement: a :data:`PLACEMENTS` name.
    carriers: question -> on-topic genuine paragraphs; without one the carrier is the
        question itself.
    lang: only rows of this language (``None``: all five).
    """

    def __init__(
        self,
        family: str | None = None,
        placement: str = "in-passage",
        carriers: Mapping[str, Sequence[str]] | None = None,
        *,
        lang: str | None = None,
    ) -> None:
        self.family = family
        self.placement = placement
        self.carriers = carriers
        self.lang = lang

    @property
    def name(self) -> str:
        return f"injection-{(self.family or 'all').replace('_', '-')}-{self.placement}"

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        check_query(question)
        check_int(n, "n", f"{type(self).__name__}.craft", low=0)
        if self.placement not in PLACEMENTS:
            raise InputError(
                f"The 'placement' parameter of {type(self).__name__} must be one of "
                f"{', '.join(PLACEMENTS)}. Got {self.placement!r} instead."
            )
        rows = family_rows(self.family, lang=self.lang)
        if not rows:
            raise InputError(f"no rows for family {self.family!r} in language {self.lang!r}.")
        rng = random.Random(f"{seed}\x00{question}")
        carriers = [c for c in (self.carriers or {}).get(question, ()) if c.strip()] or [
            question.strip()
        ]
        canary = canary_word(question)
        out: list[str] = []
        for i in rng.sample(range(len(rows)), min(n, len(rows))):
            carrier = carriers[rng.randrange(len(carriers))]
            out.append(plant(fill(rows[i].text, canary), self.placement, question, carrier, rng)[0])
        return out
