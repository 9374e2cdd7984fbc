"""Keys, budgets, the served-chunk ledger and the audit log, in one SQL database.

SQLite (embedded, WAL mode) is the default; any SQLAlchemy URL works through the same code
(PostgreSQL: ``postgresql+psycopg://...``). The schema is versioned DDL: ``schema_version``
records what was applied and :func:`migrate` applies the rest in order, so a newer server
upgrades an older database in place.

Every write that belongs together happens in one transaction, so a crash never leaves
half a record: a budget check, its increment and the request's audit row (opened as
``admitted``; a ``kill -9`` mid-request leaves it so, never a charge without a row); the
coverage-cap check, the served-chunk ledger and the row's final state (two parallel
answers cannot both pass the cap, issue #15 item 3). On SQLite, write transactions start with ``BEGIN IMMEDIATE``: two writers then
queue on the busy timeout instead of failing with "database is locked" on lock upgrade.

Example::

    db = Database("sqlite:///server.db")
    db.migrate()
    print(db.count_audit())

The tables, their migrations and the engine set-up live in :mod:`ragshield.server.tables`.
Over 500 lines: keys, budgets, ledger and audit log share one transaction per request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from ragshield.errors import RagshieldError
from ragshield.server.tables import (
    MIGRATION_LOCK,
    MIGRATIONS,
    SCHEMA_VERSION,
    api_keys,
    audit_log,
    insert_ignore,
    key_state,
    make_engine,
    metadata,
    rate_windows,
    schema_version,
    served_chunks,
)
from ragshield.server.tables import sqlalchemy_url as sqlalchemy_url  # callers import it here

_T = TypeVar("_T")
_RETRYABLE = {"40P01", "40001"}  # deadlock_detected, serialization_failure
_RETRIES = 5  # a ledger write touches few rows: a deadlock repeating five times is a bug


class StorageError(RagshieldError):
    """The database is unreachable or refused a statement; the message says which."""


def _count(conn: Connection, table: Table, *where: ColumnElement[bool]) -> int:
    """Rows of ``table`` matching every condition in ``where``."""
    return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar() or 0)


def _one_line(exc: BaseException) -> str:
    """The driver's message without SQLAlchemy's statement dump and "Background" link."""
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    text = first[0] if first else type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


@dataclass(frozen=True)
class KeyRow:
    id: str
    name: str
    secret_hash: str
    scopes: tuple[str, ...]
    rpm: int | None
    rpd: int | None
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class Admission:
    """The audit row a charged request opened (``request_id`` goes back to the client)."""

    audit_id: int
    request_id: str


@dataclass(frozen=True)
class WindowCheck:
    """Outcome of one budget check: ``allowed`` or how long until the window resets."""

    allowed: bool
    window: str = ""
    limit: int = 0
    retry_after: float = 0.0
    admission: Admission | None = None


@dataclass(frozen=True)
class CoverageCap:
    """Distinct chunks a key may hold since ``since``; past it, block until ``block_until``."""

    limit: int
    since: float
    block_until: float
    reason: str


@dataclass(frozen=True)
class Finished:
    """What :meth:`Database.finish` did: served (with ``novelty``) or refused over the cap."""

    served: bool
    novelty: float | None
    coverage: int


@dataclass(frozen=True)
class AuditRecord:
    request_id: str
    key_id: str
    ts: float
    endpoint: str
    status: int
    outcome: str
    question_hash: str
    k: int | None
    defenses: Sequence[str]
    chunk_ids: Sequence[str]
    decisions: Sequence[dict[str, Any]]
    novelty: float | None
    coverage: int | None
    reason: str | None
    latency_ms: float


class Database:
    """All of the service's SQL in one place (SQLAlchemy Core, no ORM session state)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)

    # ---- plumbing -----------------------------------------------------------------------
    @contextmanager
    def write(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StorageError(
                f"database write failed ({self._where()}): {_one_line(exc)}"
            ) from exc

    def retried(self, work: Callable[[Connection], _T]) -> _T:
        """Run ``work`` in one write transaction, again if PostgreSQL aborted it to break a
        deadlock or a serialization failure: its manual asks clients to retry those
        (SQLSTATE 40P01 / 40001), and the whole transaction rolled back, so a rerun is safe."""
        for attempt in range(_RETRIES - 1):
            try:
                with self.write() as conn:
                    return work(conn)
            except StorageError as exc:
                code = getattr(getattr(exc.__cause__, "orig", None), "sqlstate", None)
                if not isinstance(exc.__cause__, DBAPIError) or code not in _RETRYABLE:
                    raise
                time.sleep(0.01 * (attempt + 1))
        with self.write() as conn:  # the last try: its error is the caller's
            return work(conn)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        try:
            with self.engine.connect() as conn:
                conn = conn.execution_options(sqlite_begin="DEFERRED")
                with conn.begin():
                    yield conn
        except SQLAlchemyError as exc:
            raise StorageError(f"database read failed ({self._where()}): {_one_line(exc)}") from exc

    def _where(self) -> str:
        where = self.engine.url.render_as_string(hide_password=True)
        return where if len(where) <= 200 else where[:200] + "..."

    def migrate(self) -> int:
        """Apply pending schema steps; return the version now in force.

        Replicas that start together may all migrate at once. SQLite's ``BEGIN IMMEDIATE``
        already serialises them; PostgreSQL takes a transaction-scoped advisory lock, as
        concurrent ``CREATE TABLE`` would otherwise collide in its catalog.
        """
        for attempt in range(5):
            try:
                current = self._migrate_once()
                break
            except StorageError as exc:
                # SQLite: a brand-new file switching to WAL while another replica migrates
                # can answer "database is locked" before the busy timeout applies; retry.
                if "locked" not in str(exc) or attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
        if current > SCHEMA_VERSION:  # pragma: no cover - a newer server wrote this DB
            raise StorageError(
                f"the database schema is version {current}, newer than this ragshield "
                f"({SCHEMA_VERSION}): upgrade ragshield."
            )
        return int(current)

    def _migrate_once(self) -> int:
        with self.write() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK)))
            metadata.create_all(conn, tables=[schema_version])
            current = conn.execute(select(func.max(schema_version.c.version))).scalar() or 0
            for version, step in MIGRATIONS:
                if version > current:
                    step(conn)
                    conn.execute(
                        insert(schema_version).values(version=version, applied_at=time.time())
                    )
                    current = version
        return int(current)

    def schema_version(self) -> int:
        with self.read() as conn:
            return int(conn.execute(select(func.max(schema_version.c.version))).scalar() or 0)

    def ping(self) -> bool:
        try:
            with self.read() as conn:
                conn.execute(select(1))
            return True
        except StorageError:
            return False

    def close(self) -> None:
        self.engine.dispose()

    # ---- keys ---------------------------------------------------------------------------
    def insert_key(self, row: KeyRow) -> None:
        with self.write() as conn:
            conn.execute(
                insert(api_keys).values(
                    id=row.id,
                    name=row.name,
                    secret_hash=row.secret_hash,
                    scopes=",".join(row.scopes),
                    rpm=row.rpm,
                    rpd=row.rpd,
                    created_at=row.created_at,
                    revoked_at=row.revoked_at,
                )
            )

    @staticmethod
    def _key(r: Any) -> KeyRow:
        return KeyRow(
            id=r.id,
            name=r.name,
            secret_hash=r.secret_hash,
            scopes=tuple(s for s in r.scopes.split(",") if s),
            rpm=r.rpm,
            rpd=r.rpd,
            created_at=r.created_at,
            revoked_at=r.revoked_at,
        )

    def get_key(self, key_id: str) -> KeyRow | None:
        with self.read() as conn:
            r = conn.execute(select(api_keys).where(api_keys.c.id == key_id)).first()
        return self._key(r) if r is not None else None

    def list_keys(self) -> list[KeyRow]:
        with self.read() as conn:
            rows = conn.execute(select(api_keys).order_by(api_keys.c.created_at)).all()
        return [self._key(r) for r in rows]

    def revoke_key(self, key_id: str, now: float) -> bool:
        with self.write() as conn:
            res = conn.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=now)
            )
        return bool(res.rowcount)

    # ---- budgets ------------------------------------------------------------------------
    def consume(
        self,
        key_id: str,
        limits: Sequence[tuple[str, float, int | None]],
        now: float,
        admit: AuditRecord | None = None,
    ) -> WindowCheck:
        """Count one request in every fixed window, or none if any window is full.

        ``limits`` holds ``(window name, window seconds, limit or None)``. Check and
        increment happen in one transaction, so concurrent requests cannot overspend; with
        ``admit``, the request's audit row is opened in that same transaction (returned as
        ``WindowCheck.admission``), so no charge exists without its row.
        """
        active = [(w, s, n) for w, s, n in limits if n is not None]
        if not active:
            if admit is None:
                return WindowCheck(True)
            with self.write() as conn:
                return WindowCheck(True, admission=self._open(conn, admit))
        with self.write() as conn:
            insert_ignore(
                conn,
                rate_windows,
                [{"key_id": key_id, "window": w, "start": -1.0, "count": 0} for w, _, _ in active],
            )
            rows = {
                r["window"]: r
                for r in conn.execute(
                    select(rate_windows)
                    .where(rate_windows.c.key_id == key_id)
                    .order_by(rate_windows.c.window)
                    .with_for_update()
                ).mappings()
            }
            plan: list[tuple[str, float, int]] = []  # window, start, new count
            for window, seconds, limit in active:
                assert limit is not None
                start = (now // seconds) * seconds
                row = rows.get(window)
                count = int(row["count"]) if row is not None and row["start"] == start else 0
                if count >= limit:
                    return WindowCheck(False, window, limit, max(0.0, start + seconds - now))
                plan.append((window, start, count + 1))
            for window, start, count in plan:
                conn.execute(
                    update(rate_windows)
                    .where(rate_windows.c.key_id == key_id, rate_windows.c.window == window)
                    .values(start=start, count=count)
                )
            admission = self._open(conn, admit) if admit is not None else None
        return WindowCheck(True, admission=admission)

    # ---- extraction state ---------------------------------------------------------------
    def coverage(self, key_id: str, since: float) -> int:
        """Distinct chunks served to the key at or after ``since``."""
        with self.read() as conn:
            return _count(
                conn,
                served_chunks,
                served_chunks.c.key_id == key_id,
                served_chunks.c.last_at >= since,
            )

    def recent_novelty(self, key_id: str, n: int, since: float) -> list[float]:
        """Novelty of the key's last ``n`` answered questions (newest first)."""
        return [float(v) for v in self.recent_answered(audit_log.c.novelty, key_id, n, since)]

    def recent_answered(
        self, column: ColumnElement[Any], key_id: str, n: int, since: float
    ) -> list[Any]:
        """``column`` of the key's last ``n`` answered questions since ``since`` (newest
        first): the one query behind the novelty rule and the throttle's region rule.

        Answered = an ``ask`` served through the ledger, which records its novelty.
        """
        with self.read() as conn:
            return list(
                conn.execute(
                    select(column)
                    .where(
                        audit_log.c.key_id == key_id,
                        audit_log.c.endpoint == "ask",
                        audit_log.c.novelty.is_not(None),
                        audit_log.c.ts >= since,
                    )
                    .order_by(audit_log.c.id.desc())
                    .limit(n)
                ).scalars()
            )

    def block_state(self, key_id: str) -> tuple[float | None, str | None]:
        with self.read() as conn:
            r = conn.execute(select(key_state).where(key_state.c.key_id == key_id)).first()
        return (r.blocked_until, r.block_reason) if r is not None else (None, None)

    def block(self, key_id: str, until: float, reason: str) -> None:
        with self.write() as conn:
            insert_ignore(
                conn,
                key_state,
                [{"key_id": key_id, "blocked_until": None, "block_reason": None, "strikes": 0}],
            )
            r = conn.execute(
                select(key_state).where(key_state.c.key_id == key_id).with_for_update()
            ).one()
            conn.execute(
                update(key_state)
                .where(key_state.c.key_id == key_id)
                .values(
                    blocked_until=max(until, r.blocked_until or 0.0),
                    block_reason=reason,
                    strikes=r.strikes + 1,
                )
            )

    def unblock(self, key_id: str) -> bool:
        with self.write() as conn:
            res = conn.execute(
                update(key_state)
                .where(key_state.c.key_id == key_id)
                .values(blocked_until=None, block_reason=None)
            )
        return bool(res.rowcount)

    def blocked_keys(self, now: float) -> int:
        with self.read() as conn:
            return _count(conn, key_state, key_state.c.blocked_until > now)

    def key_usage(self, key_id: str, since: float) -> dict[str, Any]:
        window = audit_log.c.key_id == key_id, audit_log.c.ts >= since
        with self.read() as conn:
            n_req = _count(conn, audit_log, *window)
            n_refused = _count(
                conn, audit_log, *window, audit_log.c.outcome.in_(("refused", "slowed"))
            )
            state = conn.execute(select(key_state).where(key_state.c.key_id == key_id)).first()
        return {
            "requests": n_req,
            "throttled": n_refused,
            "blocked_until": state.blocked_until if state is not None else None,
            "block_reason": state.block_reason if state is not None else None,
            "strikes": state.strikes if state is not None else 0,
        }

    # ---- audit --------------------------------------------------------------------------
    @staticmethod
    def _values(rec: AuditRecord, novelty: float | None) -> dict[str, Any]:
        return {
            "request_id": rec.request_id,
            "key_id": rec.key_id,
            "ts": rec.ts,
            "endpoint": rec.endpoint,
            "status": rec.status,
            "outcome": rec.outcome,
            "question_hash": rec.question_hash,
            "k": rec.k,
            "defenses": json.dumps(list(rec.defenses)),
            "chunk_ids": json.dumps(list(rec.chunk_ids)),
            "decisions": json.dumps(list(rec.decisions), allow_nan=False),
            "novelty": novelty,
            "coverage": rec.coverage,
            "reason": rec.reason,
            "latency_ms": rec.latency_ms,
        }

    def _open(self, conn: Connection, rec: AuditRecord) -> Admission:
        res = conn.execute(insert(audit_log).values(**self._values(rec, rec.novelty)))
        (audit_id,) = res.inserted_primary_key or (None,)
        assert audit_id is not None
        return Admission(int(audit_id), rec.request_id)

    @staticmethod
    def _ledger(conn: Connection, key_id: str, ids: list[str], ts: float) -> float:
        """Mark ``ids`` (sorted, distinct) served to the key now; return their novelty."""
        # Row locks are taken in chunk-id order (the locking SELECT, then the inserts): two
        # PostgreSQL transactions serving overlapping chunks in different orders would
        # otherwise deadlock. SQLite's BEGIN IMMEDIATE serialises writers, ignores FOR UPDATE.
        seen = {
            r.chunk_id
            for r in conn.execute(
                select(served_chunks.c.chunk_id)
                .where(served_chunks.c.key_id == key_id, served_chunks.c.chunk_id.in_(ids))
                .order_by(served_chunks.c.chunk_id)
                .with_for_update()
            ).all()
        }
        fresh = [c for c in ids if c not in seen]
        if seen:
            conn.execute(
                update(served_chunks)
                .where(served_chunks.c.key_id == key_id, served_chunks.c.chunk_id.in_(list(seen)))
                .values(last_at=ts)
            )
        if fresh:
            insert_ignore(
                conn,
                served_chunks,
                [{"key_id": key_id, "chunk_id": c, "first_at": ts, "last_at": ts} for c in fresh],
            )
        return len(fresh) / len(ids)

    @staticmethod
    def _lock_key(conn: Connection, key_id: str) -> Any:
        """Hold the key's ``key_state`` row until commit: one ledger writer per key at a time
        on PostgreSQL (SQLite's BEGIN IMMEDIATE already admits one writer)."""
        insert_ignore(
            conn,
            key_state,
            [{"key_id": key_id, "blocked_until": None, "block_reason": None, "strikes": 0}],
        )
        return conn.execute(
            select(key_state).where(key_state.c.key_id == key_id).with_for_update()
        ).one()

    def record(self, rec: AuditRecord, *, served: Sequence[str] = ()) -> float | None:
        """Write one audit record and, for answers, update the key's served-chunk ledger.

        Both in one transaction. Returns the novelty of ``served`` (share of ids never
        served to this key before) when ``served`` is given, which is stored in the record.
        """

        def work(conn: Connection) -> float | None:
            novelty = rec.novelty
            if served:
                novelty = self._ledger(conn, rec.key_id, sorted(set(served)), rec.ts)
            conn.execute(insert(audit_log).values(**self._values(rec, novelty)))
            return novelty

        return self.retried(work)

    def record_many(self, recs: Sequence[AuditRecord]) -> None:
        """Write audit rows that touch no ledger (rejected requests) in one transaction."""
        if recs:
            with self.write() as conn:
                conn.execute(insert(audit_log), [self._values(r, r.novelty) for r in recs])

    def finish(
        self,
        admission: Admission,
        rec: AuditRecord,
        *,
        served: Sequence[str] = (),
        cap: CoverageCap | None = None,
    ) -> Finished:
        """Close an admitted request's row as ``rec`` and record what it served.

        With ``cap``, the key's coverage after this answer is computed under the key's row
        lock, in the same transaction as the ledger update: if the answer would take the
        key past ``cap.limit`` distinct chunks, nothing is recorded as served, the row is
        closed as refused (429) and the key is blocked, all at once.
        """
        ids = sorted(set(served))

        def work(conn: Connection) -> Finished:
            if ids and cap is not None:
                state = self._lock_key(conn, rec.key_id)
                window = served_chunks.c.key_id == rec.key_id, served_chunks.c.last_at >= cap.since
                held = _count(conn, served_chunks, *window)
                held_here = _count(conn, served_chunks, *window, served_chunks.c.chunk_id.in_(ids))
                after = held + len(ids) - held_here
                if after > cap.limit:
                    conn.execute(
                        update(key_state)
                        .where(key_state.c.key_id == rec.key_id)
                        .values(
                            blocked_until=max(cap.block_until, state.blocked_until or 0.0),
                            block_reason=cap.reason,
                            strikes=state.strikes + 1,
                        )
                    )
                    refused = {
                        **self._values(rec, None),
                        "status": 429,
                        "outcome": "refused",
                        "chunk_ids": "[]",
                        "coverage": held,
                        "reason": cap.reason,
                    }
                    conn.execute(
                        update(audit_log)
                        .where(audit_log.c.id == admission.audit_id)
                        .values(**refused)
                    )
                    return Finished(False, None, held)
            novelty = self._ledger(conn, rec.key_id, ids, rec.ts) if ids else rec.novelty
            conn.execute(
                update(audit_log)
                .where(audit_log.c.id == admission.audit_id)
                .values(**self._values(rec, novelty))
            )
            return Finished(True, novelty, rec.coverage or 0)

        return self.retried(work)

    def close_admission(
        self, admission: Admission, *, status: int, outcome: str, reason: str, latency_ms: float
    ) -> None:
        """Close an admitted request that ended without an answer (refused, error)."""
        with self.write() as conn:
            conn.execute(
                update(audit_log)
                .where(audit_log.c.id == admission.audit_id)
                .values(status=status, outcome=outcome, reason=reason, latency_ms=latency_ms)
            )

    def prune_audit(self, before: float) -> int:
        """Delete audit rows older than ``before``; return how many (retention)."""
        with self.write() as conn:
            res = conn.execute(delete(audit_log).where(audit_log.c.ts < before))
        return int(res.rowcount or 0)

    def count_audit(self, key_id: str | None = None) -> int:
        where = () if key_id is None else (audit_log.c.key_id == key_id,)
        with self.read() as conn:
            return _count(conn, audit_log, *where)

    def audit_rows(
        self, key_id: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        q = select(audit_log).order_by(audit_log.c.id)
        if key_id is not None:
            q = q.where(audit_log.c.key_id == key_id)
        if limit is not None:
            q = q.limit(limit)
        with self.read() as conn:
            rows = conn.execute(q).mappings().all()
        out = []
        for r in rows:
            d = dict(r)
            for col in ("defenses", "chunk_ids", "decisions"):
                d[col] = json.loads(d[col])
            out.append(d)
        return out

    def served_chunk_ids(self, key_id: str) -> list[str]:
        with self.read() as conn:
            rows = conn.execute(
                select(served_chunks.c.chunk_id).where(served_chunks.c.key_id == key_id)
            ).all()
        return [r.chunk_id for r in rows]
