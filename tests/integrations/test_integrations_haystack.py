"""Haystack adapter: filter component, embedders, serialisation, a real poisoned pipeline."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import numpy as np
import pytest

pytest.importorskip("haystack")

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore
from test_integrations_core import (
    ADAPTER_TEXTS,
    POISON_DEFENSE,
    direct_kept,
    load_poisoned_case,
    network_guard,
    run_python,
)

from fakes import KEYWORD_REMOVED, HashEncoder, KeywordFilter, SentenceTrimFilter
from ragshield.errors import InputError
from ragshield.integrations.haystack import (
    RagshieldDocumentEmbedder,
    RagshieldDocumentFilter,
    RagshieldTextEmbedder,
)


def _docs(with_vectors: bool = False) -> list[Document]:
    return [
        Document(
            content=t,
            id=f"d{i}",
            meta={"src": i},
            score=1.0 - i / 10,
            embedding=np.eye(16)[i].tolist() if with_vectors else None,
        )
        for i, t in enumerate(ADAPTER_TEXTS)
    ]


class TestDocumentFilter:
    def test_init(self) -> None:
        f = RagshieldDocumentFilter()
        assert f.defense == "ragdefender" and f.encoder is None and f.metadata_key == "ragshield"

    def test_keeps_documents_and_meta(self) -> None:
        docs = _docs()
        out = RagshieldDocumentFilter(KeywordFilter(), encoder=HashEncoder()).run("q", docs)
        assert [d.id for d in out["documents"]] == ["d0", "d2"]
        assert [d.id for d in out["removed_documents"]] == ["d1"]
        kept, removed = out["documents"][0], out["removed_documents"][0]
        assert kept is not docs[0] and kept.score == docs[0].score and kept.meta["src"] == 0
        assert kept.meta["ragshield"]["reason"] == "kept"
        assert removed.meta["ragshield"] == KEYWORD_REMOVED
        assert all("ragshield" not in d.meta for d in docs)

    def test_sentence_level_rewrite(self) -> None:
        docs = _docs(with_vectors=True)
        f = RagshieldDocumentFilter(
            SentenceTrimFilter(), encoder=HashEncoder(), embeddings_model_name="hash-16"
        )
        doc = f.run("q", docs)["documents"][2]
        assert doc.id == "d2" and "IGNORE" not in (doc.content or "")
        assert doc.embedding is None
        assert doc.meta["ragshield"]["original_text"] == docs[2].content
        assert "IGNORE" in (docs[2].content or "") and docs[2].embedding is not None

    def test_reuses_vectors(self) -> None:
        enc = HashEncoder()
        f = RagshieldDocumentFilter(KeywordFilter(), encoder=enc, embeddings_model_name="hash-16")
        f.run("q", _docs(with_vectors=True), query_embedding=[1.0] * 16)
        assert enc.calls == []

    def test_content_free_document_passes(self) -> None:
        f = RagshieldDocumentFilter(KeywordFilter(), encoder=HashEncoder())
        out = f.run("q", [Document(content=None, id="blob"), *_docs()])
        assert out["documents"][0].meta["ragshield"]["reason"] == "no text to check"

    def test_bad_input(self) -> None:
        f = RagshieldDocumentFilter(KeywordFilter(), encoder=HashEncoder())
        with pytest.raises(InputError, match="list of Haystack Documents"):
            f.run("q", ["text"])  # type: ignore[list-item]

    def test_async(self) -> None:
        f = RagshieldDocumentFilter(KeywordFilter(), encoder=HashEncoder())
        out = asyncio.run(f.run_async("q", _docs()))
        assert [d.id for d in out["documents"]] == ["d0", "d2"]

    def test_roundtrip(self) -> None:
        f = RagshieldDocumentFilter(
            "ragdefender,ecosaferag", encoder="all-MiniLM-L6-v2", embeddings_model_name="m"
        )
        data = f.to_dict()
        assert data["init_parameters"] == {
            "defense": "ragdefender,ecosaferag",
            "encoder": "all-MiniLM-L6-v2",
            "embeddings_model_name": "m",
            "metadata_key": "ragshield",
        }
        g = RagshieldDocumentFilter.from_dict(data)
        assert g.defense == f.defense and g.embeddings_model_name == "m"
        with pytest.raises(InputError, match="pass the defense by name"):
            RagshieldDocumentFilter(KeywordFilter()).to_dict()
        with pytest.raises(InputError, match="encoder as a local model path"):
            RagshieldDocumentFilter("ragdefender", encoder=HashEncoder()).to_dict()

    def test_pipeline_roundtrip(self) -> None:
        pipe = Pipeline()
        pipe.add_component("shield", RagshieldDocumentFilter(["similarity-threshold"]))
        pipe.add_component("embedder", RagshieldTextEmbedder())
        again = Pipeline.loads(pipe.dumps(), allowed_modules=["ragshield.integrations.haystack"])
        shield = again.get_component("shield")
        assert isinstance(shield, RagshieldDocumentFilter)
        assert shield.defense == ["similarity-threshold"]


def test_embedders() -> None:
    text = RagshieldTextEmbedder(HashEncoder()).run("a b")
    assert len(text["embedding"]) == 16 and text["meta"] == {"model": "hash-16"}
    docs = _docs()
    out = RagshieldDocumentEmbedder(HashEncoder()).run(docs)
    assert all(len(d.embedding or []) == 16 for d in out["documents"])
    assert docs[0].embedding is None
    with pytest.raises(InputError, match="use RagshieldDocumentEmbedder"):
        RagshieldTextEmbedder(HashEncoder()).run(["a"])  # type: ignore[arg-type]
    again = asyncio.run(RagshieldTextEmbedder(HashEncoder()).run_async("a b"))
    assert again["embedding"] == text["embedding"]


@pytest.mark.parametrize(
    ("env", "first", "expected"),
    [
        (None, "haystack", "None"),  # Haystack imported before the adapter: switched off
        ("True", "haystack", "Telemetry"),  # an explicit opt-in is respected
    ],
)
def test_telemetry_off_unless_chosen(env: str | None, first: str, expected: str) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "HAYSTACK_TELEMETRY_ENABLED"}
    if env is not None:
        environ["HAYSTACK_TELEMETRY_ENABLED"] = env
    code = (
        f"import {first}\n"
        "import ragshield.integrations.haystack\n"
        "from haystack.telemetry import _telemetry\n"
        "print(type(_telemetry.telemetry).__name__ if _telemetry.telemetry else 'None')"
    )
    res = run_python(code, env=environ)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == expected


def _pipeline(store: Any, encoder: Any, model: str) -> Pipeline:
    template = [
        ChatMessage.from_user(
            "Context:\n{% for d in documents %}{{ d.content }}\n{% endfor %}\nQuestion: {{ query }}"
        )
    ]
    pipe = Pipeline()
    pipe.add_component("embedder", RagshieldTextEmbedder(encoder))
    pipe.add_component(
        "retriever", InMemoryEmbeddingRetriever(store, top_k=10, return_embedding=True)
    )
    pipe.add_component(
        "shield", RagshieldDocumentFilter(POISON_DEFENSE, encoder, embeddings_model_name=model)
    )
    pipe.add_component("prompt", ChatPromptBuilder(template, required_variables="*"))
    pipe.add_component("llm", MockChatGenerator())  # echoes the prompt it receives
    pipe.connect("embedder.embedding", "retriever.query_embedding")
    pipe.connect("embedder.embedding", "shield.query_embedding")
    pipe.connect("retriever.documents", "shield.documents")
    pipe.connect("shield.documents", "prompt.documents")
    pipe.connect("prompt.prompt", "llm.messages")
    return pipe


@pytest.mark.slow
def test_poisoned_question_pipeline(shared_data, encoder) -> None:  # type: ignore[no-untyped-def]
    """A real Haystack pipeline (in-memory store, embedding retriever, prompt builder, mock
    chat generator) over an NQ PoisonedRAG question: the adversarial documents are removed
    before the generator, the golden one reaches it, and the removed ones are in the result."""
    case = load_poisoned_case(shared_data)
    with network_guard() as attempts:
        embedder = RagshieldDocumentEmbedder(encoder)
        store = InMemoryDocumentStore()
        store.write_documents(
            embedder.run([Document(content=t, id=i) for i, t in case.corpus])["documents"]
        )
        pipe = _pipeline(store, encoder, embedder.model_name)
        inputs = {
            "embedder": {"text": case.question},
            "shield": {"query": case.question},
            "prompt": {"query": case.question},
        }
        result = pipe.run(inputs)
        async_result = asyncio.run(pipe.run_async(inputs))
    assert attempts == []
    retriever = InMemoryEmbeddingRetriever(store, top_k=10)
    retrieved = [
        d.content or ""
        for d in retriever.run(encoder.encode([case.question])[0].tolist())["documents"]
    ]
    assert case.golden in retrieved and set(case.adversarial) <= set(retrieved)
    for res in (result, async_result):
        sent = res["llm"]["replies"][0].text
        assert case.golden in sent
        assert not any(a in sent for a in case.adversarial)
        removed = res["shield"]["removed_documents"]
        assert {d.id for d in removed} >= {f"adv-{i}" for i in range(5)}
        assert all(d.meta["ragshield"]["suspicion"] is not None for d in removed)
    kept = set(retrieved) - {d.content for d in result["shield"]["removed_documents"]}
    direct = direct_kept(POISON_DEFENSE, encoder, case, retrieved)
    assert kept == {retrieved[i] for i in direct}
