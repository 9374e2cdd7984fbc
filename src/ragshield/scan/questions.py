"""Where a scan's questions come from: the user's file, or template questions.

Example::

    from ragshield.scan.questions import read_questions, template_questions

    qs = read_questions("questions.jsonl")   # {"question", "answer"?, "target"?, "id"?, ...}
    qs = template_questions(store.passages, 20, seed=0)

Why template questions: a scan must run on an index that came with no questions. Without
an LLM (``--writer llm`` writes them: :mod:`ragshield.scan.question_writer`), :func:`template_questions`
makes cloze questions offline — a few words around one number or named entity of an early
sentence of a sampled passage, that word blanked out (it is the answer). They are easy to retrieve (the
sentence is in the index) and every report labels them ``template questions``.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ragshield.corpus import json_lines
from ragshield.errors import DataFormatError, InputError, text_problem
from ragshield.text import normalize_answer, split_sentences
from ragshield.types import Passage

TEMPLATE_SOURCE = "template questions"


@dataclass(frozen=True)
class ScanQuestion:
    """The one question type of a scan (file, template or LLM): ``answers`` may be empty
    (the user gave none), ``target`` is the attacker's answer when the user chose one;
    ``gold_passage_ids`` are recorded (the scan derives gold from the answers)."""

    question: str
    answers: tuple[str, ...] = ()
    target: str = ""
    id: str = ""
    gold_passage_ids: tuple[str, ...] = ()
    source: str = "file"  # "file", "template questions" or the LLM writer's label


#: Fields of a questions file; ``target``, ``target_answer`` and ``incorrect_answer`` are
#: one field spelled three ways (the scan's, the datasets' and PoisonedRAG's names).
_KNOWN = frozenset(
    {
        "id",
        "question",
        "answer",
        "answers",
        "target",
        "target_answer",
        "incorrect_answer",
        "gold_passage_ids",
    }
)
_TARGET_KEYS = ("target", "target_answer", "incorrect_answer")


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
    target = ""
    for key in _TARGET_KEYS:
        if key in record:
            target = _strings(record[key], key, path, line)[0]
    gold = (
        _strings(record["gold_passage_ids"], "gold_passage_ids", path, line)
        if "gold_passage_ids" in record
        else ()
    )
    qid = record.get("id", f"q{line}")
    if not isinstance(qid, (str, int)) or isinstance(qid, bool):
        raise DataFormatError(path, line, "'id' must be a string or an integer")
    texts = (("question", question), ("target", target), *(("answer", a) for a in answers))
    for name, value in texts:  # a JSON "\ud800" escape: a lone surrogate (issue #27)
        problem = text_problem(value, allow_blank=True)
        if problem is not None:
            raise DataFormatError(path, line, f"{name!r} {problem}")
    return ScanQuestion(question.strip(), answers, target, str(qid), gold, "file")


def read_questions(path: str | os.PathLike[str]) -> list[ScanQuestion]:
    """The questions file: JSON Lines, one object per line, blank lines skipped::

        {"question": "who designed the eiffel tower", "answer": "Gustave Eiffel"}
        {"id": "q7", "question": "...", "answers": ["...", "..."], "target": "...",
         "gold_passage_ids": ["doc-12"]}

    Only ``question`` is required. A bad line raises
    :class:`~ragshield.errors.DataFormatError` naming ``file:line``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"questions file {str(p)!r} does not exist.")
    out: list[ScanQuestion] = []
    ids: set[str] = set()
    for line_no, record in json_lines(p):
        q = parse_question(record, p, line_no)
        if q.id in ids:
            raise DataFormatError(p, line_no, f"duplicate id {q.id!r}")
        ids.add(q.id)
        out.append(q)
    if not out:
        raise DataFormatError(p, None, "no questions: the file is empty")
    return out


# A number (years, counts) first: it is the least ambiguous blank; else a capitalised
# name that is not the sentence's first word.
_NUMBER = re.compile(r"\b\d[\d,.]*\d\b|\b\d\b")
_ENTITY = re.compile(r"(?<=\s)([A-Z][\w'-]+(?:\s+(?:of\s+|de\s+)?[A-Z][\w'-]+)*)")


# A window around the blank, not the whole sentence: a question that restates a passage
# sentence verbatim is exactly PoisonedRAG's retrieval trick, and sentence-level defenses
# rightly treat such a sentence as bait; real questions share a few words with the answer.
_BEFORE, _AFTER = 6, 5


def _cloze(passage: Passage) -> ScanQuestion | None:
    sentences = split_sentences(passage.text)
    for sentence in sentences[:3]:
        sentence = sentence.strip()
        if len(sentence.split()) < 5:
            continue
        m = _NUMBER.search(sentence) or _ENTITY.search(sentence)
        if m is None:
            continue
        answer = m.group(0).strip(",.")
        before = sentence[: m.start()].split()[-_BEFORE:]
        after: list[str] = []
        for w in sentence[m.start() + len(answer) :].rstrip(".!?").split()[:_AFTER]:
            if w in (",", ";"):
                break
            after.append(w.rstrip(",;:"))
            if w != after[-1]:  # the clause ends here
                break
        if len(before) + len(after) < 4:  # too little to retrieve by: keep the clause going
            after = sentence[m.start() + len(answer) :].rstrip(".!?").split()[: _AFTER + 3]
        title, a = normalize_answer(passage.title), normalize_answer(answer)
        show = title and a not in title and title not in a and passage.title not in before
        head = f"{passage.title}: " if show else ""
        cloze = re.sub(r"\s+([,;:])", r"\1", " ".join([*before, "____", *after]))
        return ScanQuestion(f"{head}{cloze}?", (answer,), id=passage.id, source=TEMPLATE_SOURCE)
    return None


def decoy_targets(
    questions: Sequence[ScanQuestion], passages: Sequence[Passage], seed: int = 0
) -> list[str]:
    """An attacker's answer per question: the user's ``target``, else a number (for a
    numeric answer) or a name from the index that is *no* question's right answer.

    Why not another question's answer (what :func:`ragshield.eval.plant.pick_target` does
    on a shared topic): every target is planted into one corpus, so a passage pushing
    question A's target into question B's context would then assert B's right answer and
    be scored as an attack that reached B."""
    right = {normalize_answer(a) for q in questions for a in q.answers}
    numbers: set[str] = set()
    names: set[str] = set()
    for p in passages[:5000]:  # plenty of candidates; bounded on a large index
        for sentence in split_sentences(p.text)[:3]:
            numbers.update(m.group(0) for m in _NUMBER.finditer(sentence))
            names.update(m.group(0) for m in _ENTITY.finditer(sentence))

    def usable(c: str) -> bool:
        n = normalize_answer(c)
        return bool(n) and not any(n in r or r in n for r in right)

    pools = {
        kind: sorted(c for c in pool if usable(c))
        for kind, pool in (("number", numbers), ("name", names))
    }
    out = []
    for i, q in enumerate(questions):
        if q.target:
            out.append(q.target)
            continue
        numeric = bool(q.answers) and all(_NUMBER.fullmatch(a) for a in q.answers)
        pool = pools["number" if numeric else "name"] or pools["name"] or pools["number"]
        out.append(random.Random(f"{seed}:{i}").choice(pool) if pool else "")
    return out


class TemplateQuestions:
    """Cloze questions from sampled passages (see the module docstring)."""

    name = TEMPLATE_SOURCE

    def __call__(self, passages: Sequence[Passage], n: int, seed: int) -> list[ScanQuestion]:
        if n < 1:
            raise InputError(f"--generate must be >= 1. Got {n} instead.")
        order = list(range(len(passages)))
        random.Random(seed).shuffle(order)
        out: list[ScanQuestion] = []
        for i in order:
            q = _cloze(passages[i])
            if q is not None:
                out.append(q)
            if len(out) == n:
                break
        if not out:
            raise InputError("no passage of the index has a sentence to make a question from")
        return out


def template_questions(passages: Sequence[Passage], n: int, seed: int = 0) -> list[ScanQuestion]:
    return TemplateQuestions()(passages, n, seed)
