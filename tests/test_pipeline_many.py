"""``RAGPipeline.answer_many``: the one executor (batching, order, the one context rule).

Test-only parts: a bag-of-words hashing encoder over a real (in-memory) FAISS store, a
generator that records how it was called, and a filter that drops passages by word.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from fakes import HashEncoder
from ragshield.errors import InputError
from ragshield.eval.metrics import context_indices
from ragshield.pipeline import RAGPipeline, context_order, select_context
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Answer, FilterResult, Generation, Passage, RetrievedPassage


class RecordingGenerator:
    """Answers with the first context passage; records generate / generate_many calls."""

    name = "recording"

    def __init__(self, batched: bool = True) -> None:
        self.single: list[str] = []
        self.batches: list[list[str]] = []
        if not batched:
            self.generate_many = None  # type: ignore[assignment]

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.single.append(question)
        return Generation(text=f"{question} -> {contexts[0] if contexts else ''}")

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        self.batches.append([q for q, _ in requests])
        return [Generation(text=f"{q} -> {c[0] if c else ''}") for q, c in requests]


class DropWord:
    name = "drop-word"

    def __init__(self, word: str) -> None:
        self.word = word

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        kept = tuple(r for r in retrieved if self.word not in r.text)
        return FilterResult(self.name, kept, tuple(r for r in retrieved if r not in kept))


TEXTS = [f"passage {i} about topic {i % 3} word{i}" for i in range(12)]
QUESTIONS = [f"what about topic {i % 3} word{i}" for i in range(7)]


@pytest.fixture()
def store() -> FaissStore:
    enc = HashEncoder("hash-32", 32)
    s = FaissStore(enc.dim, encoder_name=enc.name)
    s.add([Passage(f"p{i}", t) for i, t in enumerate(TEXTS)], enc.encode(TEXTS))
    return s


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_answer_many_batches_in_order(store: FaissStore, batch_size: int) -> None:
    gen = RecordingGenerator()
    rag = RAGPipeline(HashEncoder("hash-32", 32), store, [DropWord("topic 1")], gen, context_k=2)
    seen: list[tuple[int, str, int]] = []  # (index, question, batches answered by then)
    answers = rag.answer_many(
        QUESTIONS,
        k=5,
        batch_size=batch_size,
        on_answer=lambda i, a: seen.append((i, a.question, len(gen.batches) + len(gen.single))),
    )
    assert [a.question for a in answers] == QUESTIONS
    assert [(i, q) for i, q, _ in seen] == list(enumerate(QUESTIONS))
    assert seen[0][2] == 1  # the first answers arrive before later batches are generated
    assert all(a.text.startswith(a.question) for a in answers)
    sizes = [len(b) for b in gen.batches] + [1] * len(gen.single)
    expected = [min(batch_size, len(QUESTIONS) - s) for s in range(0, len(QUESTIONS), batch_size)]
    assert sorted(sizes) == sorted(expected)  # a batch of one is a plain generate() call
    for a in answers:
        assert len(a.passages) <= 2 and all("topic 1" not in p.text for p in a.passages)
        assert {p.id for p in a.kept} >= {p.id for p in a.passages}
        assert {"retrieve", "filter", "filter.drop-word", "generate", "total"} <= set(a.timings)


def test_answer_is_a_batch_of_one(store: FaissStore) -> None:
    rag = RAGPipeline(HashEncoder("hash-32", 32), store, [], RecordingGenerator(), context_k=3)
    one = rag.answer(QUESTIONS[0], k=4)
    many = rag.answer_many(QUESTIONS, k=4)[0]

    def key(a: Answer) -> tuple[object, ...]:
        return a.text, [(p.id, p.score) for p in a.passages], [p.id for p in a.retrieved]

    assert key(one) == key(many)


def test_without_generation_and_with_given_retrieval(store: FaissStore) -> None:
    gen = RecordingGenerator(batched=False)
    rag = RAGPipeline(HashEncoder("hash-32", 32), store, [], gen, context_k=1)
    hits = rag.retrieve_many(QUESTIONS[:2], 3)
    answers = rag.answer_many(QUESTIONS[:2], retrieved=hits, generate=False)
    assert [a.text for a in answers] == ["", ""] and not gen.single and not gen.batches
    assert [[p.id for p in a.retrieved] for a in answers] == [[p.id for p in h] for h in hits]
    with pytest.raises(InputError, match="2 questions but 1 retrieval sets"):
        rag.answer_many(QUESTIONS[:2], retrieved=hits[:1])
    with pytest.raises(InputError, match="empty"):
        rag.answer_many(["ok", "  "])


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([0.1, 0.9, 0.5], 2, [1, 2]),
        ([0.5, 0.5, 0.9, 0.5], 3, [2, 0, 1]),  # ties keep retrieval order
        ([0.3, 0.2], None, [0, 1]),
        ([0.3, 0.2], 5, [0, 1]),
        ([], 5, []),
    ],
)
def test_context_order(scores: list[float], k: int | None, expected: list[int]) -> None:
    assert context_order(scores, k) == expected


def test_every_context_rule_is_the_pipelines() -> None:
    """metrics.context_indices (poisoning harness) and select_context agree on random sets
    with ties."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        scores = rng.integers(0, 4, n).astype(float) / 4  # many ties
        removed = rng.random(n) < 0.3
        k = int(rng.integers(1, 6))
        passages = [
            RetrievedPassage(Passage(f"p{i}", "t"), float(s), i) for i, s in enumerate(scores)
        ]
        kept = [p for p, r in zip(passages, removed, strict=True) if not r]
        ids = [p.passage.id for p in select_context(kept, k)]
        assert ids == [f"p{i}" for i in context_indices(scores, removed, k)]
