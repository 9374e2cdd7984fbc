"""ASGI middleware of the service: the body limit, and what every request leaves behind.

:class:`ObserveMiddleware` wraps everything (it is added last), so it sees every status,
including a 422 from the body limit and a 500 from a bug. For each request it counts the
Prometheus metrics, writes one access-log line (logger ``ragshield.access``) and, for a
rejected request the service did not audit itself (401, 403, 422, 429 from the
authentication throttle, 500, 503), queues an audit row (issue #15 item 12).

Rejections go through :class:`AuditQueue`, one background thread writing batches in one
transaction each: a flood of bad keys then costs the database one write per batch, not
one per request, and never holds a request's worker thread. The queue is bounded; rows it
has to drop are counted in ``ragshield_audit_dropped_total``. The same thread deletes
audit rows older than ``audit.retention_days`` at start and every hour.
"""

from __future__ import annotations

import asyncio
import logging
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from fastapi.responses import JSONResponse

from ragshield.server.auth import AuthThrottled
from ragshield.server.db import AuditRecord, StorageError
from ragshield.server.proxies import TrustedProxies

if TYPE_CHECKING:
    from ragshield.server.auth import KeyManager
    from ragshield.server.service import Service

log = logging.getLogger("ragshield.server")
access_log = logging.getLogger("ragshield.access")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ENDPOINTS = {
    "/v1/ask": "ask",
    "/v1/filter": "filter",
    "/v1/chat/completions": "chat",
    "/v1/health": "health",
    "/metrics": "metrics",
}
# statuses that are a refusal worth an audit row when the service wrote none
AUDITED_REJECTIONS = frozenset({400, 401, 403, 413, 422, 429, 500, 503})
PRUNE_EVERY_SECONDS = 3600.0
#: A throttled address's shed 429 is held this many times ``auth.failure_delay_seconds``
#: (0.5 s -> 2 s), never past the end of its block: a tarpit. A flooding client that waits
#: for its answers (a connection pool, a script) then sends a quarter as many requests, each
#: of which costs the server ~0.45 ms of CPU (benchmarks/bench_server.py; issue #27 load
#: target). Holding a response costs a sleeping coroutine, no thread and no CPU.
SHED_DELAY_FACTOR = 4.0


def endpoint_of(path: str) -> str:
    return ENDPOINTS.get(path, "admin" if path.startswith("/v1/admin") else "other")


def printable(text: str) -> str:
    """``text`` with lone surrogates escaped (``\\ud800``): an error message or audit reason
    may quote a hostile id, and no UTF-8 writer (the response, the database) accepts one
    (a quarantine id with one was a 500 and killed the audit thread; #27 hostile pass)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def json_error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": printable(detail)}, status_code=status, headers=headers)


class AuditQueue:
    """Audit rows of rejected requests, written in batches by one daemon thread."""

    def __init__(
        self,
        service: Service,
        max_rows: int = 10_000,
        batch: int = 500,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service = service
        self.batch = batch
        self.clock = clock
        self._q: queue.Queue[AuditRecord | None] = queue.Queue(max_rows)
        self._idle = threading.Condition()
        self._pending = 0
        self._next_prune = 0.0
        self._thread = threading.Thread(target=self._run, name="ragshield-audit", daemon=True)
        self._thread.start()

    def put(self, rec: AuditRecord) -> None:
        with self._idle:
            self._pending += 1
        try:
            self._q.put_nowait(rec)
        except queue.Full:
            with self._idle:
                self._pending -= 1
            self.service.metrics.audit_dropped.inc()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued row is written; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def prune(self) -> int:
        """Delete audit rows past the retention period now (0 days = keep forever)."""
        days = self.service.config.audit.retention_days
        if days <= 0:
            return 0
        n = self.service.db.prune_audit(self.clock() - days * 86_400.0)
        if n:
            log.info("audit retention: deleted %d rows older than %g days", n, days)
        return n

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            if time.monotonic() >= self._next_prune:
                self._next_prune = time.monotonic() + PRUNE_EVERY_SECONDS
                try:
                    self.prune()
                except StorageError as exc:
                    log.error("audit retention: %s", exc)
            try:
                first = self._q.get(timeout=60.0)
            except queue.Empty:
                continue
            rows = [first]
            while len(rows) < self.batch:
                try:
                    rows.append(self._q.get_nowait())
                except queue.Empty:
                    break
            recs = [r for r in rows if r is not None]
            try:
                self.service.db.record_many(recs)
            except Exception as exc:
                level = log.error if isinstance(exc, StorageError) else log.exception
                level("audit: %d rejected-request rows lost: %s", len(recs), printable(str(exc)))
                self.service.metrics.audit_dropped.inc(len(recs))
            with self._idle:
                self._pending -= len(recs)
                self._idle.notify_all()
            if None in rows:
                return


class ObserveMiddleware:
    """Metrics, the access log and audit rows for rejections (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        service: Service,
        audit: AuditQueue,
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.app = app
        self.service = service
        self.audit = audit
        self.proxies = proxies or TrustedProxies()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        endpoint = endpoint_of(path)
        state: dict[str, Any] = scope.setdefault("state", {})
        status = 500
        t0 = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            status = 500
            state.setdefault("reason", "internal error")
            raise
        finally:
            seconds = time.perf_counter() - t0
            m = self.service.metrics
            m.requests.labels(endpoint, str(status)).inc()
            m.latency.labels(endpoint).observe(seconds)
            key_id = state.get("key_id") or "-"
            access_log.info(
                '%s "%s %s" %d %.1fms key=%s',
                self.proxies.client_of(scope),
                scope.get("method", "-"),
                path,
                status,
                seconds * 1000,
                key_id,
            )
            audited = state.get("audited") or state.get("admission") is not None
            if status in AUDITED_REJECTIONS and not audited:
                self.audit.put(
                    AuditRecord(
                        request_id=state.get("request_id") or "",
                        key_id=state.get("key_id") or "",
                        ts=self.service.clock(),
                        endpoint=endpoint[:20],
                        status=status,
                        outcome="rejected" if status < 500 else "error",
                        question_hash="",
                        k=None,
                        defenses=[],
                        chunk_ids=[],
                        decisions=[],
                        novelty=None,
                        coverage=None,
                        reason=printable(str(state.get("reason", "")))[:500] or None,
                        latency_ms=seconds * 1000,
                    )
                )


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with a readable 422 before anything parses them.

    Reads at most ``max_bytes + 1`` bytes whether or not ``Content-Length`` is sent (a
    chunked upload cannot sneak past), then replays the body to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout: float = 20.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        # the whole body within this many seconds, else 408 (Apache mod_reqtimeout's
        # default body=20; a slow-body client held its connection forever; issue #27)
        self.timeout = timeout

    def _too_big(self, scope: Scope, size: int | str) -> JSONResponse:
        detail = (
            f"request body is {size} bytes; this server accepts at most {self.max_bytes} "
            "(limits.max_body_bytes)."
        )
        scope.setdefault("state", {})["reason"] = detail
        return json_error(422, detail)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await json_error(422, "Content-Length is not a number.")(scope, receive, send)
                return
            if size > self.max_bytes:
                await self._too_big(scope, size)(scope, receive, send)
                return
        chunks: list[bytes] = []
        total = 0
        more = True
        try:
            async with asyncio.timeout(self.timeout):
                while more:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body = message.get("body", b"")
                    total += len(body)
                    if total > self.max_bytes:
                        too_big = self._too_big(scope, f"more than {self.max_bytes}")
                        await too_big(scope, receive, send)
                        return
                    chunks.append(body)
                    more = bool(message.get("more_body", False))
        except TimeoutError:
            detail = f"the request body did not arrive within {self.timeout:g} s."
            scope.setdefault("state", {})["reason"] = detail
            await json_error(408, detail, {"Connection": "close"})(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class AuthShedMiddleware:
    """Answer a throttled client's unverified requests with 429 before anything else runs.

    A client over ``auth.failure_limit`` gets 429 from the key manager anyway, but only
    after the request body is read, the route resolved and the auth dependency run in
    FastAPI. Here that answer costs a dictionary lookup, so 64 clients flooding bad keys
    take less of the CPU a legitimate client needs (issue #27 load target;
    ``benchmarks/bench_server.py``). A token verified recently is never shed: a valid key
    behind the same address as the flood keeps working. Same status and headers as the
    in-app answer, held longer (:data:`SHED_DELAY_FACTOR`); a shed request is counted
    (``ragshield_auth_failures{reason="throttled"}``, the access log) but writes no audit
    row — the failures that tripped the limit did.
    """

    def __init__(
        self,
        app: ASGIApp,
        keys: KeyManager,
        proxies: TrustedProxies,
        delay: float,
        on_shed: Callable[[], None] | None = None,
    ) -> None:
        self.app = app
        self.keys = keys
        self.proxies = proxies
        self.delay = delay
        self.on_shed = on_shed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith("/v1/"):
            headers = dict(scope.get("headers") or [])
            raw = headers.get(b"authorization", b"")
            token = raw[7:] if raw[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"")
            if token and not self.keys.recently_verified(token.decode("latin-1")):
                client = self.proxies.client_of(scope)
                wait = self.keys.failures.retry_after(client)
                if wait > 0:
                    if self.on_shed is not None:
                        self.on_shed()
                    await asyncio.sleep(min(self.delay * SHED_DELAY_FACTOR, max(wait, self.delay)))
                    f = self.keys.failures
                    detail = str(AuthThrottled(client, wait, f.limit, f.window))
                    # counted in the metrics and the access log, not one audit row each: a
                    # flood would otherwise be a database write per request it sends
                    scope.setdefault("state", {}).update(reason=detail, audited=True)
                    retry = {"Retry-After": str(max(1, math.ceil(wait)))}
                    await json_error(429, detail, retry)(scope, receive, send)
                    return
        await self.app(scope, receive, send)
