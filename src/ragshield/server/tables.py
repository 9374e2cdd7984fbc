"""What the server's database is: its tables, their versioned DDL, and how it is opened.

Why apart from :mod:`ragshield.server.db` (the queries): the schema changes only by
appending a migration, the queries change with every feature; a reader looking for "what
is stored" reads this module alone. SQLite (embedded, WAL mode) is the default; any
SQLAlchemy URL works (PostgreSQL: ``postgresql+psycopg://...``). ``schema_version``
records what was applied and ``Database.migrate`` applies the rest of :data:`MIGRATIONS`
in order, so a newer server upgrades an older database in place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    event,
    insert,
    select,
)
from sqlalchemy.exc import SQLAlchemyError

from ragshield.errors import InputError

metadata = MetaData()


def _key_id(*, primary_key: bool = True) -> Column[str]:
    """The ``key_id`` column every per-key table carries: the type of ``api_keys.id``,
    written once so the tables that point at a key cannot disagree on it."""
    return Column("key_id", String(32), primary_key=primary_key, nullable=False)


schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("applied_at", Float, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("secret_hash", String(255), nullable=False),
    Column("scopes", String(100), nullable=False),
    Column("rpm", Integer, nullable=True),
    Column("rpd", Integer, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float, nullable=True),
)

# one row per (key, window kind): the current fixed window and its count
rate_windows = Table(
    "rate_windows",
    metadata,
    _key_id(),
    Column("window", String(10), primary_key=True),
    Column("start", Float, nullable=False),
    Column("count", Integer, nullable=False),
)

served_chunks = Table(
    "served_chunks",
    metadata,
    _key_id(),
    Column("chunk_id", Text, primary_key=True),  # ids are the corpus's own: no length cap
    Column("first_at", Float, nullable=False),
    Column("last_at", Float, nullable=False),
    Index("ix_served_chunks_key_last", "key_id", "last_at"),
)

key_state = Table(
    "key_state",
    metadata,
    _key_id(),
    Column("blocked_until", Float, nullable=True),
    Column("block_reason", Text, nullable=True),
    Column("strikes", Integer, nullable=False, default=0),
)

audit_log = Table(
    "audit_log",
    metadata,
    # BIGINT on PostgreSQL (a busy service passes 2^31 requests); SQLite's INTEGER rowid is
    # already 64-bit and only autoincrements when declared exactly INTEGER
    Column(
        "id",
        BigInteger().with_variant(Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    Column("request_id", String(32), nullable=False),
    _key_id(primary_key=False),
    Column("ts", Float, nullable=False),
    Column("endpoint", String(20), nullable=False),
    Column("status", Integer, nullable=False),
    # admitted (charged, not finished) | ok | slowed | refused | rate_limited | rejected |
    # error; status 0 while admitted
    Column("outcome", String(20), nullable=False),
    Column("question_hash", String(64), nullable=False),
    Column("k", Integer, nullable=True),
    Column("defenses", Text, nullable=False),  # JSON list of names
    Column("chunk_ids", Text, nullable=False),  # JSON list: what reached the generator
    Column("decisions", Text, nullable=False),  # JSON list of removals (no passage text)
    Column("novelty", Float, nullable=True),
    Column("coverage", Integer, nullable=True),
    Column("reason", Text, nullable=True),
    Column("latency_ms", Float, nullable=False),
    Index("ix_audit_key_id", "key_id", "id"),
)


def _v1(conn: Connection) -> None:
    metadata.create_all(
        conn,
        tables=[api_keys, rate_windows, served_chunks, key_state, audit_log],
    )


def _v2(conn: Connection) -> None:
    """Chunk ids of any length, 64-bit audit ids. SQLite enforces neither limit, so only
    PostgreSQL databases created by v1 change (fresh ones already have these types)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("ALTER TABLE served_chunks ALTER COLUMN chunk_id TYPE TEXT")
        conn.exec_driver_sql("ALTER TABLE audit_log ALTER COLUMN id TYPE BIGINT")


def _v3(conn: Connection) -> None:
    """An index on the audit timestamp, for retention pruning."""
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_audit_ts ON audit_log (ts)")


# Versioned DDL: append (version, step); never edit an applied step.
MIGRATIONS: tuple[tuple[int, Callable[[Connection], None]], ...] = (
    (1, _v1),
    (2, _v2),
    (3, _v3),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]
# PostgreSQL advisory-lock key held while migrating (any constant shared by all replicas)
MIGRATION_LOCK = 0x7261_6773_6869_656C  # "ragshiel"


def sqlalchemy_url(url: str) -> str:
    """The SQLAlchemy URL of a database URI: ``postgresql://`` / ``postgres://`` (what
    ``ragshield db start`` and most hosting providers print) gain the ``+psycopg`` driver
    the [pg] extra installs; SQLAlchemy 2.0 would otherwise look for psycopg2. URLs that
    name a driver, and every other backend, pass through unchanged."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme) :]
    return url


def _check_sqlite_file(url: str) -> None:
    """A SQLite URL must name a new file or a SQLite database: SQLite opens anything else,
    fails with "file is not a database" and leaves -wal/-shm files beside the user's file
    (benchmarks/hostile_pass.py, issue #27)."""
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return
    path = Path(url[len("sqlite:///") :].split("?", 1)[0])
    try:
        if path.is_dir():
            raise InputError(f"storage {path} is a folder; name a database file.")
        if path.is_file() and path.stat().st_size > 0:
            with path.open("rb") as fh:
                if fh.read(16) != b"SQLite format 3\x00":
                    raise InputError(
                        f"storage {path} exists and is not a SQLite database; refusing to "
                        "open it (nothing was written)."
                    )
    except OSError as exc:
        raise InputError(f"storage {str(path)[:200]}: {exc.strerror or exc}") from None


def make_engine(url: str) -> Engine:
    """An engine with SQLite tuned for a threaded server (WAL, busy timeout, IMMEDIATE).

    PostgreSQL needs no such tuning: its row locks (``SELECT ... FOR UPDATE`` in
    :meth:`Database.consume` and :meth:`Database.block`) serialise concurrent writers.
    """
    url = sqlalchemy_url(url)
    _check_sqlite_file(url)
    try:
        # a server that accepts TCP and never answers fails after 10 s, not never (libpq
        # waits forever by default; issue #27, root cause 5)
        pg = {"connect_args": {"connect_timeout": 10}} if url.startswith("postgresql") else {}
        engine = create_engine(url, pool_pre_ping=not url.startswith("sqlite"), **pg)
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise InputError(f"storage url {url!r} is not usable: {exc}") from None
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" hook issues BEGIN
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout = 30000")
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            mode = conn.get_execution_options().get("sqlite_begin", "IMMEDIATE")
            conn.exec_driver_sql(f"BEGIN {mode}")

    return engine


def insert_ignore(conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """INSERT that skips rows whose primary key exists (concurrent first writes race)."""
    name = conn.dialect.name
    if name == "sqlite":
        from sqlalchemy.dialects import sqlite

        conn.execute(sqlite.insert(table).on_conflict_do_nothing(), rows)
        return
    if name == "postgresql":
        from sqlalchemy.dialects import postgresql

        conn.execute(postgresql.insert(table).on_conflict_do_nothing(), rows)
        return
    # other backends: plain insert of the rows not present (no upsert syntax)
    pk = [c.name for c in table.primary_key.columns]
    for row in rows:  # pragma: no cover
        cond = [table.c[c] == row[c] for c in pk]
        if conn.execute(select(table).where(*cond)).first() is None:
            conn.execute(insert(table).values(**row))
