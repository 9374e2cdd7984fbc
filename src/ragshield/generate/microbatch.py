"""Answer ``generate()`` calls made at the same time from several threads in one batch.

Example::

    from concurrent.futures import ThreadPoolExecutor
    from ragshield.generate.microbatch import BatchingGenerator

    gen = BatchingGenerator(CachedGenerator(LocalLLMGenerator("qwen2.5-0.5b")))
    with ThreadPoolExecutor(6) as pool:           # six independent sessions
        answers = list(pool.map(lambda q: gen.generate(q, ctx).text, questions))

Why: some loops cannot be batched by collecting their requests first — an extraction
attacker's next query depends on the answer to its last one. Several such sessions run
side by side (one per attack and defense chain in ``ragshield scan``) each block on one
answer at a time. This wrapper lets the first waiting thread lead: it waits ``window_s``
for the others to arrive, sends everything queued to the inner generator's
``generate_many`` (a local model decodes the rows together, on a CPU at about the cost of
one), and hands each thread its own answer. While a batch runs, new requests queue up and
form the next one, so the sessions settle into waves without any scheduling of their own.

A hand-written condition variable rather than an async framework: the callers are plain
synchronous code (the attacks' ``run(ask)`` loops), and the batch is the only thing shared.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from ragshield.generate.base import Generator
from ragshield.generate.cache import Wrapping
from ragshield.types import Generation


@dataclass
class _Pending:
    request: tuple[str, list[str]]
    session: object = None
    result: Generation | None = None
    error: BaseException | None = None
    done: bool = field(default=False)


class BatchingGenerator(Wrapping):
    """Wraps a generator; concurrent :meth:`generate` calls share ``generate_many`` calls.

    Parameters
    ----------
    inner: the generator; without a ``generate_many`` each queued call is answered alone.
    window_s: how long a leading call waits for others before its batch starts (ours:
        50 ms, far below one answer's cost of seconds).
    max_batch: most requests per batch (ours: 32, the local generator's batch width).
    """

    def __init__(self, inner: Generator, *, window_s: float = 0.05, max_batch: int = 32) -> None:
        self.inner = inner
        self.name = inner.name
        self.window_s = window_s
        self.max_batch = max_batch
        self.batches: list[int] = []  # sizes of the batches sent, for tests and reports
        self._cv = threading.Condition()
        self._queue: list[_Pending] = []
        self._leading = False

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        many = getattr(self.inner, "generate_many", None)
        if callable(many):
            out: list[Generation] = many(requests)
            return out
        return [self.inner.generate(q, c) for q, c in requests]

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return self._ask(_Pending((question, list(contexts))))

    # -- the batching loop; a subclass changes when a caller may lead and how it gathers --

    _poll_s: float | None = None  # wait timeout while another caller leads (None: notified)

    def _may_lead(self, mine: _Pending) -> bool:
        """Whether ``mine``'s caller may start a batch now (no batch is being gathered)."""
        return True

    def _gather(self, mine: _Pending) -> None:
        """Called by the leader with the lock held: wait for more requests to join."""
        deadline = time.monotonic() + self.window_s
        while len(self._queue) < self.max_batch and (left := deadline - time.monotonic()) > 0:
            self._cv.wait(left)

    def _ask(self, mine: _Pending) -> Generation:
        """Queue ``mine``; the caller that leads takes a batch from the queue and answers it
        with one ``generate_many`` call, the others wait for theirs."""
        with self._cv:
            self._queue.append(mine)
            self._cv.notify_all()
            while not mine.done:
                if self._leading or not self._may_lead(mine):
                    self._cv.wait(self._poll_s)
                    continue
                self._leading = True
                self._gather(mine)
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
                self._cv.release()
                try:
                    self._run(batch)
                finally:
                    self._cv.acquire()
                    self._leading = False
                    self._cv.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.result is not None
        return mine.result

    def _run(self, batch: list[_Pending]) -> None:
        self.batches.append(len(batch))
        try:
            results = self.generate_many([p.request for p in batch])
        except BaseException as exc:  # every waiting caller sees the error, none hangs
            for p in batch:
                p.error, p.done = exc, True
            return
        for p, r in zip(batch, results, strict=True):
            p.result, p.done = r, True


class RoundBatchingGenerator(BatchingGenerator):
    """A :class:`BatchingGenerator` for a known set of sessions: a batch starts when every
    session still running waits on an answer, so each round of theirs is one
    ``generate_many`` call.

    Why: with a time window alone, sessions whose other work differs (a defense chain that
    filters slower, the worm's collision search between its queries) drift apart and their
    answers go out in many small batches; a local model decodes rows together at about the
    cost of one, and the cache answers a request repeated inside one call once.

    A session is a label; code running for it is wrapped in :meth:`asking` (in every
    thread that asks for it), which counts its requests in flight. A session is ready when
    it has requests in flight and each of them waits here; a session between requests
    (doing its own work) is waited for, one that called :meth:`finish` is not. Once all are
    ready, ``window_s`` (ours: 20 ms) more catches a request whose thread was just starting.

    Parameters
    ----------
    inner: the generator (its ``generate_many`` answers each round).
    sessions: the labels of the sessions.
    window_s: the settling time after every session is ready.
    max_batch: most requests per call (ours: 64, more than a scan round's 33).
    """

    def __init__(
        self,
        inner: Generator,
        sessions: Sequence[object],
        *,
        window_s: float = 0.02,
        max_batch: int = 64,
    ) -> None:
        super().__init__(inner, window_s=window_s, max_batch=max_batch)
        self._flying: dict[object, int] = dict.fromkeys(sessions, 0)
        self._local = threading.local()

    @contextmanager
    def asking(self, session: object) -> Iterator[None]:
        """Code inside asks for ``session`` (one request in flight until it leaves)."""
        if session not in self._flying:
            raise KeyError(f"unknown session {session!r}")
        before = getattr(self._local, "session", None)
        self._local.session = session
        with self._cv:
            self._flying[session] += 1
        try:
            yield
        finally:
            self._local.session = before
            with self._cv:
                self._flying[session] -= 1
                self._cv.notify_all()

    def finish(self, session: object) -> None:
        """``session`` asks nothing more: rounds no longer wait for it."""
        with self._cv:
            self._flying.pop(session, None)
            self._cv.notify_all()

    def _all_ready(self) -> bool:
        """Every running session's requests in flight are all queued (an answered request
        still counts as in flight, not queued, until its ``asking`` block ends)."""
        queued: dict[object, int] = {}
        for p in self._queue:
            queued[p.session] = queued.get(p.session, 0) + 1
        return all(n > 0 and queued.get(s, 0) == n for s, n in self._flying.items())

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        session = getattr(self._local, "session", None)
        if session is None or session not in self._flying:
            session = None  # outside any session: the time window, as the base class
        return self._ask(_Pending((question, list(contexts)), session))

    _poll_s = 0.5  # woken by every change; the timeout is a safety net

    def _may_lead(self, mine: _Pending) -> bool:
        return mine.session is None or self._all_ready()

    def _gather(self, mine: _Pending) -> None:
        if mine.session is None:
            super()._gather(mine)
            return
        settle = time.monotonic() + self.window_s  # every session is ready: settle, then go
        while (left := settle - time.monotonic()) > 0:
            self._cv.wait(left)
