"""Issue #15 item 8 (index-time part): passages longer than ``--max-chars`` are split into
``ID#c0``, ``ID#c1`` … chunks on sentence or whitespace boundaries, so no indexed passage
can make a later ``ask`` unbounded in time and memory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line

from ragshield.corpus import MAX_CHARS, chunk_passages
from ragshield.errors import InputError
from ragshield.text import split_long
from ragshield.types import Passage

SENTENCES = "The quick brown fox jumps over the lazy dog. Is it fast? Yes! " * 50


def _words(text: str) -> list[str]:
    return text.split()


@pytest.mark.parametrize(
    ("text", "max_chars"),
    [
        (SENTENCES, 100),
        (SENTENCES, 64),
        (SENTENCES, 1000),
        ("word " * 5000, 333),  # no sentence ends: whitespace cuts
        ("x" * 10_001, 1000),  # no whitespace at all: hard cuts
        ("a" * 999 + " " + "b" * 5000, 1000),
        ("第一句。第二句！第三句？" * 300, 50),  # CJK sentence ends, no spaces
        ("line one\nline two\n" * 400, 120),
        ('He said "stop." Then left. ' * 200, 90),
        ("   leading and trailing   " * 100, 40),
    ],
)
def test_split_long_bounds_and_keeps_every_word(text: str, max_chars: int) -> None:
    pieces = split_long(text, max_chars)
    assert pieces and all(0 < len(p) <= max_chars for p in pieces)
    assert all(p == p.strip() for p in pieces)
    assert "".join(_words(" ".join(pieces))) == "".join(_words(text))  # nothing lost
    if max(map(len, _words(text))) <= max_chars // 4:  # no hard cut needed: whole words
        assert _words(" ".join(pieces)) == _words(text)


@pytest.mark.parametrize("max_chars", [60, 100, 250])
def test_split_long_cuts_at_sentence_ends_when_it_can(max_chars: int) -> None:
    pieces = split_long(SENTENCES, max_chars)
    assert all(re.search(r"[.!?]$", p) for p in pieces[:-1])


@pytest.mark.parametrize("text", ["short", "x" * 100, ""])
def test_short_text_is_one_piece(text: str) -> None:
    assert split_long(text, 100) == ([text] if text else [])


def test_multi_megabyte_passage_is_chunked() -> None:
    """A 6 MB passage (the issue's 50 MB case, scaled) splits into bounded chunks, in order."""
    sentence = "Sentence number {} talks about a topic at some length, as real text does. "
    text = "".join(sentence.format(i) for i in range(80_000))
    assert len(text) > 6_000_000
    chunks = chunk_passages([Passage("big", text, "Title", {"src": "x"})])
    assert len(chunks) >= len(text) // MAX_CHARS
    assert all(len(c.text) <= MAX_CHARS for c in chunks)
    assert [c.id for c in chunks] == [f"big#c{i}" for i in range(len(chunks))]
    assert chunks[0].text.startswith("Sentence number 0 ")
    assert chunks[-1].text.endswith(
        "Sentence number 79999 talks about a topic at some length, as real text does."
    )
    assert all(c.text.endswith(".") for c in chunks)
    assert chunks[3].title == "Title" and chunks[3].metadata == {
        "src": "x",
        "chunk_of": "big",
        "chunk": 3,
    }


def test_short_passages_untouched_and_order_kept() -> None:
    ps = [Passage("a", "short"), Passage("b", "y. " * 100), Passage("c", "also short")]
    out = chunk_passages(ps, 50)
    assert out[0] is ps[0] and out[-1] is ps[-1]
    assert [p.id for p in out[1:-1]] == [f"b#c{i}" for i in range(len(out) - 2)]


def test_chunk_id_clash_is_an_error() -> None:
    with pytest.raises(InputError, match="duplicate passage ids after splitting"):
        chunk_passages([Passage("b", "y. " * 100), Passage("b#c0", "clash")], 50)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True])
def test_bad_max_chars(bad: object) -> None:
    with pytest.raises(InputError, match="max_chars"):
        chunk_passages([Passage("a", "t")], bad)  # type: ignore[arg-type]


def test_cli_index_max_chars(tmp_path: Path) -> None:
    """The real command: a long passage becomes chunks in the saved index, short ones stay."""
    from ragshield.cli import run
    from ragshield.defenses.canary import codes_in, strip_canaries
    from ragshield.store.faiss_store import FaissStore

    corpus = tmp_path / "c.jsonl"
    long_text = " ".join(f"Fact {i} is a short sentence." for i in range(40))
    corpus.write_text(
        json.dumps({"id": "long", "text": long_text})
        + "\n"
        + json.dumps({"id": "short", "text": "Paris is the capital of France."})
        + "\n",
        encoding="utf-8",
    )
    out = str(tmp_path / "idx")
    assert run(["index", str(corpus), "--out", out, "--max-chars", "200", "--canaries"]) == 0
    store = FaissStore.load(tmp_path / "idx")
    ids = [p.id for p in store.passages]
    assert ids[-1] == "short" and ids[0] == "long#c0" and len(ids) > 5
    assert all(len(p.text) <= 200 for p in store.passages)  # the canary's characters count
    assert all(codes_in(p.text) for p in store.passages)  # --canaries: every chunk marked
    plain = [strip_canaries(p.text) for p in store.passages[:-1]]
    assert " ".join(plain) == long_text


@pytest.mark.parametrize("value", ["0", "1000001", "1" + "0" * 30])
def test_cli_index_max_chars_out_of_range_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """A chunk size above what a defense accepts (``InputLimits.max_passage_chars``) would
    build an index whose long passages are refused at every question: refused at once,
    before encoding and before ``--out`` exists."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "Paris."}) + "\n", encoding="utf-8")
    argv = ["index", corpus, "--out", tmp_path / "idx", "--max-chars", value]
    fail_line(capsys, argv, "--max-chars", "[1, 1000000]")
    assert not (tmp_path / "idx").exists()
