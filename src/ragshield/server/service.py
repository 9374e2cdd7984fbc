"""The defended pipeline behind the HTTP layer: admission, answering, filtering, auditing.

Nothing here knows about HTTP, so the same object is driven by the FastAPI app and by
tests. One encoder, one store and one generator are loaded once and shared by every
request; a pipeline per requested defense combination is built on first use and cached.

Request life cycle for ``ask``: validate → budget (per-key fixed windows) → extraction
throttle → (sleep, if slowed, outside any worker thread) → retrieve / filter / generate →
one transaction writing the audit record and the key's served-chunk ledger.

Example::

    service = Service.from_config(load_config("server.toml"))
    key_id, token = service.keys.create("alice")
    key = service.keys.authenticate(token)
    verdict = service.admit_ask(key, AskRequest(question="Who designed the Eiffel Tower?"))
    print(service.ask(key, AskRequest(question="..."), verdict)["answer"])

Over 500 lines: admission, budgets, throttle, answering and audit are one request's steps.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ragshield.config import PipelineParts, assemble, open_parts
from ragshield.defenses import registry
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, RagshieldError
from ragshield.generate.base import Generator
from ragshield.pipeline import RAGPipeline
from ragshield.server.auth import ApiKey, KeyManager
from ragshield.server.config import ServerConfig
from ragshield.server.db import Admission, AuditRecord, Database
from ragshield.server.metrics import Metrics
from ragshield.server.schemas import AskRequest, FilterRequest
from ragshield.server.throttle import ALLOW, ExtractionThrottle, Verdict
from ragshield.store.base import VectorStore
from ragshield.types import FilterResult, Passage, RetrievedPassage

WINDOWS = (("minute", 60.0), ("day", 86_400.0))


class NoFilter(InputError):
    """/v1/filter on a server whose chain filters nothing (HTTP 400, not 422: the request is
    well-formed, the server is not set up for it)."""


class Refused(RagshieldError):
    """A request turned away by a budget or the throttle (HTTP 429 + Retry-After)."""

    def __init__(self, reason: str, retry_after: float, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.kind = kind


@dataclass(frozen=True)
class _Call:
    """Who asked what, through which chain: what every audit row of one request shares."""

    key: ApiKey
    endpoint: str
    question: str
    k: int | None
    defenses: Sequence[str]


@dataclass(frozen=True)
class _Resolved:
    names: tuple[str, ...]
    pipeline: RAGPipeline


def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def stage_reports(stages: Sequence[FilterResult]) -> list[dict[str, Any]]:
    """Each defense's verdicts without passage text (text would leak the knowledge base)."""
    out = []
    for s in stages:
        out.append(
            {
                "defense": s.name,
                "kept_ids": s.kept_ids,
                "removed": [
                    {
                        "index": int(d.index),
                        "id": d.passage_id,
                        "unit": d.unit,
                        "reason": d.reason,
                        "scores": {str(k): _finite(v) for k, v in d.scores.items()},
                    }
                    for d in s.decisions
                ],
                "seconds": float(s.seconds),
            }
        )
    return out


def _audit_decisions(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"defense": r["defense"], **rm} for r in reports for rm in r["removed"]]


class Service:
    """Shared state of one running server."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        encoder: Encoder,
        store: VectorStore,
        generator: Generator,
        db: Database,
        clock: Callable[[], float] = time.time,
        index_defense: str | None = None,
    ) -> None:
        self.config = config
        self.encoder = encoder
        self.store = store
        self.generator = generator
        self.db = db
        self.clock = clock
        self.parts = PipelineParts(store, encoder, generator, index_defense)
        self.keys = KeyManager(db, config.auth, clock=self._now)
        self.throttle = ExtractionThrottle(config.throttle, db, len(store), clock=self._now)
        self.metrics = Metrics(blocked_keys=lambda: float(self.db.blocked_keys(self._now())))
        # built filters and wrapped generators, shared by every defense combination
        self._parts_cache: dict[Any, Any] = {}
        self._pipelines: dict[tuple[str, ...], RAGPipeline] = {}
        self._lock = threading.Lock()
        self._hash_key = config.audit.hash_key.encode("utf-8")

    def _now(self) -> float:
        return self.clock()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_config(
        cls,
        config: ServerConfig,
        *,
        encoder: Encoder | None = None,
        generator: Generator | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Service:
        """Open the index, encoder, generator and database the config names.

        The pipeline parts come from :func:`ragshield.config.open_parts`, as for
        ``ragshield ask``: a FAISS or pgvector index, a RAGFort re-index with its query
        encoder. Pass ``encoder`` to share an already-loaded one (tests, embedding the
        service); it must be the model the index's queries need.
        """
        _check_index_defenses(config)
        parts = open_parts(config, encoder=encoder, generator=generator)
        db = Database(config.storage.resolved_url())
        db.migrate()
        service = cls(
            config,
            encoder=parts.encoder,
            store=parts.store,
            generator=parts.generator,
            db=db,
            clock=clock,
            index_defense=parts.index_defense,
        )
        service.warm_up()
        return service

    def warm_up(self) -> None:
        """Load models and build the default chain now, not on the first request."""
        for obj in (self.encoder, self.generator):
            warm = getattr(obj, "warm_up", None)
            if callable(warm):
                warm()
        self.resolve(None)

    # ---- defenses -----------------------------------------------------------------------
    def resolve(self, requested: Sequence[str] | None) -> _Resolved:
        """The pipeline for a request's ``defenses`` (``None`` = the configured chain)."""
        cfg = self.config.defenses
        if requested is None:
            names = tuple(cfg.chain)
        else:
            names = tuple(dict.fromkeys(requested))
            allowed = cfg.allowed_names()
            bad = [n for n in names if n not in allowed]
            if bad:
                raise InputError(
                    f"defenses {bad} are not enabled on this server; allowed: "
                    f"{', '.join(allowed) or '(none)'}."
                )
            if not names and not cfg.allow_none and cfg.chain:
                raise InputError(
                    "this server does not allow turning all defenses off (defenses.allow_none)."
                )
        with self._lock:
            rag = self._pipelines.get(names)
        if rag is None:
            # the index transform (RAGFort re-index) was applied when the index was opened:
            # it holds for every request, whatever it names
            chosen = [n for n in names if registry.entry(n).kind != "index"]
            if self.parts.index_defense is not None:
                chosen.insert(0, self.parts.index_defense)
            with self._lock:
                try:
                    rag = assemble(
                        self.config, self.parts, defenses=chosen, cache=self._parts_cache
                    )
                except (ImportError, AttributeError) as exc:
                    raise InputError(
                        f"a defense of {list(names)} is registered but cannot be loaded here: {exc}"
                    ) from exc
                self._pipelines[names] = rag
        return _Resolved(names, rag)

    # ---- validation ---------------------------------------------------------------------
    def check_ask(self, req: AskRequest) -> int:
        """Input limits the schema cannot know (they come from the config); returns k."""
        lim, ret = self.config.limits, self.config.retrieval
        if len(req.question) > lim.max_question_chars:
            raise InputError(
                f"question: {len(req.question)} characters; this server accepts at most "
                f"{lim.max_question_chars}."
            )
        k = ret.k if req.k is None else req.k
        high = min(ret.max_k, len(self.store))
        if not 1 <= k <= high:
            raise InputError(f"k: must be between 1 and {high} on this server. Got {k}.")
        self.resolve(req.defenses)
        return k

    def check_filter(self, req: FilterRequest) -> None:
        lim = self.config.limits
        if len(req.query) > lim.max_question_chars:
            raise InputError(
                f"query: {len(req.query)} characters; this server accepts at most "
                f"{lim.max_question_chars}."
            )
        if len(req.passages) > lim.max_filter_passages:
            raise InputError(
                f"passages: {len(req.passages)} given; this server filters at most "
                f"{lim.max_filter_passages} per request."
            )
        for i, p in enumerate(req.passages):
            if len(p.text) > lim.max_passage_chars:
                raise InputError(
                    f"passages.{i}.text: {len(p.text)} characters; at most {lim.max_passage_chars}."
                )
        resolved = self.resolve(req.defenses)
        if not resolved.pipeline.chain.filters and req.defenses != []:
            raise NoFilter(
                "this server has no post-retrieval filter for /v1/filter ("
                + (
                    f"defenses {list(resolved.names)} filter no passage"
                    if resolved.names
                    else "defenses.chain is empty"
                )
                + "), so every passage would come back unchecked: configure defenses.chain "
                '(e.g. ["ragdefender", "ecosaferag"]) or name filters in the request\'s '
                '"defenses".'
            )

    # ---- admission ----------------------------------------------------------------------
    def question_hash(self, question: str) -> str:
        data = question.encode("utf-8")
        if self._hash_key:
            return hmac.new(self._hash_key, data, hashlib.sha256).hexdigest()
        return hashlib.sha256(data).hexdigest()

    def _audit(
        self,
        call: _Call,
        *,
        status: int,
        outcome: str,
        request_id: str | None = None,
        chunk_ids: Sequence[str] = (),
        decisions: Sequence[dict[str, Any]] = (),
        coverage: int | None = None,
        reason: str | None = None,
        latency_ms: float = 0.0,
    ) -> AuditRecord:
        """The audit row of one request, stamped now; every service path writes its rows
        through here so the hashing of the question and the id scheme cannot drift apart.

        ``novelty`` is left to the database, which computes it with the ledger update.
        """
        return AuditRecord(
            request_id=uuid.uuid4().hex if request_id is None else request_id,
            key_id=call.key.id,
            ts=self._now(),
            endpoint=call.endpoint,
            status=status,
            outcome=outcome,
            question_hash=self.question_hash(call.question),
            k=call.k,
            defenses=list(call.defenses),
            chunk_ids=list(chunk_ids),
            decisions=list(decisions),
            novelty=None,
            coverage=coverage,
            reason=reason,
            latency_ms=latency_ms,
        )

    def _refuse(
        self,
        call: _Call,
        outcome: str,
        reason: str,
        retry_after: float,
        kind: str,
        coverage: int | None = None,
        admission: Admission | None = None,
    ) -> Refused:
        if admission is not None:  # charged already: close the row the charge opened
            self.db.close_admission(
                admission, status=429, outcome=outcome, reason=reason, latency_ms=0.0
            )
            return Refused(reason, retry_after, kind)
        self.db.record(
            self._audit(call, status=429, outcome=outcome, coverage=coverage, reason=reason)
        )
        return Refused(reason, retry_after, kind)

    def _budget(self, call: _Call) -> Admission:
        key, lim = call.key, self.config.limits
        per = {
            "minute": key.rpm or lim.requests_per_minute or None,  # 0 = unlimited
            "day": key.rpd or lim.requests_per_day or None,
        }
        # the charge and this row commit together (issue #15 item 12)
        opened = self._audit(call, status=0, outcome="admitted")
        windows = [(w, secs, per[w]) for w, secs in WINDOWS]
        check = self.db.consume(key.id, windows, opened.ts, opened)
        if not check.allowed:
            self.metrics.rate_limited.labels(check.window).inc()
            wait = math.ceil(check.retry_after)
            reason = (
                f"rate limit: key {key.id} may make {check.limit} requests per "
                f"{check.window}; retry in {wait} s."
            )
            raise self._refuse(call, "rate_limited", reason, check.retry_after, "budget")
        assert check.admission is not None
        return check.admission

    def admit_ask(self, key: ApiKey, req: AskRequest) -> Verdict:
        """Budget, then the extraction throttle. Raises :class:`Refused`; else the verdict."""
        k = self.check_ask(req)
        call = _Call(key, "ask", req.question, k, self.resolve(req.defenses).names)
        admission = self._budget(call)
        verdict = replace(self.throttle.check(key.id, req.question), admission=admission)
        if verdict.action != "allow":
            self.metrics.throttled.labels(verdict.kind, verdict.action).inc()
        if verdict.action == "refuse":
            raise self._refuse(
                call,
                "refused",
                verdict.reason,
                verdict.retry_after,
                verdict.kind,
                verdict.coverage,
                admission,
            )
        return verdict

    def admit_filter(self, key: ApiKey, req: FilterRequest) -> Admission:
        self.check_filter(req)
        return self._budget(_Call(key, "filter", req.query, None, self.resolve(req.defenses).names))

    # ---- work ---------------------------------------------------------------------------
    def ask(
        self,
        key: ApiKey,
        req: AskRequest,
        verdict: Verdict = ALLOW,
        started: float | None = None,
    ) -> dict[str, Any]:
        """Answer through the defended pipeline and audit it (one transaction)."""
        t0 = time.perf_counter() if started is None else started
        k = self.check_ask(req)
        resolved = self.resolve(req.defenses)
        ans = resolved.pipeline.answer(req.question, k=k)
        leak = ans.details.get("leak")
        if isinstance(leak, dict):  # the canary output check caught a copy: tell the throttle
            caught = self.throttle.report_leak(key.id, leak)
            self.metrics.throttled.labels("leak", caught.action).inc()
        reports = stage_reports(ans.filter_results)
        for r in reports:
            for rm in r["removed"]:
                self.metrics.removed.labels(r["defense"], rm["unit"]).inc()
        for stage in ("retrieve", "filter", "generate"):
            if stage in ans.timings:
                self.metrics.stage.labels(stage).observe(ans.timings[stage])
        served = [r.id for r in ans.passages]
        request_id = uuid.uuid4().hex if verdict.admission is None else verdict.admission.request_id
        latency = (time.perf_counter() - t0) * 1000
        self._close(
            verdict.admission,
            self._audit(
                _Call(key, "ask", req.question, k, resolved.names),
                status=200,
                outcome="slowed" if verdict.action == "slow" else "ok",
                request_id=request_id,
                chunk_ids=served,
                decisions=_audit_decisions(reports),
                coverage=verdict.coverage,
                reason=verdict.reason or None,
                latency_ms=latency,
            ),
            served,
        )
        timings = {name: round(v * 1000, 3) for name, v in ans.timings.items()}
        if verdict.delay:
            timings["throttle_delay"] = round(verdict.delay * 1000, 3)
        timings["server_total"] = round((time.perf_counter() - t0) * 1000, 3)
        return {
            "request_id": request_id,
            "answer": ans.text,
            "passage_ids": served,
            "retrieved_ids": [r.id for r in ans.retrieved],
            "defenses": reports,
            "throttle": (
                None
                if verdict.action == "allow"
                else {
                    "action": verdict.action,
                    "kind": verdict.kind,
                    "reason": verdict.reason,
                    "delay_ms": verdict.delay * 1000,
                }
            ),
            "timings_ms": timings,
        }

    def _close(self, admission: Admission | None, rec: AuditRecord, served: list[str]) -> None:
        """Write the answer's audit row and ledger; refuse it if it would pass the cap."""
        if admission is None:  # not charged through admit_* (direct library use)
            self.db.record(rec, served=served)
            return
        cap = self.throttle.cap_check()
        done = self.db.finish(admission, rec, served=served, cap=cap)
        if not done.served:
            assert cap is not None
            self.metrics.throttled.labels("coverage", "refuse").inc()
            raise Refused(cap.reason, self.config.throttle.cooldown_seconds, "coverage")

    def filter(
        self,
        key: ApiKey,
        req: FilterRequest,
        started: float | None = None,
        admission: Admission | None = None,
    ) -> dict[str, Any]:
        """Run the chain on the caller's own passages (they never touch the index)."""
        t0 = time.perf_counter() if started is None else started
        self.check_filter(req)
        resolved = self.resolve(req.defenses)
        texts = [f"{p.title}. {p.text}" if p.title else p.text for p in req.passages]
        vecs = self.encoder.encode([req.query, *texts])
        qv, pv = vecs[0], vecs[1:]
        cos = pv @ qv if len(texts) else np.zeros(0, dtype=np.float32)
        items = [
            RetrievedPassage(
                Passage(p.id, p.text, p.title),
                float(cos[i]) if p.score is None else float(p.score),
                i,
                pv[i],
            )
            for i, p in enumerate(req.passages)
        ]
        t1 = time.perf_counter()
        stages = resolved.pipeline.chain.run(req.query, items)
        filter_s = time.perf_counter() - t1
        self.metrics.stage.labels("filter").observe(filter_s)
        kept = list(stages[-1].kept) if stages else items
        removed_ids = [r.id for s in stages for r in s.removed]
        reports = stage_reports(stages)
        for r in reports:
            for rm in r["removed"]:
                self.metrics.removed.labels(r["defense"], rm["unit"]).inc()
        request_id = uuid.uuid4().hex if admission is None else admission.request_id
        self._close(
            admission,
            self._audit(
                _Call(key, "filter", req.query, None, resolved.names),
                status=200,
                outcome="ok",
                request_id=request_id,
                chunk_ids=[r.id for r in kept],
                decisions=_audit_decisions(reports),
                latency_ms=(time.perf_counter() - t0) * 1000,
            ),
            [],
        )
        return {
            "request_id": request_id,
            "kept": [{"id": r.id, "text": r.text} for r in kept],
            "removed_ids": removed_ids,
            "defenses": reports,
            "timings_ms": {
                "filter": round(filter_s * 1000, 3),
                "server_total": round((time.perf_counter() - t0) * 1000, 3),
            },
        }

    # ---- operator views -----------------------------------------------------------------
    def key_usage(self) -> list[dict[str, Any]]:
        now = self._now()
        since = now - self.config.throttle.coverage_window_seconds
        out = []
        for row in self.db.list_keys():
            usage = self.db.key_usage(row.id, since)
            blocked = usage["blocked_until"]
            out.append(
                {
                    "id": row.id,
                    "name": row.name,
                    "scopes": list(row.scopes),
                    "revoked": row.revoked_at is not None,
                    "requests": usage["requests"],
                    "throttled": usage["throttled"],
                    "coverage": self.db.coverage(row.id, since),
                    "blocked_until": blocked if blocked is not None and blocked > now else None,
                    "block_reason": usage["block_reason"]
                    if blocked is not None and blocked > now
                    else None,
                }
            )
        return out

    def health(self) -> dict[str, Any]:
        from ragshield import __version__

        return {
            "status": "ok" if self.db.ping() else "degraded",
            "version": __version__,
            "schema_version": self.db.schema_version(),
            "passages": len(self.store),
            "encoder": self.encoder.name,
            "defenses": list(self.config.defenses.chain),
            "generator": getattr(self.generator, "name", type(self.generator).__name__),
        }

    def close(self) -> None:
        self.db.close()


def _check_index_defenses(config: ServerConfig) -> None:
    """An index transform applies to the whole server (the index is opened once): a request
    cannot switch it on, so it must be in the chain if it is anywhere."""
    for name in config.defenses.allowed:
        if registry.plan([name]).index is not None and name not in config.defenses.chain:
            raise InputError(
                f"defenses.allowed names {name!r}, which transforms the index and so applies "
                "to every request: put it in defenses.chain instead."
            )
