"""Encoder, extractive generator and the end-to-end pipeline on the shipped demo corpus."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragshield.corpus import read_corpus
from ragshield.defenses.compose import FilterChain
from ragshield.demo import demo_files
from ragshield.errors import InputError, ModelNotFoundError
from ragshield.generate.extractive import ExtractiveGenerator
from ragshield.generate.prompt import build_messages, build_prompt
from ragshield.indexing import build_index, open_index
from ragshield.pipeline import RAGPipeline
from ragshield.store.faiss_store import FaissStore
from ragshield.types import FilterResult, RetrievedPassage


@pytest.fixture(scope="module")
def demo_store(encoder, tmp_path_factory: pytest.TempPathFactory) -> FaissStore:  # type: ignore[no-untyped-def]
    corpus, _ = demo_files()
    return build_index(
        read_corpus(corpus), tmp_path_factory.mktemp("idx") / "demo", encoder=encoder
    )


def test_encoder_contract(encoder) -> None:  # type: ignore[no-untyped-def]
    v = encoder.encode(["a cat", "a dog", "a cat"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(v[0], v[2])
    assert encoder.encode([]).shape == (0, 384)
    with pytest.raises(InputError, match="bare string"):
        encoder.encode("a cat")


def test_encoder_cache_hits(encoder, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    encoder.encode(["cached sentence"])
    calls: list[int] = []
    real = encoder.model_.encode
    monkeypatch.setattr(
        encoder.model_, "encode", lambda t, **k: calls.append(len(t)) or real(t, **k)
    )
    encoder.encode(["cached sentence", "new sentence"])
    assert calls == [1]


def test_missing_model_path() -> None:
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    with pytest.raises(ModelNotFoundError, match="does not exist"):
        SentenceTransformerEncoder("/no/such/model")


def test_answer_demo_question(encoder, demo_store: FaissStore) -> None:  # type: ignore[no-untyped-def]
    rag = RAGPipeline(encoder, demo_store)
    ans = rag.answer("Who discovered penicillin?", k=3)
    assert "Fleming" in ans.text
    assert ans.passages[0].id == "penicillin"
    assert ans.prompt_tokens > 20
    assert {"retrieve", "filter", "generate", "total"} <= set(ans.timings)


class _DropFirst:
    """A unit-test filter: removes the top-ranked passage."""

    name = "drop-first"

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        return FilterResult(self.name, tuple(retrieved[1:]), tuple(retrieved[:1]))


def test_filters_run_in_order(encoder, demo_store: FaissStore) -> None:  # type: ignore[no-untyped-def]
    rag = RAGPipeline(encoder, demo_store, [_DropFirst(), _DropFirst()], context_k=2)
    ans = rag.answer("Who discovered penicillin?", k=5)
    assert [fr.name for fr in ans.filter_results] == ["drop-first", "drop-first"]
    assert len(ans.passages) == 2
    assert "penicillin" not in [r.id for r in ans.passages]
    chain = FilterChain([_DropFirst()])
    res = chain.filter("q", ans.retrieved)
    assert len(res.kept) == 4 and res.details["stages"][0].name == "drop-first"


@pytest.mark.parametrize(
    ("question", "k", "match"),
    [("", 5, "empty"), ("   ", 5, "empty"), ("q", 31, "at most"), ("q", 0, ">= 1")],
)
def test_pipeline_bad_input(
    encoder, demo_store: FaissStore, question: str, k: int, match: str
) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=match):
        RAGPipeline(encoder, demo_store).answer(question, k=k)


def test_dimension_mismatch(encoder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="dimension"):
        RAGPipeline(encoder, FaissStore(16))


def test_open_index_roundtrip(encoder, demo_store: FaissStore, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    demo_store.save(tmp_path / "i")
    store, enc = open_index(tmp_path / "i")
    assert len(store) == 30 and enc.name == "all-MiniLM-L6-v2"


def test_extractive_generator_lexical_and_empty() -> None:
    gen = ExtractiveGenerator()
    out = gen.generate(
        "When was Linux first released?",
        ["Cats purr. Linux was first released in 1991.", "What is Linux?"],
    )
    assert out.text == "Linux was first released in 1991."
    assert gen.generate("anything", []).text == "I don't know"
    assert out.prompt_tokens == gen.count_tokens(
        build_prompt(
            "When was Linux first released?",
            ["Cats purr. Linux was first released in 1991.", "What is Linux?"],
        )
    )


def test_prompt_format() -> None:
    p = build_prompt("Q?", ["c1", "c2"])
    assert "Context:\n[1] c1\n[2] c2" in p and p.endswith("Question: Q?\n\nAnswer:")
    msgs = build_messages("Q?", ["c1"])
    assert [m["role"] for m in msgs] == ["system", "user"]


def test_token_count_is_not_padded() -> None:
    gen = ExtractiveGenerator()
    assert gen.count_tokens("one two") < 10
    assert gen.count_tokens("word " * 300) >= 300
