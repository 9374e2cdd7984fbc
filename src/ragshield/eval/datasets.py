"""Loaders for the evaluation data: knowledge-corruption test sets and BEIR-style corpora.

Example::

    from pathlib import Path
    from ragshield.eval.datasets import load_poisoning

    cases = load_poisoning(Path("../shared/data/poisoning/nq"))
    print(cases[0].question, cases[0].incorrect_answer, len(cases[0].adversarial["blind"]))

Every malformed file raises :class:`~ragshield.errors.DataFormatError` naming the file (and
the line for JSON syntax errors) so a broken download is diagnosed in one line, never by a
``KeyError`` deep inside an evaluation.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragshield.errors import DataFormatError, InputError
from ragshield.types import Passage

#: The three data-backed attacks, in the order "mixed" interleaves them.
ATTACK_SOURCES: tuple[str, ...] = ("poisonedrag", "blind", "garag")


@dataclass(frozen=True)
class PoisoningCase:
    """One target question of a knowledge-corruption test set.

    ``adversarial`` maps an attack name ("poisonedrag", "blind", "garag") to its distinct
    passage texts for this question. PoisonedRAG texts are already assembled the way its
    attack code injects them (``question + "." + adv_text``). ``golden`` is the question's
    ground-truth passage; ``supporting`` holds the other ground-truth passages the attack
    files name for the same question (HotpotQA's second hop, NQ's alternative paragraphs),
    so a multi-hop evaluation can include them.
    """

    id: str
    question: str
    correct_answer: str
    incorrect_answer: str
    golden: str
    adversarial: Mapping[str, tuple[str, ...]]
    supporting: tuple[str, ...] = field(default=())


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, f"invalid JSON: {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, None, f"not UTF-8 text: {exc}") from exc


def _field(record: object, key: str, path: Path, where: str) -> str:
    if not isinstance(record, dict):
        raise DataFormatError(path, None, f"{where} must be a JSON object")
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DataFormatError(path, None, f"{where} has no non-empty string field {key!r}")
    return value


def _dedupe(texts: list[str]) -> tuple[str, ...]:
    """Distinct texts in first-seen order: identical copies would make clustering trivial."""
    return tuple(dict.fromkeys(t for t in texts if t.strip()))


def _attack_file(path: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``{query: [adversarial...]}`` and ``{query: [ground_truth...]}`` of a blind/GARAG file."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataFormatError(path, None, "expected a JSON list of {query, ground_truth, ...}")
    adv: dict[str, list[str]] = {}
    gold: dict[str, list[str]] = {}
    for i, rec in enumerate(data):
        where = f"record {i}"
        query = _field(rec, "query", path, where)
        adv.setdefault(query, []).append(_field(rec, "adversarial_document", path, where))
        truth = _field(rec, "ground_truth", path, where)
        if truth not in gold.setdefault(query, []):
            gold[query].append(truth)
    return adv, gold


def load_poisoning(dataset_dir: Path | str) -> list[PoisoningCase]:
    """Read one ``poisoning/<dataset>/`` folder (schema: ``../shared/data/README.md``).

    ``target_queries.json`` and ``poisonedrag.json`` are required; ``blind.json`` and
    ``garag.json`` are read when present. The golden passage is the ``ground_truth`` of the
    question's ``blind.json`` record, else of its first ``garag.json`` record; a question with
    neither is a format error, since no evaluation can score it.
    """
    root = Path(dataset_dir)
    if not root.is_dir():
        raise InputError(f"poisoning dataset folder {str(root)!r} does not exist.")
    tq_path = root / "target_queries.json"
    targets = _read_json(tq_path)
    if not isinstance(targets, list) or not targets:
        raise DataFormatError(tq_path, None, "expected a non-empty JSON list of target questions")
    pr_path = root / "poisonedrag.json"
    poisoned = _read_json(pr_path)
    if not isinstance(poisoned, dict):
        raise DataFormatError(pr_path, None, "expected a JSON object keyed by question id")

    sources: dict[str, tuple[dict[str, list[str]], dict[str, list[str]]]] = {}
    for name in ("blind", "garag"):
        if (root / f"{name}.json").is_file():
            sources[name] = _attack_file(root / f"{name}.json")

    cases: list[PoisoningCase] = []
    seen: set[str] = set()
    for i, rec in enumerate(targets):
        where = f"target {i}"
        qid = _field(rec, "id", tq_path, where)
        question = _field(rec, "question", tq_path, where)
        correct = _field(rec, "correct answer", tq_path, where)
        incorrect = _field(rec, "incorrect answer", tq_path, where)
        if qid in seen:
            raise DataFormatError(tq_path, None, f"duplicate question id {qid!r}")
        seen.add(qid)

        entry = poisoned.get(qid)
        if entry is None:
            raise DataFormatError(pr_path, None, f"no entry for question id {qid!r}")
        adv_texts = entry.get("adv_texts") if isinstance(entry, dict) else None
        if not isinstance(adv_texts, list) or not all(isinstance(t, str) for t in adv_texts):
            raise DataFormatError(
                pr_path, None, f"entry {qid!r} has no list of strings 'adv_texts'"
            )
        # PoisonedRAG's attack code injects `question + "." + adv_text` (data README).
        adversarial: dict[str, tuple[str, ...]] = {
            "poisonedrag": _dedupe([f"{question}.{t}" for t in adv_texts])
        }

        golds: list[str] = []
        for name, (adv, gold) in sources.items():
            adversarial[name] = _dedupe(adv.get(question, []))
            golds.extend(g for g in gold.get(question, []) if g not in golds)
        if not golds:
            raise DataFormatError(
                root,
                None,
                f"question {qid!r} has no golden passage: neither blind.json nor garag.json "
                "has a record whose 'query' equals its question text",
            )
        cases.append(
            PoisoningCase(
                id=qid,
                question=question,
                correct_answer=correct,
                incorrect_answer=incorrect,
                golden=golds[0],
                adversarial=adversarial,
                supporting=tuple(golds[1:]),
            )
        )
    return cases


def split_cases(cases: list[PoisoningCase], split: str) -> list[PoisoningCase]:
    """``"dev"`` = even positions, ``"test"`` = odd positions, ``"all"`` = everything.

    Thresholds of the improved defenses are tuned on ``dev`` only and reported on ``test``,
    so a figure never comes from the questions it was tuned on.
    """
    if split == "all":
        return list(cases)
    if split == "dev":
        return list(cases[0::2])
    if split == "test":
        return list(cases[1::2])
    raise InputError(f"split must be one of 'all', 'dev', 'test'. Got {split!r} instead.")


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    from ragshield.corpus import json_lines

    if not path.is_file():
        raise DataFormatError(path, None, "file not found")
    rows: list[dict[str, Any]] = []
    for n, obj in json_lines(path):
        if not isinstance(obj, dict):
            raise DataFormatError(path, n, "each line must be a JSON object")
        rows.append(obj)
    return rows


def load_beir(
    beir_dir: Path | str, split: str = "test"
) -> tuple[list[Passage], dict[str, str], dict[str, dict[str, int]]]:
    """Read a BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Returns ``(corpus, queries, qrels)`` with ``qrels[query_id][doc_id] = relevance``. A
    missing qrels file yields empty qrels (a corpus can be indexed without judgements).
    """
    root = Path(beir_dir)
    if not root.is_dir():
        raise InputError(f"BEIR folder {str(root)!r} does not exist.")
    corpus: list[Passage] = []
    c_path = root / "corpus.jsonl"
    for n, row in enumerate(_read_jsonl(c_path), start=1):
        pid, text = row.get("_id"), row.get("text")
        if not isinstance(pid, str) or not isinstance(text, str):
            raise DataFormatError(c_path, n, "each document needs string fields '_id' and 'text'")
        title = row.get("title") or ""
        meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        corpus.append(Passage(id=pid, text=text, title=str(title), metadata=meta or {}))

    queries: dict[str, str] = {}
    q_path = root / "queries.jsonl"
    for n, row in enumerate(_read_jsonl(q_path), start=1):
        qid, text = row.get("_id"), row.get("text")
        if not isinstance(qid, str) or not isinstance(text, str):
            raise DataFormatError(q_path, n, "each query needs string fields '_id' and 'text'")
        queries[qid] = text

    qrels: dict[str, dict[str, int]] = {}
    r_path = root / "qrels" / f"{split}.tsv"
    if r_path.is_file():
        with r_path.open(encoding="utf-8", newline="") as fh:
            for n, cols in enumerate(csv.reader(fh, delimiter="\t"), start=1):
                if not cols or (n == 1 and cols[0] in ("query-id", "query_id", "qid")):
                    continue
                if len(cols) < 3:
                    raise DataFormatError(r_path, n, "expected query-id, corpus-id, score")
                try:
                    score = int(float(cols[2]))
                except ValueError:
                    raise DataFormatError(r_path, n, f"score {cols[2]!r} is not a number") from None
                qrels.setdefault(cols[0], {})[cols[1]] = score
    return corpus, queries, qrels
