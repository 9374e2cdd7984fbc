"""ragshield: defenses for Retrieval-Augmented Generation, offline on a CPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

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

if TYPE_CHECKING:
    from ragshield.defenses.compose import FilterChain
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.pipeline import RAGPipeline
    from ragshield.store.faiss_store import FaissStore
    from ragshield.types import Answer, FilterResult, Passage, RetrievedPassage

# lazy_loader (scientific-python SPEC 1): each name is imported from its module on first use
# (its __dir__ would hide __version__, so only __getattr__ is taken)
__getattr__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "types": ["Answer", "Passage", "RetrievedPassage", "FilterResult"],
        "store.faiss_store": ["FaissStore"],
        "defenses.compose": ["FilterChain"],
        "pipeline": ["RAGPipeline"],
        "embed.sentence_transformer": ["SentenceTransformerEncoder"],
    },
)[0]
