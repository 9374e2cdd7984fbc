"""Prompt injections and adversarial suffixes, planted as new passages or into existing ones.

Example::

    from ragshield.attacks.planting import PlantedInstructionAttack

    offtopic = PlantedInstructionAttack(payload="injection", framing="off-topic")
    texts = offtopic.craft("who wrote the iliad", "Virgil", n=3, seed=0)   # new passages
    asked = PlantedInstructionAttack(payload="suffix", framing="question")
    edited = asked.insert_into(gold_text, "who wrote the iliad", "Virgil", seed=0)

Two payloads, reusing the builders that exist:

* ``"injection"`` — an instruction from :data:`ragshield.attacks.injection.INJECTION_TEMPLATES`
  (all four families by default: ignore-context, exfiltration, PromptInject, refusal);
* ``"suffix"`` — a statement of the target answer followed by a published GCG suffix
  (:func:`ragshield.attacks.suffix.universal_suffixes`, Zou et al. 2023).

Two framings, because retrieval decides whether a payload is ever read:

* ``"off-topic"`` — the payload alone: a passage that must be retrieved on its own words
  (an attacker who does not know the questions);
* ``"question"`` — ``question + "." + payload``
  (:func:`~ragshield.attacks.poisonedrag.question_prefixed`): PoisonedRAG's retrieval trick, so the
  passage ranks high for that question.

And two ways to plant them: :meth:`PlantedInstructionAttack.craft` writes *new* passages
(the :class:`~ragshield.attacks.base.CorpusAttack` call); :meth:`insert_into` edits an
*existing* passage (a genuine page hijacked by the attacker) — the instruction goes in as
its own sentence at the start, middle or end, the suffix at the end, as in GCG.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ragshield.attacks.injection import (
    INJECTION_TEMPLATES,
    POSITIONS,
    fill_template,
    insert_instruction,
)
from ragshield.attacks.poisonedrag import question_prefixed
from ragshield.attacks.suffix import append_suffix, universal_suffixes
from ragshield.errors import InputError, check_int, check_query

PAYLOADS: tuple[str, ...] = ("injection", "suffix")
FRAMINGS: tuple[str, ...] = ("off-topic", "question")

#: What a suffix rides on: a bare statement of the target answer (our wording).
SUFFIX_STATEMENT = "The answer is {answer}."


class PlantedInstructionAttack:
    """Injection / suffix payloads as new passages or inside existing ones.

    Parameters
    ----------
    payload: ``"injection"`` or ``"suffix"``.
    framing: ``"off-topic"`` (payload alone) or ``"question"`` (question-prefixed).
    kinds: injection families (keys of ``INJECTION_TEMPLATES``); ignored for suffixes.
    suffixes: suffix strings; ``None`` = the published GCG strings.
    positions: where :meth:`insert_into` may put an instruction.
    language: sentence segmentation language for insertion.
    """

    def __init__(
        self,
        payload: str = "injection",
        framing: str = "question",
        *,
        kinds: Sequence[str] = tuple(INJECTION_TEMPLATES),
        suffixes: Sequence[str] | None = None,
        positions: Sequence[str] = POSITIONS,
        language: str = "en",
    ) -> None:
        self.payload = payload
        self.framing = framing
        self.kinds = kinds
        self.suffixes = suffixes
        self.positions = positions
        self.language = language

    @property
    def name(self) -> str:
        """The registry name: ``injection-offtopic``, ``suffix-question``, ..."""
        return f"{self.payload}-{self.framing.replace('-', '')}"

    def _check(self) -> None:
        owner = type(self).__name__
        for param, value, allowed in (
            ("payload", self.payload, PAYLOADS),
            ("framing", self.framing, FRAMINGS),
        ):
            if value not in allowed:
                raise InputError(
                    f"The '{param}' parameter of {owner} must be one of "
                    f"{', '.join(allowed)}. Got {value!r} instead."
                )
        for param, values, allowed in (
            ("kinds", self.kinds, tuple(INJECTION_TEMPLATES)),
            ("positions", self.positions, POSITIONS),
        ):
            if isinstance(values, str) or not values or any(v not in allowed for v in values):
                raise InputError(
                    f"The '{param}' parameter of {owner} must be a non-empty list from "
                    f"{', '.join(allowed)}. Got {values!r} instead."
                )
        if self.suffixes is not None and (isinstance(self.suffixes, str) or not self.suffixes):
            raise InputError(
                f"The 'suffixes' parameter of {owner} must be a non-empty list of strings. "
                f"Got {self.suffixes!r} instead."
            )

    def payloads(self, question: str, target_answer: str) -> list[str]:
        """Every payload text for the question (instructions, or statement + suffix)."""
        self._check()
        if self.payload == "injection":
            return [
                fill_template(t, question, target_answer)
                for k in self.kinds
                for t in INJECTION_TEMPLATES[k]
            ]
        suffixes = (
            [s.suffix for s in universal_suffixes() if s.id != "gcg-init"]
            if self.suffixes is None
            else [str(s) for s in self.suffixes]
        )
        statement = SUFFIX_STATEMENT.replace("{answer}", target_answer.strip())
        return [append_suffix(statement, s) for s in suffixes]

    def _frame(self, question: str, payload: str) -> str:
        return question_prefixed(question, payload) if self.framing == "question" else payload

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        """``n`` new passages (fewer when the payload list is shorter), in seeded order."""
        check_query(question)
        check_query(target_answer, what="target answer")
        check_int(n, "n", f"{type(self).__name__}.craft", low=0)
        texts = self.payloads(question, target_answer)
        random.Random(seed).shuffle(texts)
        return [self._frame(question, t) for t in texts[:n]]

    def insert_into(
        self,
        passage_text: str,
        question: str,
        target_answer: str,
        *,
        seed: int = 0,
        position: str | None = None,
    ) -> str:
        """``passage_text`` with one payload planted in it (a hijacked genuine passage).

        An instruction becomes its own sentence at ``position`` (random from
        ``positions`` when ``None``); a suffix payload is appended at the end. With the
        ``"question"`` framing the planted piece is ``question + "." + payload``.
        """
        check_query(passage_text, what="passage")
        check_query(question)
        check_query(target_answer, what="target answer")
        rng = random.Random(seed)
        payload = self._frame(question, rng.choice(self.payloads(question, target_answer)))
        if self.payload == "suffix":
            return append_suffix(passage_text, payload)
        where = position if position is not None else rng.choice(list(self.positions))
        return insert_instruction(passage_text, payload, where, self.language)
