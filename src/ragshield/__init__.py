"""ragshield: defenses for Retrieval-Augmented Generation, offline on a CPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "FaissStore",
    "FilterChain",
    "FilterResult",
    "Passage",
    "RAGPipeline",
    "RetrievedPassage",
    "SentenceTransformerEncoder",
    "__version__",
]

_LAZY = {
    "Answer": "ragshield.types",
    "Passage": "ragshield.types",
    "RetrievedPassage": "ragshield.types",
    "FilterResult": "ragshield.types",
    "FaissStore": "ragshield.store.faiss_store",
    "FilterChain": "ragshield.defenses.compose",
    "RAGPipeline": "ragshield.pipeline",
    "SentenceTransformerEncoder": "ragshield.embed.sentence_transformer",
}

if TYPE_CHECKING:
    from ragshield.defenses.compose import FilterChain
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.pipeline import RAGPipeline
    from ragshield.store.faiss_store import FaissStore
    from ragshield.types import Answer, FilterResult, Passage, RetrievedPassage


def __getattr__(name: str) -> Any:
    """Import heavy modules (faiss, torch) only when their class is first used."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ragshield' has no attribute {name!r}")
