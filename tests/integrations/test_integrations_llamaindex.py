"""LlamaIndex adapter: node postprocessor, embedding, and a real poisoned query engine."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.llms import MockLLM
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode
from test_integrations_core import (
    ADAPTER_TEXTS,
    POISON_DEFENSE,
    direct_kept,
    load_poisoned_case,
    network_guard,
)

from fakes import HashEncoder, KeywordFilter, SentenceTrimFilter
from ragshield.errors import InputError
from ragshield.integrations.llamaindex import (
    RagshieldEmbedding,
    RagshieldFilterEvent,
    RagshieldNodePostprocessor,
)


class EventRecorder(BaseEventHandler):
    """Instrumentation handler keeping ragshield's events (test-only)."""

    events: ClassVar[list[RagshieldFilterEvent]] = []

    @classmethod
    def class_name(cls) -> str:
        return "EventRecorder"

    def handle(self, event: Any, **kwargs: Any) -> None:
        if isinstance(event, RagshieldFilterEvent):
            self.events.append(event)


@pytest.fixture(scope="module")
def recorder() -> EventRecorder:
    rec = EventRecorder()
    get_dispatcher().add_event_handler(rec)
    return rec


def _nodes(with_vectors: bool = False) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(
                text=t,
                id_=f"n{i}",
                metadata={"src": i},
                embedding=np.eye(16)[i].tolist() if with_vectors else None,
            ),
            score=1.0 - i / 10,
        )
        for i, t in enumerate(ADAPTER_TEXTS)
    ]


class TestPostprocessor:
    def test_init(self) -> None:
        p = RagshieldNodePostprocessor()
        assert p.defense == "ragdefender" and p.metadata_key == "ragshield"
        assert RagshieldNodePostprocessor("ecosaferag").defense == "ecosaferag"
        assert p.class_name() == "RagshieldNodePostprocessor"

    def test_keeps_nodes_and_metadata(self, recorder: EventRecorder) -> None:
        nodes = _nodes()
        p = RagshieldNodePostprocessor(KeywordFilter(), encoder=HashEncoder())
        out = p.postprocess_nodes(nodes, query_str="Where is the tower?")
        assert [n.node.node_id for n in out] == ["n0", "n2"]
        assert [n.score for n in out] == [1.0, 0.8]
        kept = out[0].node
        assert kept is not nodes[0].node and kept.metadata["src"] == 0
        assert kept.metadata["ragshield"]["kept"] is True
        # the verdict never reaches the LLM or the embedder
        assert "ragshield" not in kept.get_content(metadata_mode=MetadataMode.LLM)
        assert "ragshield" not in kept.get_content(metadata_mode=MetadataMode.EMBED)
        assert "src" in kept.get_content(metadata_mode=MetadataMode.LLM)
        assert all("ragshield" not in n.node.metadata for n in nodes)
        assert recorder.events[-1].removed[0]["id"] == "n1"

    def test_sentence_level_rewrite(self) -> None:
        nodes = _nodes(with_vectors=True)
        p = RagshieldNodePostprocessor(
            SentenceTrimFilter(), encoder=HashEncoder(), embeddings_model_name="hash-16"
        )
        node = p.postprocess_nodes(nodes, query_str="Who?")[2].node
        assert "IGNORE" not in node.get_content() and node.embedding is None
        assert node.metadata["ragshield"]["original_text"] == nodes[2].node.get_content()
        assert "IGNORE" not in node.get_content(metadata_mode=MetadataMode.LLM)
        assert "IGNORE" in nodes[2].node.get_content() and nodes[2].node.embedding is not None

    def test_reuses_node_and_query_vectors(self) -> None:
        enc = HashEncoder()
        p = RagshieldNodePostprocessor(
            KeywordFilter(), encoder=enc, embeddings_model_name="hash-16"
        )
        p.postprocess_nodes(_nodes(with_vectors=True), QueryBundle("q", embedding=[1.0] * 16))
        assert enc.calls == []

    def test_needs_query(self) -> None:
        p = RagshieldNodePostprocessor(KeywordFilter(), encoder=HashEncoder())
        with pytest.raises(InputError, match="needs the query"):
            p.postprocess_nodes(_nodes())
        with pytest.raises(InputError, match="list of NodeWithScore"):
            p.postprocess_nodes(["x"], query_str="q")  # type: ignore[list-item]

    def test_async(self) -> None:
        p = RagshieldNodePostprocessor(KeywordFilter(), encoder=HashEncoder())
        out = asyncio.run(p.apostprocess_nodes(_nodes(), query_str="q"))
        assert [n.node.node_id for n in out] == ["n0", "n2"]


def test_embedding() -> None:
    e = RagshieldEmbedding(HashEncoder())
    assert e.model_name == "hash-16"
    assert len(e.get_text_embedding("a b")) == 16
    assert np.isclose(np.linalg.norm(e.get_query_embedding("a b")), 1.0)
    assert len(e.get_text_embedding_batch(["a", "b", "c"])) == 3
    assert asyncio.run(e.aget_query_embedding("a b")) == e.get_query_embedding("a b")


@pytest.mark.slow
def test_poisoned_question_query_engine(shared_data, encoder, recorder) -> None:  # type: ignore[no-untyped-def]
    """A real LlamaIndex query engine (VectorStoreIndex, MockLLM that echoes its prompt) over
    an NQ PoisonedRAG question: adversarial nodes never reach the LLM, the golden one does."""
    case = load_poisoned_case(shared_data)
    with network_guard() as attempts:
        embed = RagshieldEmbedding(encoder)
        index = VectorStoreIndex(
            [TextNode(text=t, id_=i) for i, t in case.corpus], embed_model=embed
        )
        post = RagshieldNodePostprocessor(
            POISON_DEFENSE, encoder=encoder, embeddings_model_name=embed.model_name
        )
        engine = index.as_query_engine(
            llm=MockLLM(), similarity_top_k=10, node_postprocessors=[post]
        )
        response = engine.query(case.question)
        async_response = asyncio.run(engine.aquery(case.question))
        retrieved = [
            n.node.get_content()
            for n in index.as_retriever(similarity_top_k=10).retrieve(case.question)
        ]
    assert attempts == []
    assert case.golden in retrieved and set(case.adversarial) <= set(retrieved)
    for resp in (response, async_response):
        sent = str(resp)  # MockLLM echoes the prompt it received
        assert case.golden in sent
        assert not any(a in sent for a in case.adversarial)
        assert "ragshield" not in sent
    removed = {r["id"] for r in recorder.events[-1].removed}
    assert removed >= {f"adv-{i}" for i in range(5)}
    kept = {n.node.get_content() for n in response.source_nodes}
    direct = direct_kept(POISON_DEFENSE, encoder, case, retrieved)
    assert kept == {retrieved[i] for i in direct}
