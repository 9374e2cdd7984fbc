"""Questions to attack a user's own index with: read from a file, or written by the LLM.

Example::

    from ragshield.eval.questions import QuestionWriter, read_questions

    qs = read_questions("my_questions.jsonl")          # {"question": ..., "answer": ...}
    qs = QuestionWriter().generate(passages, n=20, seed=0)   # from the indexed passages
    print(qs[0].question, qs[0].answers, qs[0].gold_passage_ids)

Why here (``eval``) and not in ``attacks``: questions are the *test set* of a scan, like
the datasets of :mod:`ragshield.eval.datasets`; every attack then uses them. Generated
questions are self-checked: the LLM's short answer must occur in its source passage
(normalised, on word boundaries), or the pair is discarded — so a question's gold passage
really answers it, and accuracy / ASR can be scored against it.

File format (JSON Lines, one object per line, blank lines skipped)::

    {"question": "who designed the eiffel tower", "answer": "Gustave Eiffel"}
    {"id": "q7", "question": "...", "answers": ["...", "..."], "target_answer": "...",
     "gold_passage_ids": ["doc-12"]}

``answer``/``answers``, ``target_answer`` (the wrong answer an attack should push; also
accepted as ``incorrect_answer``) and ``gold_passage_ids`` are optional. A bad line raises
:class:`~ragshield.errors.DataFormatError` naming ``file:line``.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragshield.attacks.writer import TextWriter, truncate_words
from ragshield.errors import DataFormatError, InputError, check_int
from ragshield.text import contains_answer, normalize_answer
from ragshield.types import Passage


@dataclass(frozen=True)
class ScanQuestion:
    """One question a scan attacks, with what is known about its right answer."""

    id: str
    question: str
    answers: tuple[str, ...] = ()
    gold_passage_ids: tuple[str, ...] = ()
    target_answer: str | None = None
    source: str = "file"  # "file" or "llm:<generator>"


_KNOWN = {
    "id",
    "question",
    "answer",
    "answers",
    "target_answer",
    "incorrect_answer",
    "gold_passage_ids",
}


def _strings(value: object, key: str, path: Path, line: int) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, str) and v.strip() for v in value)
    ):
        raise DataFormatError(path, line, f"{key!r} must be a non-empty string or list of strings")
    return tuple(v.strip() for v in value)


def parse_question(record: object, path: Path, line: int) -> ScanQuestion:
    """One JSON object of a questions file -> :class:`ScanQuestion` (or a located error)."""
    if not isinstance(record, dict):
        raise DataFormatError(path, line, "each line must be a JSON object with a 'question'")
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DataFormatError(path, line, "missing or empty string field 'question'")
    unknown = sorted(set(record) - _KNOWN)
    if unknown:
        raise DataFormatError(
            path,
            line,
            f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KNOWN))}",
        )
    answers: tuple[str, ...] = ()
    for key in ("answer", "answers"):
        if key in record:
            answers += _strings(record[key], key, path, line)
    target = None
    for key in ("target_answer", "incorrect_answer"):
        if key in record:
            (target,) = _strings(record[key], key, path, line)[:1]
    gold = (
        _strings(record["gold_passage_ids"], "gold_passage_ids", path, line)
        if ("gold_passage_ids" in record)
        else ()
    )
    qid = record.get("id", f"q{line}")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise DataFormatError(path, line, "'id' must be a string or an integer")
    return ScanQuestion(str(qid), question.strip(), answers, gold, target, "file")


def read_questions(path: str | os.PathLike[str]) -> list[ScanQuestion]:
    """Read a JSON Lines questions file (see the module docstring for the fields)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"questions file {str(p)!r} does not exist.")
    out: list[ScanQuestion] = []
    ids: set[str] = set()
    try:
        with p.open(encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataFormatError(p, line_no, f"invalid JSON: {exc.msg}") from exc
                q = parse_question(record, p, line_no)
                if q.id in ids:
                    raise DataFormatError(p, line_no, f"duplicate id {q.id!r}")
                ids.add(q.id)
                out.append(q)
    except UnicodeDecodeError as exc:
        raise DataFormatError(p, None, f"not UTF-8 text: {exc}") from exc
    if not out:
        raise DataFormatError(p, None, "no questions: the file is empty")
    return out


# ---------------------------------------------------------------------------- generation

#: Our wording. Small models often reply with the question only; then :data:`ANSWER_PROMPT`
#: asks for the answer in a second call.
PROMPT = (
    "Read the passage and write one question that the passage answers, and the answer to "
    "it: a short phrase (at most five words) copied exactly from the passage.\n\n"
    "Passage: {passage}\n\n"
    "Reply with exactly two lines:\nQuestion: <the question>\nAnswer: <the short answer>"
)
ANSWER_PROMPT = (
    "Passage: {passage}\n\nQuestion: {question}\n\nAnswer the question with a short "
    "phrase (at most five words) copied exactly from the passage. Reply with the phrase only."
)
_Q = re.compile(r"^\W*question\s*\d*\s*[:：]\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_A = re.compile(r"^\W*answer\s*\d*\s*[:：]\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_MAX_ANSWER_WORDS = 8


def _clean(text: str) -> str:
    return text.strip().strip("*\"'“” ").strip()


def parse_reply(text: str) -> tuple[str, str | None] | None:
    """``(question, answer)`` from a ``Question: ... / Answer: ...`` reply; a reply that is
    only a question gives ``(question, None)``; no question at all gives ``None``."""
    q, a = _Q.search(text), _A.search(text)
    if q is not None:
        question = _clean(q.group(1))
    else:
        lines = [ln for ln in text.strip().splitlines() if ln.strip()]
        question = _clean(lines[0]) if lines and lines[0].strip().endswith("?") else ""
    if not question:
        return None
    answer = _short_answer(a.group(1)) if a is not None else None
    return question, answer


def _short_answer(text: str) -> str | None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    answer = _clean(lines[0]).rstrip(".").strip() if lines else ""
    if not answer or len(answer.split()) > _MAX_ANSWER_WORDS:
        return None
    return answer


def self_check(question: str, answer: str, passage: str) -> bool:
    """The answer occurs in its source passage (normalised, word boundaries) and is not
    simply given away by the question."""
    return contains_answer(passage, answer) and not contains_answer(question, answer)


class QuestionWriter:
    """Write (question, answer) pairs for sampled passages with an LLM.

    Parameters
    ----------
    writer: a :class:`~ragshield.attacks.writer.TextWriter`, a generator / spec it
        accepts, or ``None`` for the packaged default model (cached).
    max_passage_words: a longer passage is cut before it goes into the prompt (prefill
        time on a CPU grows with it).
    attempts_per_question: passages tried per accepted question before giving up.
    """

    def __init__(
        self,
        writer: TextWriter | object | None = None,
        *,
        max_passage_words: int = 150,
        attempts_per_question: int = 3,
    ) -> None:
        self.writer = writer
        self.max_passage_words = max_passage_words
        self.attempts_per_question = attempts_per_question

    @property
    def writer_(self) -> TextWriter:
        if not isinstance(self.writer, TextWriter):
            self.writer = TextWriter(self.writer)  # type: ignore[arg-type]
        return self.writer

    def generate(self, passages: Sequence[Passage], n: int, *, seed: int = 0) -> list[ScanQuestion]:
        """Up to ``n`` self-checked questions, each from a distinct sampled passage."""
        owner = type(self).__name__
        check_int(n, "n", f"{owner}.generate", low=0)
        check_int(self.max_passage_words, "max_passage_words", owner, low=10)
        check_int(self.attempts_per_question, "attempts_per_question", owner, low=1)
        if isinstance(passages, (str, Passage)):
            raise InputError("passages must be a list of Passage objects, not a single one.")
        writer = self.writer_
        if writer.is_template:
            raise InputError("generating questions needs an LLM; 'template' has none.")
        order = list(range(len(passages)))
        random.Random(seed).shuffle(order)
        out: list[ScanQuestion] = []
        seen: set[str] = set()
        for i in order[: n * self.attempts_per_question]:
            if len(out) == n:
                break
            passage = passages[i]
            text = truncate_words(passage.text, self.max_passage_words)
            if len(text.split()) < 8:
                continue
            reply = writer.write(PROMPT.replace("{passage}", text))
            pair = parse_reply(reply.raw)
            if pair is None:
                continue
            question, answer = pair
            if answer is None:
                second = writer.write(
                    ANSWER_PROMPT.replace("{passage}", text).replace("{question}", question)
                )
                answer = _short_answer(second.raw)
            if answer is None or not self_check(question, answer, text):
                continue
            key = normalize_answer(question)
            if key in seen:
                continue
            seen.add(key)
            out.append(
                ScanQuestion(
                    id=f"gen-{passage.id}",
                    question=question,
                    answers=(answer,),
                    gold_passage_ids=(passage.id,),
                    source=reply.generated_by,
                )
            )
        return out
