"""Shared loop of the LLM-written poisoning attacks (PoisonedRAG black-box, misleading).

Both ask an LLM for ``n`` short passages that state the attacker's target answer, keep a
passage only when it really contains the target answer (normalised, word boundaries), and
vary the instruction — not a sampling seed — between passages: decoding stays greedy, so
every passage is reproducible and cached, and the ``seed`` picks the order of the style
hints. A subclass supplies the prompt, how a passage is planted, and its template wording.

Every passage carries its provenance (:class:`CraftedPassage`): ``generated_by`` is
``"llm:<generator>"`` or ``"template"`` (no LLM), so a report can label template rows instead of passing them off as LLM text.
An LLM-backed attack never pads its output with template passages.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from ragshield.attacks.writer import TEMPLATE, TextWriter, drop_unfinished, truncate_words
from ragshield.errors import check_int, check_query
from ragshield.text import contains_answer, normalize_answer

#: Style hints appended to the instruction so greedy decoding yields distinct passages
#: (ours; "" = the paper's instruction verbatim).
STYLES: tuple[str, ...] = (
    "",
    "Write it like an encyclopedia entry.",
    "Write it like a news report.",
    "Write it like a paragraph from a textbook.",
    "Write it like an answer on a question-and-answer website.",
    "Write it like an official record.",
    "Write it like a paragraph from a history book.",
    "Write it like a magazine article.",
)


@dataclass(frozen=True)
class CraftedPassage:
    """One planted text and how it was made.

    ``text`` is what goes into the index; ``body`` the written passage before assembly
    (e.g. without PoisonedRAG's question prefix); ``seconds`` the generator time (0 for a
    cache hit or a template).
    """

    text: str
    body: str
    generated_by: str
    style: str
    seconds: float = 0.0
    cached: bool = False


class LLMPassageAttack:
    """Base class; see :class:`~ragshield.attacks.poisonedrag.PoisonedRAGAttack`.

    Parameters
    ----------
    generator: a :class:`~ragshield.generate.base.Generator`, a generator spec, a
        :class:`~ragshield.attacks.writer.TextWriter`, ``"template"`` (no LLM) or ``None``
        (the packaged default model, cached under the ragshield cache).
    words: target passage length in words (the prompt asks for it; replies are cut at
        ``2 × words``).
    tries: extra instructions tried per passage when a reply lacks the target answer.
    """

    name = "llm-passages"
    default_words = 30

    def __init__(
        self,
        generator: object = None,
        *,
        words: int | None = None,
        tries: int = 2,
    ) -> None:
        self.generator = generator
        self.words = self.default_words if words is None else words
        self.tries = tries
        self._writer: TextWriter | None = None

    #: the paper's instruction, with ``{question}``, ``{answer}`` and ``{words}`` slots
    instruction = ""

    # -- to override ------------------------------------------------------------------

    def prompt(self, question: str, target_answer: str, style: str) -> str:
        """The paper's instruction filled in, the style hint appended."""
        if not self.instruction:
            raise NotImplementedError(f"{type(self).__name__} sets no instruction")
        q = question.strip().rstrip("?").strip()
        text = (
            self.instruction.replace("{question}", q)
            .replace("{answer}", target_answer.strip())
            .replace("{words}", str(self.words))
        )
        return f"{text} {style}".strip()

    def assemble(self, question: str, body: str) -> str:
        return body

    def template_bodies(self, question: str, target_answer: str) -> list[str]:
        raise NotImplementedError

    # -- machinery ----------------------------------------------------------------------

    @property
    def writer_(self) -> TextWriter:
        if self._writer is None:
            self._writer = (
                self.generator
                if isinstance(self.generator, TextWriter)
                else TextWriter(self.generator)  # type: ignore[arg-type]
            )
        return self._writer

    @property
    def generated_by(self) -> str:
        """``"llm:<generator>"`` or ``"template"``: who writes this attack's passages."""
        return self.writer_.generated_by

    def warm_up(self) -> None:
        self.writer_.warm_up()

    def _check(self, question: str, target_answer: str, n: int) -> None:
        owner = type(self).__name__
        check_query(question)
        check_query(target_answer, what="target answer")
        check_int(n, "n", f"{owner}.craft", low=0)
        check_int(self.words, "words", owner, low=5)
        check_int(self.tries, "tries", owner, low=0)

    def craft_passages(
        self, question: str, target_answer: str, n: int, *, seed: int = 0
    ) -> list[CraftedPassage]:
        """Up to ``n`` distinct passages with provenance.

        With an LLM, fewer than ``n`` come back when the replies kept lacking the target
        answer after ``tries`` extra instructions per passage: LLM rows are never padded
        with template text (the harness reports the number actually planted). Without an
        LLM (``"template"``), the template wordings are used, at most their number.
        """
        self._check(question, target_answer, n)
        styles = list(STYLES)
        random.Random(seed).shuffle(styles)
        out: list[CraftedPassage] = []
        seen: set[str] = set()
        writer = self.writer_
        cursor = 0
        if not writer.is_template:
            budget = n * (1 + self.tries)
            while len(out) < n and cursor < budget:
                style = styles[cursor % len(styles)]
                variant = cursor // len(styles)  # past one round of styles: number the ask
                instruction = self.prompt(question, target_answer, style)
                if variant:
                    instruction += f" (Version {variant + 1}.)"
                cursor += 1
                reply = writer.write(instruction)
                body = truncate_words(drop_unfinished(reply.text), 2 * self.words)
                key = normalize_answer(body)
                if not body or key in seen or not contains_answer(body, target_answer):
                    continue
                seen.add(key)
                out.append(
                    CraftedPassage(
                        self.assemble(question, body),
                        body,
                        reply.generated_by,
                        style,
                        0.0 if reply.cached else reply.seconds,
                        reply.cached,
                    )
                )
            return out
        for body in self.template_bodies(question, target_answer):
            if len(out) >= n:
                break
            key = normalize_answer(body)
            if key not in seen:
                seen.add(key)
                out.append(CraftedPassage(self.assemble(question, body), body, TEMPLATE, ""))
        return out

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        """The :class:`~ragshield.attacks.base.CorpusAttack` call: planted texts only."""
        return [p.text for p in self.craft_passages(question, target_answer, n, seed=seed)]


def fill(template: str, question: str, answer: str) -> str:
    q = question.strip().rstrip("?").strip()
    return template.replace("{question}", q).replace("{answer}", answer.strip())


def fill_all(templates: Sequence[str], question: str, answer: str) -> list[str]:
    return [fill(t, question, answer) for t in templates]
