"""The Attack seams.

Two kinds of attacker exist in ragshield's threat model: one who writes into the corpus
(poisoning, injection, adversarial suffixes) and one who only queries the deployed system
(extraction). They get one protocol each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from ragshield.types import Answer


@runtime_checkable
class CorpusAttack(Protocol):
    """Produces adversarial passage texts for a target question and target answer."""

    name: str

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]: ...


@runtime_checkable
class QueryAttack(Protocol):
    """A black-box attacker that only calls ``ask(question) -> Answer``."""

    name: str

    def run(self, ask: Callable[[str], Answer]) -> Sequence[str]: ...
