"""The Generator seam.

A generator receives the question and the context passages separately (not a pre-baked
prompt) because the extractive generator and RAGFort's cascade need the structure: the
former picks a sentence from the contexts, the latter scores verbatim continuation of a
retrieved chunk. LLM generators build the papers' prompt with :mod:`ragshield.generate.prompt`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ragshield.types import Generation


@runtime_checkable
class Generator(Protocol):
    name: str

    def generate(self, question: str, contexts: Sequence[str]) -> Generation: ...

    def count_tokens(self, text: str) -> int: ...
