"""On-topic QA corpora for real-retrieval evaluation (``../shared/data/ontopic/``).

Example::

    from ragshield.eval.ontopic import load_ontopic

    data = load_ontopic("../shared/data/ontopic/squad_v1.1_dev_43articles.json")
    dev, test = data.split("dev"), data.split("test")
    print(len(data.passages), len(dev), dev[0].question, dev[0].gold_ids)

Why a separate loader: the poisoning sets (:mod:`ragshield.eval.datasets`) hold one golden
passage per question and borrow *other* questions' goldens as benign passages, so every
benign passage is off-topic. Here every paragraph of an article is indexed and a question's
top-k comes from a real index, on its topic and mutually similar — the setting a deployed
defense meets. The split is fixed and documented so no threshold is tuned on the reported
part:

* SQuAD: articles sorted by title; even positions are **dev**, odd positions **test**
  (whole articles, so no test paragraph is ever a dev question's neighbour).
* HotpotQA: the 56 questions that are *not* shared poisoning targets are **dev**; the 44
  targets (``in_poisoning_targets``) are **test**, as the data README asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragshield.errors import DataFormatError, InputError, text_problem
from ragshield.textfile import load_json, read_utf8
from ragshield.types import Passage

Split = Literal["dev", "test", "all"]


@dataclass(frozen=True)
class QACase:
    """One question with the passages that answer it.

    ``target_answer`` is the attacker's (incorrect) answer when the question is a shared
    poisoning target, and ``attack_texts`` its published adversarial passages by attack
    name ("poisonedrag", "blind", "garag"); both are empty otherwise. ``attack_source``
    labels those texts in every table: ``"shared"`` (published) or ``"llm"`` (written for
    this question by ragshield's generators, e.g. ``ragshield scan --writer llm``).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    gold_ids: tuple[str, ...]
    topic: str
    split: str
    target_answer: str = ""
    attack_texts: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    attack_source: str = "shared"


@dataclass(frozen=True)
class OnTopicData:
    """A corpus and its questions; ``name`` is the file's short name (``squad``, ``hotpotqa``)."""

    name: str
    passages: tuple[Passage, ...]
    questions: tuple[QACase, ...]

    def split(self, which: Split) -> list[QACase]:
        if which not in ("dev", "test", "all"):
            raise InputError(f"split must be 'dev', 'test' or 'all'; got {which!r}.")
        return [q for q in self.questions if which == "all" or q.split == which]

    def golden_text(self, cases: Sequence[QACase]) -> dict[str, str]:
        """``{case id: text of its first gold passage}`` for the cases that have one in
        this corpus: what planting edits (near-copies, excerpts) and the searches read."""
        text_of = {p.id: p.text for p in self.passages}
        return {c.id: text_of[c.gold_ids[0]] for c in cases
                if c.gold_ids and c.gold_ids[0] in text_of}  # fmt: skip


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    data = load_json(read_utf8(path, "ontopic file"), path)
    if not isinstance(data, dict) or "passages" not in data or "questions" not in data:
        raise DataFormatError(path, None, "expected an object with 'passages' and 'questions'")
    _check_schema(path, data)
    return data


# field -> (what it must be, the test); "answers": "Canberra" was scored per character
_TEXT = ("a non-empty string", lambda v: isinstance(v, str) and text_problem(v) is None)
_ID = ("a string or integer", lambda v: isinstance(v, (str, int)) and not isinstance(v, bool))
_TEXTS = (
    "a list of non-empty strings",
    lambda v: isinstance(v, list) and all(_TEXT[1](a) for a in v),
)
_IDS = ("a list of ids", lambda v: isinstance(v, list) and all(_ID[1](a) for a in v))
_PASSAGE_FIELDS = {"id": _ID, "text": _TEXT}
_QUESTION_FIELDS = {"id": _ID, "question": _TEXT, "answers": _TEXTS, "gold_passage_ids": _IDS}


def _check_schema(path: Path, data: dict[str, Any]) -> None:
    """Every passage and question has its fields, of the right type, before anything is
    indexed (a passage without an id was a KeyError after the encoder loaded; issue #27,
    root cause 14)."""
    for section, fields in (("passages", _PASSAGE_FIELDS), ("questions", _QUESTION_FIELDS)):
        items = data[section]
        if not isinstance(items, list):
            raise DataFormatError(path, None, f"'{section}' must be a list of objects")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise DataFormatError(path, None, f"{section}[{i}] must be an object")
            for name, (kind, ok) in fields.items():
                if name not in item:
                    raise DataFormatError(path, None, f"{section}[{i}] lacks {name!r}")
                if not ok(item[name]):
                    raise DataFormatError(
                        path, None, f"{section}[{i}].{name} must be {kind}, got {item[name]!r:.60}"
                    )
            title = item.get("title", "")
            if not isinstance(title, str) or text_problem(title, allow_blank=True):
                raise DataFormatError(path, None, f"{section}[{i}].title must be a string")


def _attack_texts(poisoning_dir: Path | None) -> dict[str, tuple[str, dict[str, tuple[str, ...]]]]:
    """question id -> (incorrect answer, attack texts) from a shared poisoning folder."""
    if poisoning_dir is None or not poisoning_dir.is_dir():
        return {}
    from ragshield.eval.datasets import load_poisoning

    return {c.id: (c.incorrect_answer, dict(c.adversarial)) for c in load_poisoning(poisoning_dir)}


def load_ontopic(
    path: str | Path,
    *,
    poisoning_dir: str | Path | None = None,
    per_topic: int | None = None,
    seed: int = 0,
) -> OnTopicData:
    """Load one ``ontopic/*.json`` file.

    ``poisoning_dir`` (e.g. ``../shared/data/poisoning/hotpotqa``) attaches the shared
    attack texts to the questions that are poisoning targets. ``per_topic`` keeps at most
    that many questions per topic (a seeded sample: SQuAD's Super Bowl 50 alone has 810).
    """
    path = Path(path)
    data = _read(path)
    name = "hotpotqa" if "hotpot" in path.name.lower() else "squad"
    passages = tuple(
        Passage(id=str(p["id"]), text=str(p["text"]), title=str(p.get("title", "")))
        for p in data["passages"]
    )
    titles = sorted({str(q.get("title", "")) for q in data["questions"]})
    dev_titles = set(titles[0::2])
    attacks = _attack_texts(Path(poisoning_dir) if poisoning_dir else None)
    cases: list[QACase] = []
    for q in data["questions"]:
        if name == "hotpotqa":
            split = "test" if q.get("in_poisoning_targets") else "dev"
            topic = str(q["id"])
        else:
            topic = str(q.get("title", ""))
            split = "dev" if topic in dev_titles else "test"
        target, texts = attacks.get(str(q["id"]), ("", {}))
        cases.append(
            QACase(
                id=str(q["id"]),
                question=str(q["question"]),
                answers=tuple(str(a) for a in q["answers"]),
                gold_ids=tuple(str(g) for g in q["gold_passage_ids"]),
                topic=topic,
                split=split,
                target_answer=target,
                attack_texts=texts,
            )
        )
    if per_topic is not None:
        cases = _sample_per_topic(cases, per_topic, seed)
    return OnTopicData(name, passages, tuple(cases))


def _sample_per_topic(cases: Sequence[QACase], n: int, seed: int) -> list[QACase]:
    rng = np.random.default_rng(seed)
    by_topic: dict[str, list[QACase]] = {}
    for c in cases:
        by_topic.setdefault(c.topic, []).append(c)
    out: list[QACase] = []
    for topic in sorted(by_topic):
        group = by_topic[topic]
        pick = sorted(rng.permutation(len(group))[:n].tolist())
        out.extend(group[i] for i in pick)
    return out
