"""The scan's ``extraction`` setting (:mod:`ragshield.scan.extraction`): a generator that
copies its context leaks through the undefended chain, a 0.99 distance floor stops it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ragshield.defenses.registry import build_chains
from ragshield.scan.extraction import extraction_attacks, run_scan_extraction
from ragshield.scan.run import open_scan_store
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Generation


class CopyGenerator:
    """Test stand-in for an LLM that repeats its context (what extraction attacks want)."""

    name = "copy"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation("\n".join(c.replace("\n", " ") for c in contexts))

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        self.batches.append(len(requests))
        return [self.generate(q, c) for q, c in requests]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def demo_store(demo_index: Path) -> FaissStore:
    store, _encoder, _kind = open_scan_store(demo_index)  # the scan's own way in
    return store


def test_scan_extraction_a_copying_generator_leaks(encoder, demo_store: FaissStore) -> None:  # type: ignore[no-untyped-def]
    chains = build_chains(
        "none;distance-threshold", encoder, {"distance-threshold": {"threshold": 0.99}}
    )
    seen: list[tuple[str, str]] = []
    cells, notes = run_scan_extraction(
        demo_store,
        encoder,
        chains,
        generator=CopyGenerator(),
        max_queries=3,
        k=3,
        context_k=2,
        on_query=lambda c, a: seen.append((c, a)),
    )
    assert extraction_attacks(None)[0] == ["worm"] and any("rag-thief" in n for n in notes)
    by_chain = {c.chain: c for c in cells}
    assert set(by_chain) == {"none", "distance-threshold"}
    none, strict = by_chain["none"], by_chain["distance-threshold"]
    assert (
        none.attack == "worm"
        and 1 <= none.queries <= 3
        and len(seen) == sum(c.queries for c in cells)
    )
    assert none.crr > 0 and none.recovered >= 1 and none.chunks_reached >= 1  # it copies
    assert none.n_chunks == 30
    # a 0.99 cosine floor drops every passage the worm's queries reach: nothing leaks
    assert strict.crr == 0.0 and strict.chunks_reached == 0


class OneByOne:
    """The same copying generator without ``generate_many``: answered one at a time."""

    name = "copy"

    def __init__(self) -> None:
        self.inner = CopyGenerator()

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return self.inner.generate(question, contexts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def test_scan_extraction_answers_each_round_in_one_call(encoder, demo_store: FaissStore) -> None:  # type: ignore[no-untyped-def]
    """Every session's queries of a round go out in one generate_many call (RAG-Thief's
    3-query round and the worm's first query from both chains: 8 rows; then the worm's
    next rounds, 2 rows each), and the cells equal those of answering one by one."""
    chains = build_chains(
        "none;distance-threshold", encoder, {"distance-threshold": {"threshold": 0.99}}
    )
    opts = {"max_queries": 3, "k": 3, "context_k": 2}
    batched = CopyGenerator()
    cells, _ = run_scan_extraction(
        demo_store, encoder, chains, generator=batched, attacker=CopyGenerator(), **opts
    )
    assert batched.batches == [8, 2, 2]
    alone, _ = run_scan_extraction(
        demo_store, encoder, chains, generator=OneByOne(), attacker=CopyGenerator(), **opts
    )
    keep = ("chain", "attack", "crr", "recovered", "queries", "chunks_reached", "curve")
    assert [[getattr(c, f) for f in keep] for c in cells] == [
        [getattr(c, f) for f in keep] for c in alone
    ]
    assert {c.attack for c in cells} == {"rag-thief", "worm"}
