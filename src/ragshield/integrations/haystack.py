"""Haystack adapter (``pip install "ragshield[haystack]"``, needs ``haystack-ai`` 2.x or 3.x).

Example::

    from ragshield.integrations.haystack import (
        RagshieldDocumentFilter, RagshieldTextEmbedder)

    pipe.add_component("embedder", RagshieldTextEmbedder())
    pipe.add_component("retriever", InMemoryEmbeddingRetriever(store, top_k=10,
                                                               return_embedding=True))
    pipe.add_component("shield", RagshieldDocumentFilter("ragdefender",
                                                         embeddings_model_name="all-MiniLM-L6-v2"))
    pipe.connect("embedder.embedding", "retriever.query_embedding")
    pipe.connect("retriever.documents", "shield.documents")
    pipe.connect("shield.documents", "prompt_builder.documents")
    pipe.run({"embedder": {"text": q}, "shield": {"query": q}, "prompt_builder": {"query": q}})

``documents`` holds copies of the kept :class:`~haystack.Document` objects (same id, score
and meta) with ragshield's verdict under ``meta["ragshield"]``; ``removed_documents`` holds
the removed ones, annotated the same way, so an unconnected output shows them in the
pipeline result and in Haystack's tracing. Document vectors (``return_embedding=True``) and
the ``query_embedding`` input are reused when ``embeddings_model_name`` names the ragshield
encoder's model.

Offline: Haystack sends anonymous usage events unless ``HAYSTACK_TELEMETRY_ENABLED`` is
false. Importing this module turns that telemetry off (sets the variable to ``False`` and
clears Haystack's telemetry client if Haystack was imported first) unless you set the variable
yourself: an explicit ``HAYSTACK_TELEMETRY_ENABLED=True`` is respected. Saved pipelines that
contain these components load with
``Pipeline.loads(text, allowed_modules=["ragshield.integrations.haystack"])`` (Haystack 3
only deserialises classes from trusted modules).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from functools import cached_property
from typing import Any

from ragshield.errors import InputError
from ragshield.integrations._core import (
    EncoderSpec,
    Shield,
    ShieldParams,
    _build_encoder,
    missing_extra,
)

_TELEMETRY = "HAYSTACK_TELEMETRY_ENABLED"
_TELEMETRY_CHOSEN = _TELEMETRY in os.environ
os.environ.setdefault(_TELEMETRY, "False")

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("haystack-ai", extra="haystack", framework="Haystack") from exc

if not _TELEMETRY_CHOSEN:
    # Haystack imported before this module started its usage telemetry by default; ragshield
    # runs offline, so it is switched off unless the user opted in explicitly.
    try:
        from haystack.telemetry import _telemetry

        _telemetry.telemetry = None
    except (ImportError, AttributeError):  # pragma: no cover - a Haystack without it
        pass

__all__ = ["RagshieldDocumentEmbedder", "RagshieldDocumentFilter", "RagshieldTextEmbedder"]


def _serialisable_encoder(encoder: EncoderSpec, owner: str) -> str | None:
    """Encoders serialise as their model path; objects cannot round-trip through YAML."""
    if encoder is None or isinstance(encoder, str):
        return encoder
    if isinstance(encoder, os.PathLike):
        return os.fspath(encoder)
    raise InputError(
        f"{owner} cannot be serialised with an encoder object: pass encoder as a local model "
        "path (or None for the packaged MiniLM) to save the pipeline."
    )


@component
class RagshieldDocumentFilter(ShieldParams):
    """Remove (or trim) adversarial documents between a retriever and a prompt builder.

    Parameters: see :class:`ragshield.integrations.Shield`. A defense given by name (or a
    list of names) and an encoder given as a path make the component serialisable.
    """

    @cached_property
    def _shield(self) -> Shield:
        """The framework-neutral core, built on first use from the four parameters."""
        return Shield.of(self)

    def warm_up(self) -> None:
        """Build the defense and load the encoder (Haystack calls this before a run)."""
        self._shield.load()

    @component.output_types(documents=list[Document], removed_documents=list[Document])
    def run(
        self,
        query: str,
        documents: list[Document],
        query_embedding: list[float] | None = None,
    ) -> dict[str, list[Document]]:
        """Kept documents (input order) under ``documents``; removed ones, annotated, under
        ``removed_documents``."""
        if isinstance(documents, (str, bytes)) or not all(
            isinstance(d, Document) for d in documents
        ):
            raise InputError("RagshieldDocumentFilter expects a list of Haystack Documents.")
        out = self._shield.run(
            query,
            [d.content or "" for d in documents],
            [d.embedding for d in documents],
            query_vector=query_embedding,
        )
        key = self._shield.metadata_key
        kept: list[Document] = []
        removed: list[Document] = []
        for v in out.verdicts:
            doc = documents[v.index]
            meta = {**doc.meta, key: v.to_metadata()}
            if v.rewritten:
                kept.append(replace(doc, content=v.text, meta=meta, embedding=None))
            else:
                (kept if v.kept else removed).append(replace(doc, meta=meta))
        return {"documents": kept, "removed_documents": removed}

    @component.output_types(documents=list[Document], removed_documents=list[Document])
    async def run_async(
        self,
        query: str,
        documents: list[Document],
        query_embedding: list[float] | None = None,
    ) -> dict[str, list[Document]]:
        """For ``AsyncPipeline``: the CPU-bound filter runs in a thread."""
        return await asyncio.to_thread(self.run, query, documents, query_embedding)

    def to_dict(self) -> dict[str, Any]:
        defense = self.defense
        if not isinstance(defense, str) and not (
            isinstance(defense, (list, tuple)) and all(isinstance(d, str) for d in defense)
        ):
            raise InputError(
                "RagshieldDocumentFilter cannot be serialised with a filter object: pass the "
                "defense by name (e.g. 'ragdefender,ecosaferag') to save the pipeline."
            )
        return default_to_dict(
            self,
            defense=defense if isinstance(defense, str) else list(defense),
            encoder=_serialisable_encoder(self.encoder, "RagshieldDocumentFilter"),
            embeddings_model_name=self.embeddings_model_name,
            metadata_key=self.metadata_key,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RagshieldDocumentFilter:
        return default_from_dict(cls, data)


class _EmbedderBase:
    """Shared by the two embedders: a lazily built ragshield encoder, serialised as a path."""

    def __init__(self, encoder: EncoderSpec = None) -> None:
        self.encoder = encoder
        self._encoder: Any = None

    @property
    def model_name(self) -> str:
        return str(self._built().name)

    def _built(self) -> Any:
        if self._encoder is None:
            self._encoder = _build_encoder(self.encoder)
        return self._encoder

    def warm_up(self) -> None:
        warm = getattr(self._built(), "warm_up", None)
        if callable(warm):
            warm()

    def to_dict(self) -> dict[str, Any]:
        owner = type(self).__name__
        return default_to_dict(self, encoder=_serialisable_encoder(self.encoder, owner))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        return default_from_dict(cls, data)


@component
class RagshieldTextEmbedder(_EmbedderBase):
    """Embed a query with the ragshield encoder (packaged MiniLM by default, offline)."""

    @component.output_types(embedding=list[float], meta=dict[str, Any])
    def run(self, text: str) -> dict[str, Any]:
        if not isinstance(text, str):
            raise InputError(
                f"RagshieldTextEmbedder expects a string. Got {type(text).__name__} instead; "
                "use RagshieldDocumentEmbedder for documents."
            )
        vector: list[float] = self._built().encode([text])[0].tolist()
        return {"embedding": vector, "meta": {"model": self.model_name}}

    @component.output_types(embedding=list[float], meta=dict[str, Any])
    async def run_async(self, text: str) -> dict[str, Any]:
        return await asyncio.to_thread(self.run, text)


@component
class RagshieldDocumentEmbedder(_EmbedderBase):
    """Attach ragshield-encoder vectors to documents (copies; the inputs are untouched)."""

    @component.output_types(documents=list[Document], meta=dict[str, Any])
    def run(self, documents: list[Document]) -> dict[str, Any]:
        if isinstance(documents, (str, bytes)) or not all(
            isinstance(d, Document) for d in documents
        ):
            raise InputError(
                "RagshieldDocumentEmbedder expects a list of Haystack Documents; use "
                "RagshieldTextEmbedder for a string."
            )
        vectors = self._built().encode([d.content or "" for d in documents]).tolist()
        docs = [replace(d, embedding=v) for d, v in zip(documents, vectors, strict=True)]
        return {"documents": docs, "meta": {"model": self.model_name}}

    @component.output_types(documents=list[Document], meta=dict[str, Any])
    async def run_async(self, documents: list[Document]) -> dict[str, Any]:
        return await asyncio.to_thread(self.run, documents)
