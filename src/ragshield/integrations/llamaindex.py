"""LlamaIndex adapter (``pip install "ragshield[llamaindex]"``, needs ``llama-index-core``).

Example::

    from ragshield.integrations.llamaindex import RagshieldEmbedding, RagshieldNodePostprocessor

    embed = RagshieldEmbedding()                          # packaged MiniLM, offline
    index = VectorStoreIndex(nodes, embed_model=embed)
    engine = index.as_query_engine(
        llm=my_llm, similarity_top_k=10,
        node_postprocessors=[RagshieldNodePostprocessor(embeddings_model_name=embed.model_name)],
    )

The postprocessor returns copies of the kept nodes (same class, id, relationships and
metadata) with ragshield's verdict under ``metadata["ragshield"]``. That key is added to the
node's ``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys``: LlamaIndex
renders metadata into the prompt, and the verdict (with a trimmed node's original text) must
never reach the LLM. Removed nodes are reported by a :class:`RagshieldFilterEvent` on the
instrumentation dispatcher, so any event handler (Arize Phoenix, Langfuse, your own) sees
them. Node vectors are reused when the retriever attached them and ``embeddings_model_name``
names the ragshield encoder's model (LlamaIndex's own simple store strips them, so the text is
encoded then; the query vector of the ``QueryBundle`` is reused under the same rule).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ragshield.errors import InputError
from ragshield.integrations._core import (
    DEFAULT_DEFENSE,
    DefenseSpec,
    EncoderSpec,
    _build_encoder,
    audit_event,
    missing_extra,
)
from ragshield.integrations._pydantic import ShieldModel

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("llama-index-core", extra="llamaindex", framework="LlamaIndex") from exc

__all__ = ["RagshieldEmbedding", "RagshieldFilterEvent", "RagshieldNodePostprocessor"]

dispatcher = get_dispatcher(__name__)


class RagshieldFilterEvent(BaseEvent):
    """One postprocessor call: which nodes were kept, rewritten and removed, and why."""

    defense: str
    kept: list[str | None]
    rewritten: list[str | None]
    removed: list[dict[str, Any]]
    seconds: float

    @classmethod
    def class_name(cls) -> str:
        return "RagshieldFilterEvent"


class RagshieldNodePostprocessor(ShieldModel, BaseNodePostprocessor):
    """A :class:`BaseNodePostprocessor` that removes (or trims) adversarial nodes.

    Parameters: see :class:`ragshield.integrations.Shield`.
    """

    def __init__(self, defense: DefenseSpec = DEFAULT_DEFENSE, **kwargs: Any) -> None:
        super().__init__(defense=defense, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "RagshieldNodePostprocessor"

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        if query_bundle is None:
            raise InputError(
                "RagshieldNodePostprocessor needs the query: call postprocess_nodes(nodes, "
                "query_str=...) or use it inside a query engine."
            )
        if isinstance(nodes, (str, bytes)) or not all(isinstance(n, NodeWithScore) for n in nodes):
            raise InputError("RagshieldNodePostprocessor expects a list of NodeWithScore.")
        out = self.shield.run(
            query_bundle.query_str,
            [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes],
            [n.node.embedding for n in nodes],
            query_vector=query_bundle.embedding,
        )
        key = self.shield.metadata_key
        kept: list[NodeWithScore] = []
        for v in out.kept:
            node = nodes[v.index].node.model_copy()
            node.metadata = {**node.metadata, key: v.to_metadata()}
            node.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, key]
            node.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, key]
            if v.rewritten:
                node.set_content(v.text)
                node.embedding = None  # it described the original text
            kept.append(NodeWithScore(node=node, score=nodes[v.index].score))
        dispatcher.event(RagshieldFilterEvent(**audit_event(out, [n.node.node_id for n in nodes])))
        return kept

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        """CPU-bound filter in a thread, off the event loop (contextvars, hence the active
        instrumentation span, are copied into it)."""
        return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)


class RagshieldEmbedding(BaseEmbedding):
    """LlamaIndex :class:`BaseEmbedding` backed by a ragshield encoder (packaged MiniLM).

    ``model_name`` is the encoder's name, so ``embeddings_model_name=embed.model_name`` on the
    postprocessor states the reuse rule correctly by construction.
    """

    _encoder: Any = PrivateAttr(default=None)

    def __init__(self, encoder: EncoderSpec = None, **kwargs: Any) -> None:
        built = _build_encoder(encoder)  # resolves the model path; the model loads lazily
        super().__init__(model_name=built.name, **kwargs)
        self._encoder = built

    @classmethod
    def class_name(cls) -> str:
        return "RagshieldEmbedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        vector: list[float] = self._encoder.encode([query])[0].tolist()
        return vector

    def _get_text_embedding(self, text: str) -> list[float]:
        vector: list[float] = self._encoder.encode([text])[0].tolist()
        return vector

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._encoder.encode(texts).tolist()
        return vectors

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)
