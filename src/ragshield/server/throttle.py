"""Extraction-aware throttling: notice a key that is copying the knowledge base, then stop it.

Extraction attacks (RAG-Thief, the RAG worm) have three tells that ordinary users lack:

* **signatures** — their queries ask the system to repeat, print or continue its context
  (regexes in :data:`ragshield.server.config.DEFAULT_SIGNATURES`);
* **coverage** — one key receives a large share of the distinct chunks in the index;
* **region** — the chunks the key received form one large *connected* region: answers
  that share a chunk join, so a sweeper walking neighbouring chunks (or an agent building
  each query from the last answer) grows a single region answer after answer, while a
  user asking diverse questions leaves many small, separate ones and a user asking
  follow-ups on a few topics leaves a few regions that stop growing;
* **novelty** — almost every answer brings chunks the key has never received before,
  query after query. Off by default: a user asking diverse questions has the same
  novelty as a sweeper (issue #15 item 13; ``benchmarks/bench_throttle.py``).

* **leak** — an answer the ``canary`` defense caught copying retrieved chunks (a canary
  token, or verbatim runs from several chunks: :mod:`ragshield.defenses.canary`). The
  answer itself was already blocked; :meth:`ExtractionThrottle.report_leak` blocks the key,
  since the copy shows what the key is doing whatever its queries look like.

A signature match refuses the request and blocks the key for ``cooldown_seconds``
(``signature_action`` can make it slow-only or log-only); crossing the coverage limit
blocks the key; a region or a novelty rate above its limit slows every answer by
``slow_seconds``.
Each verdict carries a one-line reason that goes to the response, the audit log and the
``ragshield.server`` logger.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ragshield.server.config import ThrottleConfig
from ragshield.server.db import Admission, CoverageCap, Database, audit_log
from ragshield.text import fold_for_matching

log = logging.getLogger("ragshield.server")

Action = Literal["allow", "slow", "refuse"]


@dataclass(frozen=True)
class Verdict:
    """What to do with one request, and why.

    ``kind`` names the rule that fired: ``""`` (none), ``blocked``, ``signature``,
    ``coverage``, ``region``, ``novelty`` or ``leak``. ``coverage`` is the key's distinct chunks in the window
    when it was computed. ``admission`` is the audit row the request opened when it was
    charged (the service fills it in; the answer closes that row).
    """

    action: Action = "allow"
    kind: str = ""
    reason: str = ""
    delay: float = 0.0
    retry_after: float = 0.0
    coverage: int | None = None
    admission: Admission | None = None


ALLOW = Verdict()


def compile_signatures(patterns: Mapping[str, str]) -> dict[str, re.Pattern[str]]:
    return {name: re.compile(p, re.IGNORECASE) for name, p in patterns.items()}


def match_signatures(question: str, signatures: Mapping[str, re.Pattern[str]]) -> list[str]:
    """Names of the signatures the question matches (empty for an ordinary question).

    Each rule sees the question as written and as read (``text.fold_for_matching``: zero-width
    characters, soft hyphens, fullwidth and Cyrillic look-alike letters no longer hide a
    request). Signatures are a first line only: a paraphrase passes them, and the coverage
    limit is the defense (issue #27, root cause 2)."""
    seen = fold_for_matching(question)
    return [name for name, rx in signatures.items() if rx.search(question) or rx.search(seen)]


def novelty_rate(recent: Sequence[float], window: int) -> float | None:
    """Mean novelty of the last ``window`` answers, ``None`` until there are that many."""
    if len(recent) < window:
        return None
    return float(sum(recent[:window]) / window)


def largest_region(answers: Sequence[Sequence[str]]) -> int:
    """Distinct chunks in the largest set of answers linked by shared chunks.

    Each answer links its own chunks; two answers that share a chunk fall in one region.
    """
    ids: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for answer in answers:
        idx = [ids.setdefault(c, len(ids)) for c in answer]
        rows += idx[:1] * len(idx)
        cols += idx
    if not ids:
        return 0
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(ids), len(ids)))
    _, labels = connected_components(graph, directed=False)
    return int(np.bincount(labels).max())


def recent_answers(db: Database, key_id: str, n: int, since: float) -> list[list[str]]:
    """Chunk ids of the key's last ``n`` answered questions since ``since`` (newest first).

    Decoded here rather than in :class:`Database`: only the region rule needs the ids.
    """
    return [
        list(json.loads(v)) for v in db.recent_answered(audit_log.c.chunk_ids, key_id, n, since)
    ]


def coverage_cap(limit: float, min_chunks: int, n_chunks: int) -> int:
    """Distinct chunks a key may receive per window: a share of the index, with a floor."""
    return max(min_chunks, math.ceil(limit * n_chunks))


class ExtractionThrottle:
    """Per-key extraction checks against the served-chunk ledger in the database."""

    def __init__(
        self,
        config: ThrottleConfig,
        db: Database,
        n_chunks: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.db = db
        self.n_chunks = n_chunks
        self.clock = clock
        self.signatures = compile_signatures(config.signatures)

    @property
    def cap(self) -> int:
        c = self.config
        return coverage_cap(c.coverage_limit, c.coverage_min_chunks, self.n_chunks)

    def cap_check(self) -> CoverageCap | None:
        """The cap :meth:`Database.finish` enforces atomically with the ledger update.

        :meth:`check` refuses a key already at the cap before any work; this is what stops
        parallel requests that all passed that check together (issue #15 item 3).
        """
        c = self.config
        if not c.enabled:
            return None
        now = self.clock()
        reason = (
            f"this answer would take the key past {self.cap} distinct chunks in "
            f"{c.coverage_window_seconds:.0f} s ({c.coverage_limit:.1%} of {self.n_chunks})"
        )
        return CoverageCap(
            self.cap, now - c.coverage_window_seconds, now + c.cooldown_seconds, reason
        )

    def _block(self, key_id: str, kind: str, reason: str, now: float) -> Verdict:
        until = now + self.config.cooldown_seconds
        self.db.block(key_id, until, reason)
        log.warning(
            "throttle: key %s blocked for %.0f s (%s): %s",
            key_id,
            self.config.cooldown_seconds,
            kind,
            reason,
        )
        return Verdict("refuse", kind, reason, retry_after=self.config.cooldown_seconds)

    def report_leak(self, key_id: str, leak: Mapping[str, object]) -> Verdict:
        """An answer to ``key_id`` copied its chunks (``Answer.details["leak"]`` of the
        canary output check): block the key (``leak_action="refuse"``) or log it."""
        c = self.config
        if not c.enabled:
            return ALLOW
        contexts = leak.get("contexts")
        n = len(contexts) if isinstance(contexts, list | tuple) else 0
        reason = (
            f"an answer copied {n} retrieved chunk(s) ({leak.get('kind', 'leak')} output check)"
        )
        if c.leak_action == "refuse":
            return self._block(key_id, "leak", reason, self.clock())
        log.warning("throttle: key %s (log): %s", key_id, reason)
        return Verdict("allow", "leak", reason)

    def check(self, key_id: str, question: str) -> Verdict:
        """The verdict for ``key_id`` asking ``question`` now (before anything is served)."""
        c = self.config
        if not c.enabled:
            return ALLOW
        now = self.clock()
        blocked_until, why = self.db.block_state(key_id)
        if blocked_until is not None and blocked_until > now:
            return Verdict(
                "refuse",
                "blocked",
                f"key blocked for extraction-like use: {why}",
                retry_after=blocked_until - now,
            )

        hits = match_signatures(question, self.signatures)
        slow_reason = ""
        if hits:
            reason = (
                f"the question matches extraction signature(s) {', '.join(hits)} "
                "(asks to repeat, print or continue the retrieved context)"
            )
            if c.signature_action == "refuse":
                return self._block(key_id, "signature", reason, now)
            log.warning("throttle: key %s (%s): %s", key_id, c.signature_action, reason)
            if c.signature_action == "slow":
                slow_reason = reason

        since = now - c.coverage_window_seconds
        coverage = self.db.coverage(key_id, since)
        if coverage >= self.cap:
            reason = (
                f"the key has received {coverage} distinct chunks in "
                f"{c.coverage_window_seconds:.0f} s, the limit is {self.cap} "
                f"({c.coverage_limit:.1%} of {self.n_chunks})"
            )
            return self._block(key_id, "coverage", reason, now)

        if c.region_limit:
            region = largest_region(recent_answers(self.db, key_id, c.region_window, since))
            if region >= c.region_limit:
                reason = (
                    f"the key's last {c.region_window} answers cover a connected region of "
                    f"{region} chunks (limit {c.region_limit}): a sweep of neighbouring chunks"
                )
                log.warning(
                    "throttle: key %s slowed by %.1f s (region): %s",
                    key_id,
                    c.slow_seconds,
                    reason,
                )
                return Verdict("slow", "region", reason, delay=c.slow_seconds, coverage=coverage)

        rate = (
            novelty_rate(self.db.recent_novelty(key_id, c.novelty_window, since), c.novelty_window)
            if c.novelty_window
            else None
        )
        if rate is not None and rate >= c.novelty_limit:
            reason = (
                f"{rate:.0%} of the chunks in the key's last {c.novelty_window} answers were "
                f"new to it (limit {c.novelty_limit:.0%})"
            )
            log.warning(
                "throttle: key %s slowed by %.1f s (novelty): %s", key_id, c.slow_seconds, reason
            )
            return Verdict("slow", "novelty", reason, delay=c.slow_seconds, coverage=coverage)
        if slow_reason:
            return Verdict(
                "slow", "signature", slow_reason, delay=c.slow_seconds, coverage=coverage
            )
        return Verdict(coverage=coverage)
