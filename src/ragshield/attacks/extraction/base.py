"""What every knowledge-base extraction attack shares: the budget, the log, the chunk memory.

Extraction attackers are black boxes around ``ask(question) -> Answer`` (e.g.
``RAGPipeline.answer``): they see only ``Answer.text``. Each one runs in *rounds* of queries,
turns every response into candidate chunks, keeps the new ones in a de-duplicated memory
and uses that memory to choose the next queries. The loop, the budget (queries, rounds,
seconds) and the record of every (query, response) pair live here so both attacks stop
and report the same way.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_float, check_int
from ragshield.text import normalize_answer
from ragshield.types import Answer

# Leading list markers a generator puts before each copied context: "[3]", "3.", "- ",
# "Context 2:", "Document 1 -", "Chunk #4:".
_MARKER = re.compile(
    r"^\s*(?:[-*•]\s*|\[\d+\]\s*|\(?\d+[.)]\s+|(?:context|document|chunk|passage)\s*#?\d*\s*[:.\-]\s*)+",
    re.IGNORECASE,
)
_REFUSALS = ("i don't know", "i do not know", "i cannot", "i can't", "sorry")


def parse_chunks(response: str, *, min_words: int = 8) -> list[str]:
    """Split a response into candidate knowledge-base chunks.

    One line (or blank-line separated block) is one candidate once list markers are
    stripped; candidates shorter than ``min_words`` words and refusals are dropped, since
    neither can be a copied chunk.
    """
    out: list[str] = []
    for line in response.splitlines():
        text = _MARKER.sub("", line).strip()
        if len(text.split()) < min_words:
            continue
        if text.lower().startswith(_REFUSALS) and len(text.split()) < 2 * min_words:
            continue
        out.append(text)
    return out


class ChunkMemory:
    """The attacker's long-term memory of distinct extracted chunks.

    A candidate is a duplicate when its normalised text was seen, or when its ROUGE-L F1 with
    a remembered chunk reaches ``threshold`` (RAG-Thief's overlap test). With an encoder only
    the ``neighbours`` nearest remembered chunks are compared, so adding stays fast as the
    memory grows; without one every remembered chunk is compared.
    """

    def __init__(
        self, encoder: Encoder | None = None, *, threshold: float = 0.7, neighbours: int = 8
    ) -> None:
        from rouge_score import rouge_scorer

        self.encoder = encoder
        self.threshold = threshold
        self.neighbours = neighbours
        self.items: list[str] = []
        self._keys: set[str] = set()
        self._vectors: list[np.ndarray] = []
        self._rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def vectors(self) -> np.ndarray:
        """Encoder rows of the remembered chunks (empty without an encoder)."""
        if not self._vectors:
            dim = self.encoder.dim if self.encoder is not None else 0
            return np.zeros((0, dim), dtype=np.float32)
        return np.vstack(self._vectors)

    def _overlap(self, a: str, b: str) -> float:
        return float(self._rouge.score(a, b)["rougeL"].fmeasure)

    def add(self, candidates: Sequence[str], *, exclude: Sequence[str] = ()) -> list[str]:
        """Store the candidates that are new; return them. ``exclude``: texts that must not
        count as chunks (the attacker's own query echoed back)."""
        fresh = [c for c in candidates if normalize_answer(c) not in self._keys]
        fresh = [c for c in fresh if all(self._overlap(e, c) < self.threshold for e in exclude)]
        if not fresh:
            return []
        vecs = self.encoder.encode(fresh) if self.encoder is not None else None
        added: list[str] = []
        for i, cand in enumerate(fresh):
            key = normalize_answer(cand)
            if key in self._keys:
                continue
            if vecs is not None and self._vectors:
                mem = np.vstack(self._vectors)
                sims = mem @ vecs[i]
                k = min(self.neighbours, len(sims))
                pool = np.argpartition(-sims, k - 1)[:k]
            else:
                pool = np.arange(len(self.items))
            if any(self._overlap(self.items[j], cand) >= self.threshold for j in pool):
                continue
            self.items.append(cand)
            self._keys.add(key)
            if vecs is not None:
                self._vectors.append(vecs[i])
            added.append(cand)
        return added


@dataclass(frozen=True)
class LoopSettings:
    """The loop's six parameters as one value (``loop=LoopSettings(...)``), shared by every
    attack; each is also accepted under its own name (``max_queries=200``), which is how the
    registry, the bench and the configs pass them. Why grouped: each attack re-declared
    and re-passed them, and with its own parameters a constructor took 13–14 (issue #22
    caps a public constructor at about twelve)."""

    max_queries: int | None = None
    max_seconds: float | None = None
    max_rounds: int | None = None
    min_chunk_words: int = 8
    dedup_threshold: float = 0.7
    seed: int = 0


LOOP_NAMES = tuple(f.name for f in fields(LoopSettings))


def loop_settings(
    loop: LoopSettings | Mapping[str, Any] | None, flat: Mapping[str, Any], owner: str
) -> LoopSettings:
    """``loop`` (a :class:`LoopSettings`, a table of its fields, or ``None``: the defaults)
    with the flat names in ``flat`` on top; a name that is neither is a ``TypeError``, as a
    misspelt keyword argument would be."""
    unknown = sorted(set(flat) - set(LOOP_NAMES))
    if unknown:
        near = difflib.get_close_matches(unknown[0], LOOP_NAMES, n=3)
        hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
        raise TypeError(f"{owner} has no parameter {', '.join(map(repr, unknown))}{hint}.")
    base = loop if isinstance(loop, LoopSettings) else LoopSettings(**dict(loop or {}))
    return replace(base, **flat)


class ExtractionAttack:
    """Round-based black-box extraction loop with a hard budget and a full record.

    Subclasses implement ``_start()``, ``_next_round() -> list[str]`` (an empty list ends
    the attack: nothing left to ask) and ``_observe(query, response, new_chunks)``.

    After :meth:`run`: ``log_`` holds every (query, response) pair in order, ``memory_`` the
    distinct parsed chunks, ``rounds_`` / ``seconds_`` what was spent and ``stop_reason_``
    one of ``max_queries``, ``max_seconds``, ``max_rounds``, ``exhausted``. The budget is
    checked before every query, so a run never issues more than ``max_queries`` queries;
    ``max_seconds`` can be overrun by at most the duration of one query.
    """

    name = "extraction"

    def __init__(
        self,
        *,
        encoder: Encoder | None = None,
        loop: LoopSettings | Mapping[str, Any] | None = None,
        **flat: Any,
    ) -> None:
        self.encoder = encoder
        settings = loop_settings(loop, flat, type(self).__name__)
        self.max_queries = settings.max_queries
        self.max_seconds = settings.max_seconds
        self.max_rounds = settings.max_rounds
        self.min_chunk_words = settings.min_chunk_words
        self.dedup_threshold = settings.dedup_threshold
        self.seed = settings.seed

    # ---- hooks --------------------------------------------------------------------------
    def _start(self) -> None:  # pragma: no cover - overridden
        pass

    def _next_round(self) -> list[str]:  # pragma: no cover - overridden
        return []

    def _observe(self, query: str, response: str, new_chunks: list[str]) -> None:
        pass

    # ---- shared -------------------------------------------------------------------------
    def _validate(self) -> None:
        owner = type(self).__name__
        if self.max_queries is not None:
            check_int(self.max_queries, "max_queries", owner, low=1)
        if self.max_rounds is not None:
            check_int(self.max_rounds, "max_rounds", owner, low=1)
        if self.max_seconds is not None:
            check_float(self.max_seconds, "max_seconds", owner, low=0.0, high=1e9, low_open=True)
        check_int(self.min_chunk_words, "min_chunk_words", owner, low=1)
        check_float(self.dedup_threshold, "dedup_threshold", owner, low=0.0, high=1.0)
        check_int(self.seed, "seed", owner, low=0)

    def _stop_reason(self, t0: float) -> str | None:
        if self.max_queries is not None and len(self.log_) >= self.max_queries:
            return "max_queries"
        if self.max_seconds is not None and time.perf_counter() - t0 >= self.max_seconds:
            return "max_seconds"
        return None

    def run(self, ask: Callable[[str], Answer], *, concurrency: int = 1) -> list[str]:
        """Attack through ``ask``; return every response text (all the attacker saw), as
        the attacker reads it (:meth:`decode`).

        ``concurrency`` > 1 asks a round's queries side by side (threads), then reads the
        answers in query order, so the attack's decisions are the same as one at a time:
        a round's queries are all written before any of its answers is read. What changes
        is throughput — a batching generator decodes the round together
        (:class:`~ragshield.generate.microbatch.BatchingGenerator`) — and the time budget,
        which is checked per round instead of per query.
        """
        if not callable(ask):
            raise InputError(f"{type(self).__name__}.run expects a callable ask(question).")
        check_int(concurrency, "concurrency", f"{type(self).__name__}.run", low=1)
        self._validate()
        self.log_: list[tuple[str, str]] = []
        self.memory_ = ChunkMemory(self.encoder, threshold=self.dedup_threshold)
        self.rounds_ = 0
        self.rng_ = np.random.default_rng(self.seed)
        t0 = time.perf_counter()
        self._start()
        reason: str | None = None
        while reason is None:
            if self.max_rounds is not None and self.rounds_ >= self.max_rounds:
                reason = "max_rounds"
                break
            reason = self._stop_reason(t0)
            if reason is not None:
                break
            queries = self._next_round()
            if not queries:
                reason = "exhausted"
                break
            self.rounds_ += 1
            if concurrency > 1:
                queries = queries[: self._left()]
                with ThreadPoolExecutor(min(concurrency, max(1, len(queries)))) as pool:
                    answers = list(pool.map(lambda q: self._ask(ask, q), queries))
            for i, q in enumerate(queries):
                reason = self._stop_reason(t0)
                if reason is not None:
                    break
                response = answers[i] if concurrency > 1 else self._ask(ask, q)
                self.log_.append((q, response))
                new = self.memory_.add(
                    parse_chunks(self.decode(response), min_words=self.min_chunk_words),
                    exclude=[q],
                )
                self._observe(q, response, new)
        self.stop_reason_ = reason
        self.seconds_ = time.perf_counter() - t0
        return [self.decode(r) for _, r in self.log_]

    @staticmethod
    def decode(response: str) -> str:
        """What the attacker reads in a response: an attack that asked for an encoded copy
        undoes the encoding here (the log keeps the raw text). Identity by default."""
        return response

    def _left(self) -> int:
        """Queries left in the budget (``len(self.log_)`` spent)."""
        if self.max_queries is None:
            return 1 << 30
        return max(0, self.max_queries - len(self.log_))

    @staticmethod
    def _ask(ask: Callable[[str], Answer], query: str) -> str:
        answer: Any = ask(query)
        text = getattr(answer, "text", answer)
        if not isinstance(text, str):
            raise InputError(
                f"ask() must return an Answer (or a string); got {type(answer).__name__}."
            )
        return text

    @property
    def queries_(self) -> list[str]:
        return [q for q, _ in self.log_]
