"""The HTTP face of :class:`~ragshield.server.service.Service` (FastAPI).

Endpoints (OpenAPI schema at ``/openapi.json``, browsable at ``/docs``, both only with
``auth.docs_enabled``: they need no key):

* ``POST /v1/ask`` — ``{question, k?, defenses?}`` → answer, ids of the passages that reached
  the generator, every defense's removals and why, throttle verdict, timings;
* ``POST /v1/filter`` — ``{query, passages[], defenses?}`` → what the chain keeps, for users
  with their own retriever;
* ``GET /v1/health``; ``GET /metrics`` (Prometheus);
* ``POST /v1/chat/completions`` — the OpenAI chat API over the same pipeline, keys,
  budgets, throttle and audit (:mod:`ragshield.server.openai_chat`);
* ``POST /v1/admin/index/add``, ``/v1/admin/quarantine[/release|/delete]`` (``admin``) —
  screened ingestion on the live index (:mod:`ragshield.server.admin_ingest`);
* ``GET /v1/admin/keys`` and ``POST /v1/admin/keys/{key_id}/unblock`` (``admin`` scope) —
  where an operator sees which key is extracting and lets a blocked key back in.

Keys go in ``Authorization: Bearer <key>`` (or ``X-API-Key``). Errors are JSON
``{"detail": "<one line>"}``: 401 bad key, 403 missing scope, 422 bad input (malformed,
non-UTF-8, too deeply nested or oversized body, empty question, k out of range), 429
budget, throttle or too many failed authentications (with ``Retry-After``), 503 storage
down; anything else is a 500 that is logged, never a crash. Every request is counted,
access-logged and, when refused, audited (:mod:`ragshield.server.middleware`).

Example::

    # RAGSHIELD_SERVE_CONFIG=server.toml
    uvicorn --factory --no-proxy-headers ragshield.server.app:app_from_env

(``--no-proxy-headers``: the client address behind a reverse proxy is the config's
``auth.trusted_proxies`` business, :mod:`ragshield.server.proxies`; uvicorn would otherwise
rewrite it first from ``X-Forwarded-For`` of loopback peers.)
"""

import logging
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragshield.errors import InputError
from ragshield.server.auth import ApiKey, AuthError, AuthThrottled, ScopeError, presented_id
from ragshield.server.config import load_config
from ragshield.server.db import Admission, StorageError
from ragshield.server.metrics import CONTENT_TYPE
from ragshield.server.middleware import (
    AuditQueue,
    AuthShedMiddleware,
    BodyLimitMiddleware,
    ObserveMiddleware,
    json_error,
)
from ragshield.server.proxies import TrustedProxies
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

_PARSE_FAILED = "There was an error parsing the body"  # FastAPI's 400 for non-JSON errors

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (400, 401, 403, 422, 429, 503)
}


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


def _unparseable(body: bytes) -> str:
    """Why FastAPI could not parse a body json.loads did not reject as malformed JSON."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"body: not valid UTF-8 (byte {exc.start})"
    return "body: JSON nested too deeply"


def create_app(service: Service) -> FastAPI:
    """The FastAPI app serving ``service`` (build the service with ``Service.from_config``)."""
    from ragshield import __version__

    audit = AuditQueue(service)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        await anyio.to_thread.run_sync(audit.flush)

    docs = service.config.auth.docs_enabled
    app = FastAPI(
        title="ragshield",
        version=__version__,
        description="A RAG pipeline defended against poisoning, prompt injection and "
        "knowledge-base extraction.",
        responses=_ERRORS,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.audit = audit
    limiter = anyio.CapacityLimiter(service.config.limits.concurrency)
    proxies = TrustedProxies.parse(service.config.auth.trusted_proxies)
    bearer = HTTPBearer(auto_error=False)
    header_key = APIKeyHeader(name="X-API-Key", auto_error=False)

    def requires(scope: str) -> Callable[..., Any]:
        async def dependency(
            request: Request,
            credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
            x_api_key: Annotated[str | None, Depends(header_key)],
        ) -> ApiKey:
            token = credentials.credentials if credentials is not None else x_api_key
            request.state.key_id = presented_id(token)
            key = await service.keys.authenticate_async(token, proxies.client_of(request.scope))
            key.require(scope)
            return key

        return dependency

    async def run_admitted(
        request: Request, admission: Admission, fn: Callable[..., dict[str, Any]], *args: Any
    ) -> dict[str, Any]:
        """Run the pipeline for a charged request; close its audit row if it fails."""
        t0 = time.perf_counter()
        try:
            return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)
        except Refused:
            raise
        except Exception as exc:
            status = (
                422
                if isinstance(exc, InputError)
                else 503
                if isinstance(exc, StorageError)
                else 500
            )
            try:
                await run_in_threadpool(
                    service.db.close_admission,
                    admission,
                    status=status,
                    outcome="rejected" if status == 422 else "error",
                    reason=(str(exc) if status == 422 else type(exc).__name__)[:500],
                    latency_ms=(time.perf_counter() - t0) * 1000,
                )
            except StorageError as err:
                log.error("could not close audit row %s: %s", admission.audit_id, err)
            raise

    # ---- errors -------------------------------------------------------------------------
    def _reject(request: Request, status: int, detail: str, **kw: Any) -> JSONResponse:
        request.state.reason = detail
        return json_error(status, detail, **kw)

    @app.exception_handler(RequestValidationError)
    async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _reject(request, 422, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _on_http(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 400 and exc.detail == _PARSE_FAILED:
            return _reject(request, 422, _unparseable(await request.body()))
        return await http_exception_handler(request, exc)

    @app.exception_handler(InputError)
    async def _on_input(request: Request, exc: InputError) -> JSONResponse:
        return _reject(request, 422, str(exc))

    @app.exception_handler(NoFilter)
    async def _on_no_filter(_: Request, exc: NoFilter) -> JSONResponse:
        return json_error(400, str(exc))

    @app.exception_handler(AuthError)
    async def _on_auth(request: Request, exc: AuthError) -> JSONResponse:
        service.metrics.auth_failures.labels("key").inc()
        await anyio.sleep(service.config.auth.failure_delay_seconds)
        return _reject(request, 401, str(exc), headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(AuthThrottled)
    async def _on_auth_throttled(request: Request, exc: AuthThrottled) -> JSONResponse:
        service.metrics.auth_failures.labels("throttled").inc()
        await anyio.sleep(service.config.auth.failure_delay_seconds)
        retry = str(max(1, math.ceil(exc.retry_after)))
        return _reject(request, 429, str(exc), headers={"Retry-After": retry})

    @app.exception_handler(ScopeError)
    async def _on_scope(request: Request, exc: ScopeError) -> JSONResponse:
        service.metrics.auth_failures.labels("scope").inc()
        return _reject(request, 403, str(exc))

    @app.exception_handler(Refused)
    async def _on_refused(request: Request, exc: Refused) -> JSONResponse:
        request.state.audited = True  # the service wrote (or closed) the row
        retry = str(max(1, math.ceil(exc.retry_after)))
        return json_error(429, exc.reason, {"Retry-After": retry})

    @app.exception_handler(StorageError)
    async def _on_storage(request: Request, exc: StorageError) -> JSONResponse:
        log.error("storage error: %s", exc)
        return _reject(request, 503, "storage unavailable; the request was not processed.")

    @app.exception_handler(Exception)
    async def _on_bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return json_error(500, "internal error; the server log has the details.")

    # ---- endpoints ----------------------------------------------------------------------
    @app.post("/v1/ask", response_model=AskResponse, tags=["rag"])
    async def ask(
        request: Request, body: AskRequest, key: Annotated[ApiKey, Depends(requires("ask"))]
    ) -> dict[str, Any]:
        """Answer through the defended pipeline (budgets and extraction throttle apply)."""
        t0 = time.perf_counter()
        verdict = await run_in_threadpool(service.admit_ask, key, body)
        assert verdict.admission is not None
        request.state.admission = verdict.admission
        if verdict.delay > 0:
            await anyio.sleep(verdict.delay)  # holds no worker thread
        return await run_admitted(request, verdict.admission, service.ask, key, body, verdict, t0)

    @app.post("/v1/filter", response_model=FilterResponse, tags=["rag"])
    async def filter_(
        request: Request,
        body: FilterRequest,
        key: Annotated[ApiKey, Depends(requires("filter"))],
    ) -> dict[str, Any]:
        """Run the defense chain on your own retrieved passages."""
        t0 = time.perf_counter()
        admission = await run_in_threadpool(service.admit_filter, key, body)
        request.state.admission = admission
        return await run_admitted(request, admission, service.filter, key, body, t0, admission)

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

    from ragshield.server import admin_ingest, openai_chat  # issue #24

    openai_chat.mount(app, service, requires, run_admitted)
    admin_ingest.mount(app, service, requires)

    app.add_middleware(BodyLimitMiddleware, max_bytes=service.config.limits.max_body_bytes)
    app.add_middleware(
        AuthShedMiddleware,
        keys=service.keys,
        proxies=proxies,
        delay=service.config.auth.failure_delay_seconds,
        on_shed=service.metrics.auth_failures.labels("throttled").inc,
    )
    # outermost
    app.add_middleware(ObserveMiddleware, service=service, audit=audit, proxies=proxies)
    return app


def app_from_env() -> FastAPI:
    """uvicorn factory: the config file named by ``RAGSHIELD_SERVE_CONFIG``."""
    path = os.environ.get("RAGSHIELD_SERVE_CONFIG")
    if not path:
        raise InputError("set RAGSHIELD_SERVE_CONFIG to the server config file.")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    return create_app(Service.from_config(load_config(path)))
