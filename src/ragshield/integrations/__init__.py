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

import importlib
from typing import TYPE_CHECKING, Any

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

_CORE = "ragshield.integrations._core"
_LAZY = {
    "MissingExtraError": _CORE,
    "Shield": _CORE,
    "ShieldResult": _CORE,
    "Verdict": _CORE,
    "RagshieldCompressor": "ragshield.integrations.langchain",
    "RagshieldRunnable": "ragshield.integrations.langchain",
    "RagshieldEmbeddings": "ragshield.integrations.langchain",
    "RagshieldNodePostprocessor": "ragshield.integrations.llamaindex",
    "RagshieldEmbedding": "ragshield.integrations.llamaindex",
    "RagshieldDocumentFilter": "ragshield.integrations.haystack",
    "RagshieldTextEmbedder": "ragshield.integrations.haystack",
    "RagshieldDocumentEmbedder": "ragshield.integrations.haystack",
}

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


def __getattr__(name: str) -> Any:
    """Import an adapter only when its class is first named (a missing framework then raises
    :class:`MissingExtraError` naming the extra to install)."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ragshield.integrations' has no attribute {name!r}")
