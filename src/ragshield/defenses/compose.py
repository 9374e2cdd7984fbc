"""Chain defenses: each sees what the previous one kept; every stage's verdict is kept."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from ragshield.defenses.base import PassageFilter, check_retrieved, warm_up
from ragshield.limits import InputLimits, check_query_size, use_limits
from ragshield.types import FilterResult, RetrievedPassage


class FilterChain:
    """Run filters in order, like llm-guard's scanner loop, timing each one.

    The chain is itself a :class:`PassageFilter`; its ``details['stages']`` holds each
    stage's own :class:`FilterResult`, so nothing a stage decided is lost.

    ``limits`` (default: the ones in force, :mod:`ragshield.limits`) bound the input of
    every stage; an input beyond them is refused before the first stage runs.
    """

    def __init__(
        self, filters: Sequence[PassageFilter], *, limits: InputLimits | None = None
    ) -> None:
        self.filters = list(filters)
        self.name = "+".join(f.name for f in self.filters) or "none"
        self.limits = limits

    def warm_up(self) -> None:
        """Warm up every stage that has heavy state (idempotent, like each stage's own)."""
        for f in self.filters:
            warm_up(f)

    def run(self, query: str, retrieved: Sequence[RetrievedPassage]) -> list[FilterResult]:
        with use_limits(self.limits):
            if isinstance(query, str):  # each stage checks the rest of the question
                check_query_size(query, "FilterChain")
            current = check_retrieved(retrieved, "FilterChain")
            results: list[FilterResult] = []
            for f in self.filters:
                t0 = time.perf_counter()
                res = f.filter(query, current)
                results.append(replace(res, seconds=time.perf_counter() - t0))
                current = list(res.kept)
            return results

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        with use_limits(self.limits):
            items = check_retrieved(retrieved, "FilterChain")
        stages = self.run(query, items)
        kept = tuple(stages[-1].kept) if stages else tuple(items)
        removed = tuple(r for s in stages for r in s.removed)
        decisions = tuple(d for s in stages for d in s.decisions)
        return FilterResult(
            name=self.name,
            kept=kept,
            removed=removed,
            decisions=decisions,
            details={"stages": stages},
            seconds=time.perf_counter() - t0,
        )
