"""Read a corpus from disk into passages, failing loudly and precisely on bad files.

Accepted inputs:

* ``.jsonl`` — one JSON object per line (BEIR ``corpus.jsonl`` included);
* ``.json`` — a list of objects (or of plain strings);
* a BEIR folder (holding ``corpus.jsonl``);
* ``.txt`` / ``.md`` files, or a folder of them — one passage per blank-line paragraph.

Object records take their id from ``_id`` or ``id`` (else ``<file>:<line>``), their title from
``title`` and their text from ``text`` / ``contents`` / ``content`` unless ``text_fields``
names the fields to join (``["input", "output"]`` for ChatDoctor-style records).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ragshield.errors import (
    DataFormatError,
    InputError,
    check_int,
    is_blank,
    lone_surrogate,
    text_problem,
)
from ragshield.text import split_long
from ragshield.textfile import HOSTILE, hostile_reason, read_utf8
from ragshield.types import Passage

_TEXT_KEYS = ("text", "contents", "content")
_TEXT_SUFFIXES = (".txt", ".md")


def _field(rec: dict[str, Any], key: str, path: Path, line: int | None, *, nullable: bool) -> str:
    """``rec[key]`` as text, or a DataFormatError: a null, number or list is never turned
    into its string form ("None", "5", "['x']") and indexed as if it were a passage."""
    value = rec.get(key)
    if value is None and nullable:
        return ""
    problem = text_problem(value, allow_blank=True)
    if problem is not None:
        raise DataFormatError(path, line, f"field {key!r} {problem}")
    return str(value)


def _record_id(rec: dict[str, Any], path: Path, line: int | None, fallback: str) -> str:
    key = "_id" if "_id" in rec else "id" if "id" in rec else None
    if key is None:
        return fallback
    value = rec[key]
    if isinstance(value, int) and not isinstance(value, bool):  # numeric ids are common
        return str(value)
    problem = text_problem(value)
    if problem is not None:
        raise DataFormatError(path, line, f"field {key!r} (the passage id) {problem}")
    return str(value)


def _record_to_passage(
    rec: Any, path: Path, line: int | None, fallback_id: str, text_fields: Sequence[str] | None
) -> Passage | None:
    if not isinstance(rec, dict):
        raise DataFormatError(path, line, f"expected a JSON object, got {type(rec).__name__}")
    if text_fields:
        missing = [f for f in text_fields if f not in rec]
        if missing:
            raise DataFormatError(path, line, f"record has no field(s) {missing}")
        parts = [_field(rec, f, path, line, nullable=True) for f in text_fields]
        text = "\n".join(p for p in parts if p)
    else:
        key = next((k for k in _TEXT_KEYS if k in rec), None)
        if key is None:
            raise DataFormatError(
                path,
                line,
                f"record has none of the text fields {list(_TEXT_KEYS)} (fields: "
                f"{sorted(rec)[:8]}); pass --text-field to choose",
            )
        text = _field(rec, key, path, line, nullable=False)
    if is_blank(text):
        return None
    pid = _record_id(rec, path, line, fallback_id)
    title = _field(rec, "title", path, line, nullable=True)
    meta = {k: v for k, v in rec.items() if k not in {"_id", "id", "title", *_TEXT_KEYS}}
    meta = {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))}
    for k, v in meta.items():
        if lone_surrogate(k) is not None or (isinstance(v, str) and lone_surrogate(v) is not None):
            raise DataFormatError(path, line, f"field {k!r} holds a lone surrogate")
    return Passage(pid, text, title, meta)


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of a JSON Lines file: the package's
    one JSONL reader (corpora, scan questions, dataset files), so every file gets the same
    UTF-8 handling and the same located error. Lines end where a text file's do (``\n``,
    ``\r\n``, ``\r``), not at the other characters ``str.splitlines`` breaks on: a raw
    U+2028 inside a JSON string stays part of its line."""
    for n, line in enumerate(io.StringIO(read_utf8(path), newline=None), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(path, n, f"malformed JSON ({exc.msg})") from None
        except HOSTILE as exc:  # deep nesting, a 100,000-digit number (#27)
            raise DataFormatError(path, n, f"malformed JSON ({hostile_reason(exc)})") from None
        yield n, value


def _iter_jsonl(path: Path, text_fields: Sequence[str] | None) -> Iterator[Passage]:
    for n, rec in json_lines(path):
        p = _record_to_passage(rec, path, n, f"{path.stem}:{n}", text_fields)
        if p is not None:
            yield p


def _iter_json(path: Path, text_fields: Sequence[str] | None) -> Iterator[Passage]:
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, exc.lineno, f"malformed JSON ({exc.msg})") from None
    except HOSTILE as exc:
        raise DataFormatError(path, None, f"malformed JSON ({hostile_reason(exc)})") from None
    if isinstance(data, dict):
        data = [{"_id": k, **v} if isinstance(v, dict) else v for k, v in data.items()]
    if not isinstance(data, list):
        raise DataFormatError(path, None, "expected a list of objects")
    for i, rec in enumerate(data):
        if isinstance(rec, str):  # a plain list of texts (``ragshield filter`` input)
            problem = text_problem(rec, allow_blank=True)
            if problem is not None:
                raise DataFormatError(path, None, f"item {i}: text {problem}")
            if not is_blank(rec):
                yield Passage(str(i), rec)
            continue
        try:
            p = _record_to_passage(rec, path, None, f"{path.stem}:{i}", text_fields)
        except DataFormatError as exc:  # no line numbers in a parsed JSON list: say which item
            raise DataFormatError(path, None, f"item {i}: {exc.message}") from None
        if p is not None:
            yield p


def _iter_text(path: Path, root: Path) -> Iterator[Passage]:
    rel = path.relative_to(root).as_posix() if path != root else path.name
    paras = [p.strip() for p in read_utf8(path).replace("\r\n", "\n").split("\n\n")]
    for i, para in enumerate(p for p in paras if p):
        yield Passage(f"{rel}#{i}", " ".join(para.split()), path.stem)


def read_corpus(path: str | Path, *, text_fields: Sequence[str] | None = None) -> list[Passage]:
    """All passages of a corpus file or folder; raises InputError/DataFormatError on bad input."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"corpus not found: {path}")
    if path.is_dir():
        if path.resolve() == Path(path.resolve().anchor):  # every file of the machine
            raise InputError(f"corpus {path} is the file system's root; name a corpus folder")
        if (path / "corpus.jsonl").is_file():
            passages = list(_iter_jsonl(path / "corpus.jsonl", text_fields))
        else:
            files = sorted(p for p in path.rglob("*") if p.suffix.lower() in _TEXT_SUFFIXES)
            if not files:
                raise InputError(
                    f"corpus folder {path} holds no corpus.jsonl and no .txt/.md files"
                )
            passages = [p for f in files for p in _iter_text(f, path)]
    elif path.suffix.lower() == ".jsonl":
        passages = list(_iter_jsonl(path, text_fields))
    elif path.suffix.lower() == ".json":
        passages = list(_iter_json(path, text_fields))
    elif path.suffix.lower() in _TEXT_SUFFIXES:
        passages = list(_iter_text(path, path))
    else:
        raise InputError(
            f"unsupported corpus file {path.name}: use .jsonl, .json, .txt, .md or a folder"
        )
    if not passages:
        raise InputError(f"corpus {path} is empty: it holds no non-blank passage")
    seen: set[str] = set()
    dupes = [p.id for p in passages if p.id in seen or seen.add(p.id)]  # type: ignore[func-returns-value]
    if dupes:
        raise DataFormatError(path, None, f"duplicate passage ids, e.g. {dupes[:3]}")
    return passages


MAX_CHARS = 20_000  # ≈ 4k words: far above any retriever's input window, far below a book


def chunk_passages(passages: Sequence[Passage], max_chars: int = MAX_CHARS) -> list[Passage]:
    """Split every passage longer than ``max_chars`` characters into chunks with ids
    ``ID#c0``, ``ID#c1`` … cut on sentence or whitespace boundaries.

    Why: one 50 MB passage indexes in seconds (the encoder truncates it) but later makes
    every sentence-level defense and the generator prompt unbounded in time and memory.
    Chunks keep the title and metadata, plus ``chunk_of`` (the original id) and ``chunk``.
    """
    max_chars = check_int(max_chars, "max_chars", "chunk_passages", low=1)
    out: list[Passage] = []
    for p in passages:
        if len(p.text) <= max_chars:
            out.append(p)
            continue
        for i, piece in enumerate(split_long(p.text, max_chars)):
            meta = {**p.metadata, "chunk_of": p.id, "chunk": i}
            out.append(Passage(f"{p.id}#c{i}", piece, p.title, meta))
    if len(out) != len(passages):
        _check_unique(out, "after splitting long passages")
    return out


def _check_unique(passages: Sequence[Passage], when: str) -> None:
    seen: set[str] = set()
    dupes = [p.id for p in passages if p.id in seen or seen.add(p.id)]  # type: ignore[func-returns-value]
    if dupes:
        raise InputError(f"duplicate passage ids {when}, e.g. {dupes[:3]}")
