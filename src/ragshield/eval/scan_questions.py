"""Where a scan's questions come from: the user's file, or template questions.

Example::

    from ragshield.eval.scan_questions import read_questions, template_questions

    qs = read_questions("questions.jsonl")          # {"question", "answer"?, "target"?}
    qs = template_questions(store.passages, 20, seed=0)

Why template questions: a scan must run on an index that came with no questions. Until an
LLM question generator is plugged in (``QuestionSource``), :func:`template_questions`
makes cloze questions offline — a few words around one number or named entity of an early
sentence of a sampled passage, that word blanked out (it is the answer). They are easy to retrieve (the
sentence is in the index) and every report labels them ``template questions``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ragshield.errors import DataFormatError, InputError, text_problem
from ragshield.text import normalize_answer, split_sentences
from ragshield.textfile import load_json, read_utf8
from ragshield.types import Passage

TEMPLATE_SOURCE = "template questions"


@dataclass(frozen=True)
class ScanQuestion:
    """A question to attack; ``answers`` may be empty (the user gave none), ``target`` is
    the attacker's answer when the user chose one."""

    question: str
    answers: tuple[str, ...] = ()
    target: str = ""


class QuestionSource(Protocol):
    """The seam for question generators (an LLM one can replace the templates)."""

    name: str

    def __call__(self, passages: Sequence[Passage], n: int, seed: int) -> list[ScanQuestion]: ...


def read_questions(path: str | Path) -> list[ScanQuestion]:
    """One JSON object per line: ``question`` (str), optional ``answer`` (str or list of
    str) and ``target`` (str). Blank lines are skipped; any other bad line says where."""
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, None, "questions file not found")
    out: list[ScanQuestion] = []
    for lineno, line in enumerate(read_utf8(path, "questions file").splitlines(), start=1):
        if not line.strip():
            continue
        rec = load_json(line, path, lineno)
        if not isinstance(rec, dict):
            raise DataFormatError(path, lineno, "expected a JSON object with 'question'")
        q = rec.get("question")
        if not isinstance(q, str) or not q.strip():
            raise DataFormatError(path, lineno, "'question' must be a non-empty string")
        ans = rec.get("answer", [])
        ans = [ans] if isinstance(ans, str) else ans
        if not isinstance(ans, list) or not all(isinstance(a, str) and a.strip() for a in ans):
            raise DataFormatError(path, lineno, "'answer' must be a string or a list of strings")
        target = rec.get("target", "")
        if not isinstance(target, str):
            raise DataFormatError(path, lineno, "'target' must be a string")
        for name, value in (("question", q), ("target", target), *(("answer", a) for a in ans)):
            problem = text_problem(value, allow_blank=True)  # a lone surrogate (root cause 9)
            if problem is not None:
                raise DataFormatError(path, lineno, f"{name!r} {problem}")
        out.append(ScanQuestion(q.strip(), tuple(a.strip() for a in ans), target.strip()))
    if not out:
        raise DataFormatError(path, None, "no questions in the file")
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
        return ScanQuestion(f"{head}{cloze}?", (answer,))
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

    pools = {kind: sorted(c for c in pool if usable(c)) for kind, pool in
             (("number", numbers), ("name", names))}  # fmt: skip
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
