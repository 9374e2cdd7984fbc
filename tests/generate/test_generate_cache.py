"""CachedGenerator: a rerun costs nothing, a changed setting never returns a stale answer."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.generate.cache import CachedGenerator, generator_identity
from ragshield.types import Generation

QUESTION = "Who designed the Zorblat Bridge?"
CONTEXTS = ["The Zorblat Bridge was designed by Mirena Tolst.", "Kelvora sells cheese."]


class CountingGenerator:
    """Test stand-in: answers with a call counter so a recomputation is visible."""

    def __init__(self, max_tokens: int = 64, name: str = "counting") -> None:
        self.max_tokens = max_tokens
        self.name = name
        self.calls = 0

    def cache_identity(self) -> dict[str, Any]:
        return {"kind": "counting", "max_tokens": self.max_tokens}

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls += 1
        return Generation(
            text=f"answer #{self.calls} to {question}",
            prompt_tokens=100 + len(contexts),
            completion_tokens=5,
            timings={"prefill": 1.5, "decode": 2.0},
            details={"stop": "eos", "ids": [1, 2, 3], "path": Path("/x")},
        )


class PlainGenerator:
    """A generator without cache_identity (identified by class and name)."""

    name = "plain"

    def count_tokens(self, text: str) -> int:
        return 1

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation(text="plain")


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


class TestCachedGenerator:
    def test_second_call_is_read_back(self, tmp_path):
        inner = CountingGenerator()
        gen = CachedGenerator(inner, tmp_path)
        first = gen.generate(QUESTION, CONTEXTS)
        second = gen.generate(QUESTION, CONTEXTS)
        assert inner.calls == 1 and (gen.hits, gen.misses) == (1, 1)
        assert first.details["cache"] == "miss" and second.details["cache"] == "hit"
        assert second.text == first.text == f"answer #1 to {QUESTION}"
        # The stored cost is the real model's, so token/latency reports stay meaningful.
        assert (second.prompt_tokens, second.completion_tokens) == (102, 5)
        assert second.timings == {"prefill": 1.5, "decode": 2.0}
        assert second.details["ids"] == [1, 2, 3] and second.details["path"] == "/x"

    def test_a_rerun_in_a_new_process_costs_nothing(self, tmp_path):
        CachedGenerator(CountingGenerator(), tmp_path).generate(QUESTION, CONTEXTS)
        fresh_inner = CountingGenerator()
        again = CachedGenerator(fresh_inner, tmp_path).generate(QUESTION, CONTEXTS)
        assert fresh_inner.calls == 0 and again.text == f"answer #1 to {QUESTION}"

    @pytest.mark.parametrize(
        ("question", "contexts", "inner"),
        [
            ("Who built it?", CONTEXTS, CountingGenerator()),
            (QUESTION, CONTEXTS[:1], CountingGenerator()),
            (QUESTION, list(reversed(CONTEXTS)), CountingGenerator()),  # order is the prompt
            (QUESTION, CONTEXTS, CountingGenerator(max_tokens=8)),  # a decoding setting
        ],
    )
    def test_any_change_is_a_miss(self, tmp_path, question, contexts, inner):
        CachedGenerator(CountingGenerator(), tmp_path).generate(QUESTION, CONTEXTS)
        out = CachedGenerator(inner, tmp_path).generate(question, contexts)
        assert inner.calls == 1 and out.details["cache"] == "miss"

    def test_one_json_file_per_answer_and_no_temp_files(self, tmp_path):
        gen = CachedGenerator(CountingGenerator(), tmp_path)
        gen.generate(QUESTION, CONTEXTS)
        gen.generate("Another question?", CONTEXTS)
        files = _files(tmp_path)
        assert len(files) == 2 and all(f.suffix == ".json" for f in files)
        record = json.loads(files[0].read_text())
        assert record["key"] == files[0].stem and files[0].parent.name == record["key"][:2]
        assert record["request"]["generator"] == {"kind": "counting", "max_tokens": 64}
        assert record["request"]["messages"][1]["role"] == "user"

    def test_corrupt_entry_is_recomputed_and_repaired(self, tmp_path):
        inner = CountingGenerator()
        gen = CachedGenerator(inner, tmp_path)
        gen.generate(QUESTION, CONTEXTS)
        (entry,) = _files(tmp_path)
        entry.write_text('{"truncated": ')  # e.g. a disk-full write by another tool
        out = gen.generate(QUESTION, CONTEXTS)
        assert inner.calls == 2 and out.text == f"answer #2 to {QUESTION}"
        assert json.loads(entry.read_text())["generation"]["text"] == out.text

    def test_concurrent_writers_leave_a_valid_entry(self, tmp_path):
        def work() -> None:
            CachedGenerator(CountingGenerator(), tmp_path).generate(QUESTION, CONTEXTS)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        (entry,) = _files(tmp_path)
        assert json.loads(entry.read_text())["generation"]["text"].startswith("answer #1")

    def test_generator_without_identity_uses_class_and_name(self, tmp_path):
        ident = generator_identity(PlainGenerator())
        assert ident == {"class": f"{__name__}.PlainGenerator", "name": "plain"}
        gen = CachedGenerator(PlainGenerator(), tmp_path)
        assert gen.generate(QUESTION, CONTEXTS).text == "plain"
        assert gen.generate(QUESTION, CONTEXTS).details["cache"] == "hit"

    def test_is_a_generator_and_delegates(self, tmp_path):
        gen = CachedGenerator(CountingGenerator(), tmp_path)
        assert isinstance(gen, Generator)
        assert gen.name == "counting" and gen.count_tokens("a b c") == 3
        assert gen.key(QUESTION, CONTEXTS) != gen.key(QUESTION, CONTEXTS[:1])

    def test_bad_input(self, tmp_path):
        gen = CachedGenerator(CountingGenerator(), tmp_path)
        with pytest.raises(InputError, match="bare string"):
            gen.generate(QUESTION, "one string")
        with pytest.raises(InputError, match="question is empty"):
            gen.generate("", CONTEXTS)
        assert _files(tmp_path) == []


class TestInMemory:
    """No folder: answers live in the wrapper (the evaluation harnesses' per-run cache)."""

    def test_answers_once_without_touching_disk(self, tmp_path, monkeypatch):
        monkeypatch.chdir(tmp_path)
        inner = CountingGenerator()
        gen = CachedGenerator(inner)
        first = gen.generate(QUESTION, CONTEXTS)
        second = gen.generate(QUESTION, tuple(CONTEXTS))  # a tuple is the same contexts
        other = gen.generate(QUESTION, CONTEXTS[:1])
        assert inner.calls == 2 and (gen.hits, gen.misses) == (1, 2)
        assert second.text == first.text and other.text != first.text
        assert second.details["cache"] == "hit"
        assert not list(tmp_path.iterdir())
        assert CachedGenerator(CountingGenerator()).generate(QUESTION, CONTEXTS).text == first.text

    def test_answer_once_wraps_once(self, tmp_path):
        from ragshield.generate.cache import answer_once

        inner = CountingGenerator()
        memory = answer_once(inner)
        assert isinstance(memory, CachedGenerator) and memory.inner is inner
        assert answer_once(memory) is memory and answer_once(None) is None
        disk = CachedGenerator(inner, tmp_path)
        wrapped = answer_once(disk)  # a disk cache still gets the in-memory layer
        assert isinstance(wrapped, CachedGenerator) and wrapped.inner is disk


class ManyGenerator(CountingGenerator):
    """Also answers a list at once, recording each list (a batching generator)."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: list[int] = []

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        self.lists.append(len(requests))
        return [self.generate(q, c) for q, c in requests]


class TestGenerateMany:
    def test_hits_read_back_misses_in_one_inner_call(self, tmp_path: Path) -> None:
        inner = ManyGenerator()
        gen = CachedGenerator(inner, tmp_path)
        first = gen.generate(QUESTION, CONTEXTS)
        reqs = [(QUESTION, CONTEXTS), ("q2", []), ("q3", CONTEXTS[:1]), ("q2", [])]
        out = gen.generate_many(reqs)
        assert out[0].text == first.text and out[0].details["cache"] == "hit"
        assert [g.details["cache"] for g in out[1:]] == ["miss", "miss", "miss"]
        assert inner.lists == [2]  # the repeated miss is computed once
        assert out[3].text == out[1].text
        assert gen.lookup("q3", CONTEXTS[:1]).text == out[2].text  # type: ignore[union-attr]
        again = CachedGenerator(inner, tmp_path).generate_many(reqs)
        assert [g.details["cache"] for g in again] == ["hit"] * 4 and inner.lists == [2]

    def test_lookup_never_computes_and_plain_inner_goes_one_by_one(self) -> None:
        inner = CountingGenerator()
        gen = CachedGenerator(inner)
        assert gen.lookup(QUESTION, CONTEXTS) is None and inner.calls == 0
        out = gen.generate_many([(QUESTION, CONTEXTS), ("q2", [])])
        assert inner.calls == 2 and gen.lookup("q2", []).text == out[1].text  # type: ignore[union-attr]
        with pytest.raises(InputError):
            gen.generate_many([(QUESTION, "not a list")])  # type: ignore[list-item]
