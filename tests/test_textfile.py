"""``ragshield.textfile``: every way a user's small text file can be wrong is one
:class:`DataFormatError` naming the file (and the line where there is one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragshield.errors import DataFormatError
from ragshield.textfile import load_json, read_utf8


def test_read_utf8_tolerates_a_bom(tmp_path: Path) -> None:
    p = tmp_path / "q.txt"
    p.write_bytes(b"\xef\xbb\xbfwho wrote it?\n")
    assert read_utf8(p) == "who wrote it?\n"


def test_read_utf8_names_the_first_bad_byte_and_its_line(tmp_path: Path) -> None:
    p = tmp_path / "q.txt"
    p.write_bytes(b"line one\nline two \xe9t\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(DataFormatError) as err:
        read_utf8(p, "questions file")
    assert err.value.line == 2
    assert "0xe9" in err.value.message and "questions file" in err.value.message


def test_read_utf8_missing_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="cannot read the config"):
        read_utf8(tmp_path / "absent.yaml", "config")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 50_000, "nested too deeply"),
        ("1" * 100_000, "invalid JSON"),  # over the interpreter's int-digits guard
        ('{"a": 1', "invalid JSON"),
    ],
)
def test_load_json_hostile_input_is_one_error(text: str, reason: str) -> None:
    with pytest.raises(DataFormatError, match=reason):
        load_json(text, "data.json")


def test_load_json_keeps_the_jsonl_line() -> None:
    with pytest.raises(DataFormatError) as err:
        load_json("{oops", "data.jsonl", line=7)
    assert str(err.value).startswith("data.jsonl:7: invalid JSON")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_load_json_never_raises_anything_but_a_format_error(text: str) -> None:
    try:
        expected = json.loads(text)
    except Exception:
        with pytest.raises(DataFormatError):
            load_json(text, "x.json")
    else:
        # compared as JSON: json.loads("NaN") is a float nan, never == itself
        assert json.dumps(load_json(text, "x.json")) == json.dumps(expected)
