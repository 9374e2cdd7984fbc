"""LangChain adapter: compressor, LCEL runnable, embeddings, and a real poisoned pipeline."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from test_integrations_core import (
    ADAPTER_TEXTS,
    POISON_DEFENSE,
    direct_kept,
    load_poisoned_case,
    network_guard,
)

from fakes import HashEncoder, KeywordFilter, SentenceTrimFilter
from ragshield.errors import InputError
from ragshield.integrations.langchain import (
    EVENT_NAME,
    RagshieldCompressor,
    RagshieldEmbeddings,
    RagshieldRunnable,
)


class Recorder(BaseCallbackHandler):
    """Callback handler that keeps every LLM prompt and every ragshield event."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.events: list[dict[str, Any]] = []

    def on_llm_start(self, serialized: Any, prompts: list[str], **kwargs: Any) -> None:
        self.prompts.extend(prompts)

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == EVENT_NAME:
            self.events.append(data)


def _docs() -> list[Document]:
    docs = [
        Document(page_content=t, id=i, metadata={"src": src})
        for t, i, src in zip(ADAPTER_TEXTS, ("a", "b", "c"), ("w", "x", "y"), strict=True)
    ]
    docs[2].metadata["vec"] = [0.0] * 16
    return docs


def _format(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


class TestCompressor:
    def test_init(self) -> None:
        c = RagshieldCompressor()
        assert c.defense == "ragdefender" and c.encoder is None
        assert c.metadata_key == "ragshield" and c.embedding_key is None
        assert RagshieldCompressor("ecosaferag").defense == "ecosaferag"

    def test_keeps_documents_and_metadata(self) -> None:
        docs = _docs()
        c = RagshieldCompressor(KeywordFilter(), encoder=HashEncoder())
        out = list(c.compress_documents(docs, "Where is the tower?"))
        assert [d.id for d in out] == ["a", "c"]
        assert out[0] is not docs[0] and type(out[0]) is Document
        assert out[0].metadata["src"] == "w" and out[0].metadata["ragshield"]["kept"] is True
        assert out[0].page_content == docs[0].page_content
        # the caller's documents are untouched
        assert all("ragshield" not in d.metadata for d in docs)

    def test_sentence_level_rewrite(self) -> None:
        docs = _docs()
        c = RagshieldCompressor(
            SentenceTrimFilter(),
            encoder=HashEncoder(),
            embedding_key="vec",
            embeddings_model_name="hash-16",
        )
        out = {d.id: d for d in c.compress_documents(docs, "Who designed it?")}
        trimmed = out["c"]
        assert "IGNORE" not in trimmed.page_content
        assert trimmed.metadata["ragshield"]["original_text"] == docs[2].page_content
        assert "vec" not in trimmed.metadata  # the stale vector is dropped with the rewrite
        assert docs[2].metadata["vec"] == [0.0] * 16

    def test_reuses_vectors_from_metadata(self) -> None:
        enc = HashEncoder()
        docs = [
            Document(page_content=t, metadata={"vec": np.eye(16)[i].tolist()})
            for i, t in enumerate(["one", "two"])
        ]
        c = RagshieldCompressor(
            KeywordFilter(), encoder=enc, embedding_key="vec", embeddings_model_name="hash-16"
        )
        c.compress_documents(docs, "q")
        assert enc.calls == [["q"]]

    @pytest.mark.parametrize(
        ("documents", "match"),
        [("a string", "list of LangChain Documents"), ([1], "item 0 is int")],
    )
    def test_bad_input(self, documents: Any, match: str) -> None:
        c = RagshieldCompressor(KeywordFilter(), encoder=HashEncoder())
        with pytest.raises(InputError, match=match):
            c.compress_documents(documents, "q")

    def test_async(self) -> None:
        c = RagshieldCompressor(KeywordFilter(), encoder=HashEncoder())
        out = asyncio.run(c.acompress_documents(_docs(), "q"))
        assert [d.id for d in out] == ["a", "c"]


class TestRunnable:
    def test_dict_in_dict_out(self) -> None:
        r = RagshieldRunnable(KeywordFilter(), encoder=HashEncoder())
        rec = Recorder()
        out = r.invoke({"question": "q", "context": _docs(), "x": 1}, {"callbacks": [rec]})
        assert [d.id for d in out["context"]] == ["a", "c"] and out["x"] == 1
        assert [e["removed"][0]["id"] for e in rec.events] == ["b"]

    def test_async_and_event(self) -> None:
        c = RagshieldCompressor(KeywordFilter(), encoder=HashEncoder())
        r = c.as_runnable(query_key="q", documents_key="docs")
        assert r.shield is c.shield
        rec = Recorder()
        out = asyncio.run(r.ainvoke({"q": "q", "docs": _docs()}, {"callbacks": [rec]}))
        assert [d.id for d in out["docs"]] == ["a", "c"]
        assert rec.events[0]["removed"][0]["reason"] == "contains POISON"

    def test_bad_input(self) -> None:
        r = RagshieldRunnable(KeywordFilter(), encoder=HashEncoder())
        with pytest.raises(InputError, match=r"keys 'question' and 'context' .* Got \['query'\]"):
            r.invoke({"query": "q"})


def test_embeddings() -> None:
    e = RagshieldEmbeddings(HashEncoder())
    assert e.model_name == "hash-16"
    docs = e.embed_documents(["a b", "c"])
    assert len(docs) == 2 and len(docs[0]) == 16 and isinstance(docs[0][0], float)
    assert np.isclose(np.linalg.norm(e.embed_query("a b")), 1.0)
    assert asyncio.run(e.aembed_query("a b")) == e.embed_query("a b")


@pytest.mark.slow
def test_poisoned_question_pipeline(shared_data, encoder) -> None:  # type: ignore[no-untyped-def]
    """A real LangChain RAG chain over an NQ PoisonedRAG question: the attack's passages are
    retrieved by the framework's own vector store, removed before the (fake) LLM call, and the
    golden passage reaches the prompt."""
    classic = pytest.importorskip("langchain_classic.retrievers")
    case = load_poisoned_case(shared_data)
    with network_guard() as attempts:
        embeddings = RagshieldEmbeddings(encoder)
        store = InMemoryVectorStore(embeddings)
        store.add_documents(
            [Document(page_content=t, id=i, metadata={"corpus_id": i}) for i, t in case.corpus]
        )
        retriever = store.as_retriever(search_kwargs={"k": 10})
        compressor = RagshieldCompressor(
            POISON_DEFENSE, encoder=encoder, embeddings_model_name=embeddings.model_name
        )
        safe = classic.ContextualCompressionRetriever(
            base_compressor=compressor, base_retriever=retriever
        )
        prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
        chain = (
            {"context": safe | _format, "question": RunnablePassthrough()}
            | prompt
            | FakeListLLM(responses=["an answer"])
        )
        rec = Recorder()
        assert chain.invoke(case.question, {"callbacks": [rec]}) == "an answer"

        # the same defense as an LCEL step
        lcel = (
            {"context": retriever, "question": RunnablePassthrough()}
            | compressor.as_runnable()
            | RunnableLambda(lambda x: {**x, "context": _format(x["context"])})
            | prompt
            | FakeListLLM(responses=["an answer"])
        )
        lcel.invoke(case.question, {"callbacks": [rec]})
    assert attempts == []

    retrieved = [d.page_content for d in retriever.invoke(case.question)]
    assert case.golden in retrieved and set(case.adversarial) <= set(retrieved)
    assert len(rec.prompts) == 2
    for sent in rec.prompts:
        assert case.golden in sent
        assert not any(a in sent for a in case.adversarial)
    # each event names the five removed documents, with reasons and suspicion scores
    for event in rec.events:
        assert {r["id"] for r in event["removed"]} >= {f"adv-{i}" for i in range(5)}
        assert all(r["suspicion"] is not None for r in event["removed"])
    # the adapter decides exactly what the filter decides when called directly
    kept = {d.page_content for d in safe.invoke(case.question)}
    direct = direct_kept(POISON_DEFENSE, encoder, case, retrieved)
    assert kept == {retrieved[i] for i in direct}
