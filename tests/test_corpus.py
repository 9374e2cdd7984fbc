"""Corpus reading: every supported format, and every bad input gets a precise error."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragshield.corpus import read_corpus
from ragshield.errors import DataFormatError, InputError


def test_jsonl_beir_fields(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text(
        '{"_id": "a", "title": "T", "text": "alpha"}\n\n{"id": "b", "text": "beta"}\n',
        encoding="utf-8",
    )
    ps = read_corpus(f)
    assert [(p.id, p.title, p.text) for p in ps] == [("a", "T", "alpha"), ("b", "", "beta")]


def test_beir_folder_and_text_folder(tmp_path: Path) -> None:
    beir = tmp_path / "beir"
    beir.mkdir()
    (beir / "corpus.jsonl").write_text('{"_id": "x", "text": "hello"}\n', encoding="utf-8")
    assert read_corpus(beir)[0].id == "x"
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "sub" / "a.txt").write_text("para one\nstill one\n\npara two\n", encoding="utf-8")
    ps = read_corpus(docs)
    assert [p.id for p in ps] == ["sub/a.txt#0", "sub/a.txt#1"]
    assert ps[0].text == "para one still one"


def test_json_records_with_text_fields(tmp_path: Path) -> None:
    f = tmp_path / "kb.json"
    f.write_text(json.dumps([{"input": "q?", "output": "a."}]), encoding="utf-8")
    with pytest.raises(DataFormatError, match="--text-field"):
        read_corpus(f)
    assert read_corpus(f, text_fields=["input", "output"])[0].text == "q?\na."


def test_json_list_of_strings(tmp_path: Path) -> None:
    f = tmp_path / "p.json"
    f.write_text(json.dumps(["one", " ", "two"]), encoding="utf-8")
    assert [p.text for p in read_corpus(f)] == ["one", "two"]


@pytest.mark.parametrize(
    ("name", "content", "error", "match"),
    [
        ("missing.jsonl", None, InputError, "corpus not found"),
        ("empty.jsonl", b"", InputError, "is empty"),
        ("blank.jsonl", b'{"text": "  "}\n', InputError, "is empty"),
        (
            "bad.jsonl",
            b'{"text": "ok"}\n{"text": oops}\n',
            DataFormatError,
            r"bad\.jsonl:2: malformed JSON",
        ),
        (
            "latin1.jsonl",
            b'{"text": "ok"}\n{"text": "caf\xe9"}\n',
            DataFormatError,
            r"latin1\.jsonl:2: not valid UTF-8",
        ),
        ("notobj.jsonl", b"[1, 2]\n", DataFormatError, "expected a JSON object"),
        (
            "dup.jsonl",
            b'{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n',
            DataFormatError,
            "duplicate",
        ),
        ("bad.json", b'{"a": ', DataFormatError, "malformed JSON"),
        ("corpus.csv", b"a,b\n", InputError, "unsupported corpus file"),
    ],
)
def test_bad_inputs(
    tmp_path: Path, name: str, content: bytes | None, error: type, match: str
) -> None:
    f = tmp_path / name
    if content is not None:
        f.write_bytes(content)
    with pytest.raises(error, match=match):
        read_corpus(f)


def test_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no corpus\.jsonl"):
        read_corpus(tmp_path)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash(tmp_path: Path, data: bytes) -> None:
    """Any byte string either parses or raises an InputError — never another exception."""
    f = tmp_path / "fuzz.jsonl"
    f.write_bytes(data)
    try:
        ps = read_corpus(f)
    except InputError:
        return
    assert ps and all(p.text.strip() for p in ps)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.text(alphabet=string.printable + "éß中", min_size=1, max_size=40), min_size=1, max_size=8
    )
)
def test_roundtrip_texts(tmp_path: Path, texts: list[str]) -> None:
    """Every non-blank text written as JSONL comes back unchanged and in order."""
    f = tmp_path / "rt.jsonl"
    f.write_text(
        "".join(json.dumps({"id": str(i), "text": t}) + "\n" for i, t in enumerate(texts)),
        encoding="utf-8",
    )
    expected = [t for t in texts if t.strip()]
    if not expected:
        with pytest.raises(InputError):
            read_corpus(f)
        return
    assert [p.text for p in read_corpus(f)] == expected


def test_json_lines_keeps_a_raw_line_separator_inside_a_string(tmp_path: Path) -> None:
    """The one JSONL reader splits where a text file does, not at U+2028 (str.splitlines)."""
    from ragshield.corpus import json_lines

    path = tmp_path / "q.jsonl"
    path.write_bytes('{"text": "a\u2028b"}\r\n\n{"text": "c"}\n'.encode())
    assert list(json_lines(path)) == [(1, {"text": "a\u2028b"}), (3, {"text": "c"})]
