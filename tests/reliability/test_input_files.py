"""Hostile input files are one line, exit 2, before any model loads (issue #27, root causes
9, 11, 12 and 14).

Non-UTF-8 configs / questions / ontopic files were ``UnicodeDecodeError`` tracebacks; ``[``
x 50,000 and a 100,000-digit number were RecursionError / ValueError tracebacks; a lone
surrogate in a scan question ran the whole scan and wrote a 0-byte report; ``eval
retrieval`` data with a passage lacking its id, passages not a list or a question without
answers were tracebacks.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line

DEEP = "[" * 50_000
HUGE = "1" * 100_000


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return path


QUESTIONS: dict[str, tuple[bytes | str, str]] = {
    "latin-1": ('{"question": "Où est né Molière ?"}\n'.encode("latin-1"), "UTF-8"),
    "deep": (DEEP + "\n", "nested too deeply"),
    "huge int": ('{"question": "q?", "x": ' + HUGE + "}\n", "malformed JSON"),
    "surrogate question": ('{"question": "caf\\ud800?"}\n', "lone surrogate"),
    "surrogate target": ('{"question": "q?", "target": "\\udc80"}\n', "lone surrogate"),
    "surrogate answer": ('{"question": "q?", "answer": ["a\\ud800"]}\n', "lone surrogate"),
}


@pytest.mark.parametrize("case", list(QUESTIONS))
def test_scan_questions_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    data, needle = QUESTIONS[case]
    q = _write(tmp_path / "q.jsonl", data)
    (tmp_path / "idx").mkdir()
    out = tmp_path / "out"
    argv = ["scan", tmp_path / "idx", "--questions", q, "--writer", "template", "--out", out]
    fail_line(capsys, argv, needle)
    assert not out.exists()  # refused before --out was created


def _ontopic(**over: object) -> str:
    data: dict[str, object] = {
        "passages": [{"id": "p1", "text": "Canberra is the capital.", "title": "Australia"}],
        "questions": [
            {"id": "q1", "question": "Capital?", "answers": ["Canberra"],
             "gold_passage_ids": ["p1"], "title": "Australia"}
        ],
    }  # fmt: skip
    data.update(over)
    return json.dumps(data)


def _without(section: str, field: str) -> str:
    data = json.loads(_ontopic())
    del data[section][0][field]
    return json.dumps(data)


ONTOPIC: dict[str, tuple[Callable[[], str | bytes], str]] = {
    "passage without id": (lambda: _without("passages", "id"), "passages[0] lacks 'id'"),
    "passage without text": (lambda: _without("passages", "text"), "lacks 'text'"),
    "passages not a list": (lambda: _ontopic(passages={"p1": "x"}), "'passages' must be a list"),
    "question without answers": (lambda: _without("questions", "answers"), "lacks 'answers'"),
    "answers a bare string": (
        lambda: _ontopic(
            questions=[{"id": "q", "question": "Q?", "answers": "Canberra", "gold_passage_ids": []}]
        ),
        "answers must be a list",
    ),
    "surrogate in text": (
        lambda: _ontopic().replace("Canberra is", "Canb\\ud800erra is"),
        "passages[0].text",
    ),
    "latin-1": (lambda: _ontopic().replace("Canberra", "Cânberra").encode("latin-1"), "UTF-8"),
    "deep": (lambda: DEEP, "nested too deeply"),
    "huge int": (lambda: '{"passages": [], "questions": [], "n": ' + HUGE + "}", "invalid JSON"),
}


@pytest.mark.parametrize("case", list(ONTOPIC))
def test_eval_retrieval_data(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    make, needle = ONTOPIC[case]
    data = _write(tmp_path / "d.json", make())
    fail_line(capsys, ["eval", "retrieval", data, "--out", tmp_path / "out"], needle)
    assert not (tmp_path / "out").exists()


CONFIGS: dict[str, tuple[str, bytes | str, str]] = {
    "toml latin-1": ("c.toml", 'index = "é"\n'.encode("latin-1"), "not valid UTF-8"),
    "yaml latin-1": ("c.yaml", "index: é\n".encode("latin-1"), "not valid UTF-8"),
    "toml deep": ("c.toml", "x = " + DEEP, "not valid TOML"),
    "yaml deep": ("c.yaml", "x: " + DEEP, "not valid YAML"),
    "toml huge int": ("c.toml", "x = " + HUGE, "not valid TOML"),
    "yaml huge int": ("c.yaml", "x: " + HUGE, "c.yaml"),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    name, data, needle = CONFIGS[case]
    cfg = _write(tmp_path / name, data)
    fail_line(capsys, ["ask", "--config", cfg, "Who?"], needle)


@pytest.mark.parametrize("body", [DEEP, '{"id": "a", "text": "t", "n": ' + HUGE + "}"])
@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_corpus_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, suffix: str
) -> None:
    corpus = _write(tmp_path / f"c{suffix}", body + "\n")
    fail_line(capsys, ["index", corpus, "--out", tmp_path / "idx"], "malformed JSON")
    assert not (tmp_path / "idx").exists()
