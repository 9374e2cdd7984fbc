"""The HTTP face of :class:`~ragshield.server.service.Service` (FastAPI).

Endpoints (OpenAPI schema at ``/openapi.json``, browsable at ``/docs``):

* ``POST /v1/ask`` — ``{question, k?, defenses?}`` → answer, ids of the passages that reached
  the generator, every defense's removals and why, throttle verdict, timings;
* ``POST /v1/filter`` — ``{query, passages[], defenses?}`` → what the chain keeps, for users
  with their own retriever;
* ``GET /v1/health``; ``GET /metrics`` (Prometheus);
* ``GET /v1/admin/keys`` and ``POST /v1/admin/keys/{key_id}/unblock`` (``admin`` scope) —
  where an operator sees which key is extracting and lets a blocked key back in.

Keys go in ``Authorization: Bearer <key>`` (or ``X-API-Key``). Errors are JSON
``{"detail": "<one line>"}``: 401 bad key, 403 missing scope, 422 bad input (malformed or
oversized body, empty question, k out of range), 429 budget or throttle (with
``Retry-After``), 503 storage down; anything else is a 500 that is logged, never a crash.

Example::

    uvicorn --factory ragshield.server.app:app_from_env   # RAGSHIELD_SERVE_CONFIG=server.toml
"""

import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from ragshield.errors import InputError
from ragshield.server.auth import ApiKey, AuthError, ScopeError
from ragshield.server.config import load_config
from ragshield.server.db import StorageError
from ragshield.server.metrics import CONTENT_TYPE
from ragshield.server.schemas import (
    AskRequest,
    AskResponse,
    ErrorResponse,
    FilterRequest,
    FilterResponse,
    HealthResponse,
    KeyUsage,
)
from ragshield.server.service import NoFilter, Refused, Service

log = logging.getLogger("ragshield.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_ENDPOINTS = {
    "/v1/ask": "ask",
    "/v1/filter": "filter",
    "/v1/health": "health",
    "/metrics": "metrics",
}

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 422, 429, 503)
}


def _json_error(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with a readable 422 before anything parses them.

    Reads at most ``max_bytes + 1`` bytes whether or not ``Content-Length`` is sent (a
    chunked upload cannot sneak past), then replays the body to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _too_big(self, size: int | str) -> JSONResponse:
        return _json_error(
            422,
            f"request body is {size} bytes; this server accepts at most {self.max_bytes} "
            "(limits.max_body_bytes).",
        )

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
                await _json_error(422, "Content-Length is not a number.")(scope, receive, send)
                return
            if size > self.max_bytes:
                await self._too_big(size)(scope, receive, send)
                return
        chunks: list[bytes] = []
        total = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            total += len(body)
            if total > self.max_bytes:
                await self._too_big(f"more than {self.max_bytes}")(scope, receive, send)
                return
            chunks.append(body)
            more = bool(message.get("more_body", False))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class MetricsMiddleware:
    """Count every response by endpoint and status and time it."""

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        endpoint = _ENDPOINTS.get(path, "admin" if path.startswith("/v1/admin") else "other")
        status = 500
        t0 = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            m = self.service.metrics
            m.requests.labels(endpoint, str(status)).inc()
            m.latency.labels(endpoint).observe(time.perf_counter() - t0)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x != "body"]
        where = ".".join(loc) or "body"
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "json_invalid":
            where, msg = "body", f"malformed JSON ({err.get('ctx', {}).get('error', msg)})"
        elif err.get("type") == "missing" and not loc:
            msg = "a JSON body is required"
        msg = msg.removeprefix("Value error, ")
        parts.append(f"{where}: {msg}")
    return "; ".join(parts) or "invalid request"


def create_app(service: Service) -> FastAPI:
    """The FastAPI app serving ``service`` (build the service with ``Service.from_config``)."""
    from ragshield import __version__

    app = FastAPI(
        title="ragshield",
        version=__version__,
        description="A RAG pipeline defended against poisoning, prompt injection and "
        "knowledge-base extraction.",
        responses=_ERRORS,
    )
    app.state.service = service
    limiter = anyio.CapacityLimiter(service.config.limits.concurrency)
    bearer = HTTPBearer(auto_error=False)
    header_key = APIKeyHeader(name="X-API-Key", auto_error=False)

    def requires(scope: str) -> Callable[..., ApiKey]:
        def dependency(
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
            x_api_key: Annotated[str | None, Depends(header_key)],
        ) -> ApiKey:
            token = credentials.credentials if credentials is not None else x_api_key
            key = service.keys.authenticate(token)
            key.require(scope)
            return key

        return dependency

    # ---- errors -------------------------------------------------------------------------
    @app.exception_handler(RequestValidationError)
    async def _on_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _json_error(422, _validation_message(exc))

    @app.exception_handler(InputError)
    async def _on_input(_: Request, exc: InputError) -> JSONResponse:
        return _json_error(422, str(exc))

    @app.exception_handler(NoFilter)
    async def _on_no_filter(_: Request, exc: NoFilter) -> JSONResponse:
        return _json_error(400, str(exc))

    @app.exception_handler(AuthError)
    async def _on_auth(_: Request, exc: AuthError) -> JSONResponse:
        service.metrics.auth_failures.labels("key").inc()
        return _json_error(401, str(exc), {"WWW-Authenticate": "Bearer"})

    @app.exception_handler(ScopeError)
    async def _on_scope(_: Request, exc: ScopeError) -> JSONResponse:
        service.metrics.auth_failures.labels("scope").inc()
        return _json_error(403, str(exc))

    @app.exception_handler(Refused)
    async def _on_refused(_: Request, exc: Refused) -> JSONResponse:
        retry = str(max(1, math.ceil(exc.retry_after)))
        return _json_error(429, exc.reason, {"Retry-After": retry})

    @app.exception_handler(StorageError)
    async def _on_storage(_: Request, exc: StorageError) -> JSONResponse:
        log.error("storage error: %s", exc)
        return _json_error(503, "storage unavailable; the request was not processed.")

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return _json_error(500, "internal error; the server log has the details.")

    # ---- endpoints ----------------------------------------------------------------------
    @app.post("/v1/ask", response_model=AskResponse, tags=["rag"])
    async def ask(
        body: AskRequest, key: Annotated[ApiKey, Depends(requires("ask"))]
    ) -> dict[str, Any]:
        """Answer through the defended pipeline (budgets and extraction throttle apply)."""
        t0 = time.perf_counter()
        verdict = await run_in_threadpool(service.admit_ask, key, body)
        if verdict.delay > 0:
            await anyio.sleep(verdict.delay)  # holds no worker thread
        result: dict[str, Any] = await anyio.to_thread.run_sync(
            service.ask, key, body, verdict, t0, limiter=limiter
        )
        return result

    @app.post("/v1/filter", response_model=FilterResponse, tags=["rag"])
    async def filter_(
        body: FilterRequest, key: Annotated[ApiKey, Depends(requires("filter"))]
    ) -> dict[str, Any]:
        """Run the defense chain on your own retrieved passages."""
        t0 = time.perf_counter()
        await run_in_threadpool(service.admit_filter, key, body)
        result: dict[str, Any] = await anyio.to_thread.run_sync(
            service.filter, key, body, t0, limiter=limiter
        )
        return result

    @app.get("/v1/health", response_model=HealthResponse, tags=["ops"])
    def health() -> dict[str, Any]:
        return service.health()

    if service.config.auth.metrics_require_key:

        @app.get("/metrics", tags=["ops"], response_class=Response)
        def metrics_protected(_: Annotated[ApiKey, Depends(requires("admin"))]) -> Response:
            return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    else:

        @app.get("/metrics", tags=["ops"], response_class=Response)
        def metrics() -> Response:
            return Response(service.metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/v1/admin/keys", response_model=list[KeyUsage], tags=["admin"])
    def admin_keys(_: Annotated[ApiKey, Depends(requires("admin"))]) -> list[dict[str, Any]]:
        """Per key: requests, throttle verdicts, distinct chunks received, block state."""
        return service.key_usage()

    @app.post("/v1/admin/keys/{key_id}/unblock", tags=["admin"])
    def admin_unblock(
        key_id: str, _: Annotated[ApiKey, Depends(requires("admin"))]
    ) -> dict[str, Any]:
        """Lift an extraction block (the ledger is kept: coverage can block it again)."""
        if service.db.get_key(key_id) is None:
            raise InputError(f"no API key with id {key_id!r}.")
        return {"id": key_id, "unblocked": service.db.unblock(key_id)}

    app.add_middleware(BodyLimitMiddleware, max_bytes=service.config.limits.max_body_bytes)
    app.add_middleware(MetricsMiddleware, service=service)
    return app


def app_from_env() -> FastAPI:
    """uvicorn factory: the config file named by ``RAGSHIELD_SERVE_CONFIG``."""
    path = os.environ.get("RAGSHIELD_SERVE_CONFIG")
    if not path:
        raise InputError("set RAGSHIELD_SERVE_CONFIG to the server config file.")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return create_app(Service.from_config(load_config(path)))
