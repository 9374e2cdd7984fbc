"""Plain data that flows through a ragshield pipeline.

Every object here is a frozen dataclass so a defense can never mutate what an earlier stage
saw: a filter returns *new* passages (e.g. EcoSafeRAG's sentence-trimmed text) and the
original stays auditable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Passage:
    """One knowledge-base chunk. ``id`` is unique inside an index."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class RetrievedPassage:
    """A passage as the retriever returned it.

    ``embedding`` is the vector the store holds for the passage (L2-normalised); defenses
    reuse it instead of re-encoding, which is most of the speed gap to the authors' package.
    """

    passage: Passage
    score: float
    rank: int
    embedding: np.ndarray | None = None

    @property
    def id(self) -> str:
        return self.passage.id

    @property
    def text(self) -> str:
        return self.passage.text


@dataclass(frozen=True)
class Decision:
    """Why a filter removed (or rewrote) one passage or sentence.

    ``index`` is the position of the passage in the list the filter received, so a caller
    can map decisions back even when two passages share an id.
    """

    index: int
    passage_id: str
    reason: str
    scores: Mapping[str, float] = field(default_factory=dict)
    unit: str = "passage"  # "passage" or "sentence"
    text: str = ""


@dataclass(frozen=True)
class FilterResult:
    """What one defense did to one retrieved set.

    ``kept`` preserves input order. ``details`` carries the defense's own audit trail
    (RAGDefender: N_adv, stage-1 groups, T_top, f_i; EcoSafeRAG: thresholds, clusters).
    """

    name: str
    kept: tuple[RetrievedPassage, ...]
    removed: tuple[RetrievedPassage, ...]
    decisions: tuple[Decision, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def kept_ids(self) -> list[str]:
        return [r.id for r in self.kept]

    @property
    def removed_ids(self) -> list[str]:
        return [r.id for r in self.removed]


@dataclass(frozen=True)
class Generation:
    """A generator's output with the cost it incurred."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: Mapping[str, float] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """The end of the pipeline: text plus everything needed to audit how it was produced."""

    question: str
    text: str
    passages: tuple[RetrievedPassage, ...]
    retrieved: tuple[RetrievedPassage, ...]
    filter_results: tuple[FilterResult, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: Mapping[str, float] = field(default_factory=dict)
    #: the generator's own notes (e.g. ``{"leak": ...}`` from the canary output check)
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> tuple[RetrievedPassage, ...]:
        """Every passage the defenses kept; ``passages`` is the first ``context_k`` of them."""
        return tuple(self.filter_results[-1].kept) if self.filter_results else self.retrieved
