"""Drop-in ragshield defenses for LangChain, LlamaIndex and Haystack.

Import the adapter of your framework from its own module; each needs its extra::

    from ragshield.integrations.langchain import RagshieldCompressor        # ragshield[langchain]
    from ragshield.integrations.llamaindex import RagshieldNodePostprocessor  # ragshield[llamaindex]
    from ragshield.integrations.haystack import RagshieldDocumentFilter      # ragshield[haystack]

This package imports no framework (and not even the shared core) until a name is used, so
``import ragshield`` costs nothing when the frameworks are absent. The framework-neutral
:class:`Shield` is what every adapter calls; use it to write an adapter for another framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

__all__ = [
    "MissingExtraError",
    "RagshieldCompressor",
    "RagshieldDocumentEmbedder",
    "RagshieldDocumentFilter",
    "RagshieldEmbedding",
    "RagshieldEmbeddings",
    "RagshieldNodePostprocessor",
    "RagshieldRunnable",
    "RagshieldTextEmbedder",
    "Shield",
    "ShieldResult",
    "Verdict",
]

if TYPE_CHECKING:
    from ragshield.integrations._core import MissingExtraError, Shield, ShieldResult, Verdict
    from ragshield.integrations.haystack import (
        RagshieldDocumentEmbedder,
        RagshieldDocumentFilter,
        RagshieldTextEmbedder,
    )
    from ragshield.integrations.langchain import (
        RagshieldCompressor,
        RagshieldEmbeddings,
        RagshieldRunnable,
    )
    from ragshield.integrations.llamaindex import RagshieldEmbedding, RagshieldNodePostprocessor

# lazy_loader (scientific-python SPEC 1): each name is imported from its module on first use
__getattr__, __dir__, _ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "_core": ["MissingExtraError", "Shield", "ShieldResult", "Verdict"],
        "langchain": ["RagshieldCompressor", "RagshieldRunnable", "RagshieldEmbeddings"],
        "llamaindex": ["RagshieldNodePostprocessor", "RagshieldEmbedding"],
        "haystack": [
            "RagshieldDocumentFilter",
            "RagshieldTextEmbedder",
            "RagshieldDocumentEmbedder",
        ],
    },
)
