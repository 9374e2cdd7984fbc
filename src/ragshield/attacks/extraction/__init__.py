"""Black-box knowledge-base extraction attacks: RAG-Thief, the RAG worm, and RAG-Thief
adapted to the canary defense.

All three implement :class:`ragshield.attacks.base.QueryAttack` (``run(ask) -> outputs``), stop on
a query / time / round budget and keep every (query, response) pair in ``log_``.
"""

from __future__ import annotations

from ragshield.attacks.extraction.base import (
    ChunkMemory,
    ExtractionAttack,
    LoopSettings,
    parse_chunks,
)
from ragshield.attacks.extraction.canary_aware import CanaryAwareThief
from ragshield.attacks.extraction.rag_thief import RAGThief
from ragshield.attacks.extraction.worm import OneDocumentWorm, WormAttack

__all__ = [
    "CanaryAwareThief",
    "ChunkMemory",
    "ExtractionAttack",
    "LoopSettings",
    "OneDocumentWorm",
    "RAGThief",
    "WormAttack",
    "parse_chunks",
]
