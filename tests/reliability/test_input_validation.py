"""Issue #15 items 7 and 9: text that is not text (null, numbers, lists, lone surrogates,
invisible-only strings) and meaningless options are refused with exit 2 and one line
naming the file and line (or the argument) — never indexed as "None", never a TypeError."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragshield.errors import InputError

from .io_checks import fail_line, forbid_encoding, make_store

# (record as raw JSON — escapes like \ud800 stay escapes, as in a real file; words in the error)
BAD_RECORDS: dict[str, tuple[str, str]] = {
    "text null": ('{"id": "b", "text": null}', "'text' is null"),
    "text int": ('{"id": "b", "text": 5}', "'text' is a int"),
    "text float": ('{"id": "b", "text": 5.5}', "'text' is a float"),
    "text bool": ('{"id": "b", "text": true}', "'text' is a bool"),
    "text list": ('{"id": "b", "text": ["x"]}', "'text' is a list"),
    "text object": ('{"id": "b", "text": {"a": 1}}', "'text' is a dict"),
    "text high surrogate": ('{"id": "b", "text": "a \\ud800"}', "'text' holds a lone surrogate"),
    "text low surrogate": ('{"id": "b", "text": "\\udfff b"}', "lone surrogate (U+DFFF"),
    "text escaped byte": ('{"id": "b", "text": "caf\\udce9"}', "lone surrogate (U+DCE9"),
    "text half emoji": ('{"id": "b", "text": "smile \\ud83d"}', "lone surrogate (U+D83D"),
    "contents null": ('{"id": "b", "contents": null}', "'contents' is null"),
    "content int": ('{"id": "b", "content": 3}', "'content' is a int"),
    "title surrogate": ('{"id": "b", "title": "\\ud800", "text": "t"}', "'title' holds a lone"),
    "title int": ('{"id": "b", "title": 5, "text": "t"}', "'title' is a int"),
    "title list": ('{"id": "b", "title": ["t"], "text": "t"}', "'title' is a list"),
    "id null": ('{"id": null, "text": "t"}', "'id' (the passage id) is null"),
    "id float": ('{"id": 1.5, "text": "t"}', "'id' (the passage id) is a float"),
    "id list": ('{"id": ["b"], "text": "t"}', "'id' (the passage id) is a list"),
    "id bool": ('{"id": true, "text": "t"}', "'id' (the passage id) is a bool"),
    "id empty": ('{"id": "", "text": "t"}', "'id' (the passage id) is blank"),
    "id zero-width": ('{"id": "\\u200b", "text": "t"}', "'id' (the passage id) is blank"),
    "id surrogate": ('{"id": "\\ud800", "text": "t"}', "'id' (the passage id) holds a lone"),
    "_id null": ('{"_id": null, "text": "t"}', "'_id' (the passage id) is null"),
    "metadata value surrogate": ('{"id": "b", "text": "t", "src": "\\ud800"}', "'src' holds"),
    "metadata key surrogate": ('{"id": "b", "text": "t", "\\ud800": "x"}', "lone surrogate"),
}
# the same checks on fields named by --text-field (a question/answer knowledge base)
BAD_FIELDS = {
    "output int": ('{"input": "q?", "output": 5}', "'output' is a int"),
    "output surrogate": ('{"input": "q?", "output": "\\ud800"}', "'output' holds a lone"),
    "input list": ('{"input": ["q?"], "output": "a."}', "'input' is a list"),
}
GOOD = '{"id": "a", "text": "Paris is the capital of France."}'
GOOD_FIELDS = '{"input": "ok?", "output": "ok."}'
# case -> (bad record, words in the error, the good record before it, extra index options)
CASES: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    **{case: (bad, words, GOOD, ()) for case, (bad, words) in BAD_RECORDS.items()},
    **{
        case: (bad, words, GOOD_FIELDS, ("--text-field", "input,output"))
        for case, (bad, words) in BAD_FIELDS.items()
    },
}


def _corpus(tmp_path: Path, fmt: str, bad: str, good: str = GOOD) -> tuple[Path, str]:
    """A two-record corpus whose second record is ``bad``; returns (file, location)."""
    if fmt == "jsonl":
        f = tmp_path / "c.jsonl"
        f.write_text(f"{good}\n{bad}\n", encoding="utf-8")
        return f, f"{f}:2"
    f = tmp_path / "c.json"
    f.write_text(f"[{good},\n {bad}]", encoding="utf-8")
    return f, f"{f}: item 1"


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_corpus_record_exits_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    fmt: str,
) -> None:
    forbid_encoding(monkeypatch)
    bad, words, good, options = CASES[case]
    f, where = _corpus(tmp_path, fmt, bad, good)
    fail_line(capsys, ["index", f, "--out", tmp_path / "out", *options], where, words)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ('{"id": 7, "text": "t"}', ("7", "", "t")),  # numeric ids are common and safe
        ('{"id": "b", "title": null, "text": "t"}', ("b", "", "t")),
        ('{"_id": "b", "id": "x", "text": "t"}', ("b", "", "t")),
        ('{"id": "b", "text": "t", "n": 3, "tags": ["x"]}', ("b", "", "t")),
    ],
)
def test_good_records_still_read(tmp_path: Path, record: str, expected: tuple[str, ...]) -> None:
    from ragshield.corpus import read_corpus

    f = tmp_path / "c.jsonl"
    f.write_text(record + "\n", encoding="utf-8")
    p = read_corpus(f)[0]
    assert (p.id, p.title, p.text) == expected


def test_null_text_field_is_skipped_not_indexed_as_none(tmp_path: Path) -> None:
    from ragshield.corpus import read_corpus

    f = tmp_path / "kb.jsonl"
    f.write_text('{"input": "q?", "output": null}\n', encoding="utf-8")
    assert read_corpus(f, text_fields=["input", "output"])[0].text == "q?"


@pytest.mark.parametrize("text", ["\\u200b", "\\u200b\\u200c\\u200d", "\\ufeff \\u2060", " \\t "])
def test_invisible_only_passages_are_blank(tmp_path: Path, text: str) -> None:
    from ragshield.corpus import read_corpus

    f = tmp_path / "c.jsonl"
    f.write_text(f'{{"id": "a", "text": "{text}"}}\n', encoding="utf-8")
    with pytest.raises(InputError, match="is empty"):
        read_corpus(f)


# ---- questions and queries --------------------------------------------------------------
BLANK_QUESTIONS = {
    "empty": "",
    "spaces": "   ",
    "tabs and newlines": "\t\n\r",
    "zero-width space": "\u200b",
    "zero-width mix": "\u200b\u200c\u200d",
    "byte-order mark": "\ufeff",
    "word joiner": "\u2060\u2060",
    "direction marks": "\u200e\u200f",
    "nbsp and zero-width": " \u00a0\u200b ",
    "NUL": "\x00",
    "control characters": "\x07\x1b",
    "ideographic space": "\u3000",
    "line separator": "\u2028",
}
SURROGATE_QUESTIONS = {
    "high surrogate": "a \ud800",
    "low surrogate": "\udfff who?",
    "undecodable argv byte": "who \udcff?",
    "half an emoji": "smile \ud83d",
}


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("q") / "idx"
    make_store(n=4).save(path)
    return path


@pytest.mark.parametrize("command", ["ask", "filter"])
@pytest.mark.parametrize(
    "case", [*BLANK_QUESTIONS, *SURROGATE_QUESTIONS], ids=lambda c: c.replace(" ", "-")
)
def test_bad_question_exits_2(
    index_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    command: str,
) -> None:
    forbid_encoding(monkeypatch)
    blank = case in BLANK_QUESTIONS
    q = BLANK_QUESTIONS[case] if blank else SURROGATE_QUESTIONS[case]
    what = "question" if command == "ask" else "query"
    words = f"The {what} is empty" if blank else f"The {what} holds a lone surrogate"
    passages = tmp_path / "p.json"
    passages.write_text(json.dumps(["Paris is in France."]), encoding="utf-8")
    argv = ["ask", index_dir, q] if command == "ask" else ["filter", q, passages]
    fail_line(capsys, argv, words)


def test_undecodable_question_bytes_from_a_real_shell(index_dir: Path) -> None:
    """Bytes that are not UTF-8 on the command line become lone surrogates in Python."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run(
        [sys.executable, "-m", "ragshield.cli", "ask", str(index_dir), b"who \xed\xa0\x80?"],
        capture_output=True,
        env=env,
        timeout=120,
    )
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 2, err
    assert "Traceback" not in err and "lone surrogate" in err


FILTER_FILES = {
    "surrogate string": ('["ok", "a \\ud800"]', "item 1: text holds a lone surrogate"),
    "null text": ('[{"text": "ok"}, {"text": null}]', "item 1: field 'text' is null"),
    "number text": ('[{"text": "ok"}, {"text": 12}]', "item 1: field 'text' is a int"),
    "number item": ('["ok", 12]', "expected a JSON object, got int"),
}


@pytest.mark.parametrize("case", list(FILTER_FILES))
def test_bad_filter_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    forbid_encoding(monkeypatch)
    f = tmp_path / "p.json"
    f.write_text(FILTER_FILES[case][0], encoding="utf-8")
    fail_line(capsys, ["filter", "capital of France", f], str(f), FILTER_FILES[case][1])


# ---- options that cannot mean anything ------------------------------------------------
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["ask", "{idx}", "q", "--context-k", "0"], "'--context-k' parameter of ask"),
        (["ask", "{idx}", "q", "--context-k", "-2"], "'--context-k' parameter of ask"),
        (["index", "{corpus}", "--out", "{tmp}/o", "--max-chars", "0"], "'--max-chars'"),
        (["index", "{corpus}", "--out", "{tmp}/o", "--max-chars", "-5"], "'--max-chars'"),
    ],
)
def test_meaningless_option_exits_2(
    index_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    words: str,
) -> None:
    forbid_encoding(monkeypatch)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(GOOD + "\n", encoding="utf-8")
    argv = [a.format(idx=index_dir, corpus=corpus, tmp=tmp_path) for a in args]
    fail_line(capsys, argv, words)
    assert not (tmp_path / "o").exists()


# ---- the shared check other modules call ------------------------------------------------
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("fine", None),
        ("café 中文 🙂", None),
        ("  padded  ", None),
        (None, "is null"),
        (3, "is a int"),
        (b"bytes", "is a bytes"),
        (["x"], "is a list"),
        ("", "is blank"),
        ("\u200b\ufeff", "is blank"),
        ("x\ud800", "lone surrogate (U+D800 at character 1)"),
        ("\udc80", "lone surrogate (U+DC80 at character 0)"),
    ],
)
def test_check_text(value: object, problem: str | None) -> None:
    from ragshield.errors import check_text, text_problem

    got = text_problem(value)
    if problem is None:
        assert got is None and check_text(value, "the text") == value
    else:
        assert got is not None and problem in got
        with pytest.raises(InputError, match=r"^the text "):
            check_text(value, "the text")
