"""The service's tables on SQLite and on a real PostgreSQL, through the same assertions.

The PostgreSQL cases use a local server from ``pgserver`` (the [pg] extra; ``pg_uri`` in
conftest.py) and skip, with the reason, only when it cannot start. Each test gets a fresh
database on that server, so tests stay independent. What is checked: versioned migration,
API keys (create / verify / revoke), fixed-window budgets under concurrency, blocks, the
served-chunk ledger and novelty, the audit log, and ``ragshield serve``'s service reading a
``postgresql+psycopg://`` storage URL from its config file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from tests.reliability._server_env import FAST_AUTH, FAST_AUTH_TOML, fresh_pg_url

from ragshield.errors import InputError
from ragshield.server.auth import AuthError, KeyManager
from ragshield.server.config import AuthConfig, load_config
from ragshield.server.db import (
    SCHEMA_VERSION,
    AuditRecord,
    Database,
    StorageError,
    rate_windows,
    sqlalchemy_url,
)

FAST = AuthConfig(**FAST_AUTH)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'k.db'}"
    return fresh_pg_url(request.getfixturevalue("pg_uri"))


@pytest.fixture
def db(url: str) -> Iterator[Database]:
    d = Database(url)
    d.migrate()
    yield d
    d.close()


def _audit(key_id: str, ts: float, *, endpoint: str = "ask", **kw: Any) -> AuditRecord:
    fields: dict[str, Any] = {
        "request_id": f"r{ts:g}",
        "key_id": key_id,
        "ts": ts,
        "endpoint": endpoint,
        "status": 200,
        "outcome": "ok",
        "question_hash": "0" * 64,
        "k": 5,
        "defenses": ["ragdefender"],
        "chunk_ids": [],
        "decisions": [],
        "novelty": None,
        "coverage": None,
        "reason": None,
        "latency_ms": 1.5,
    }
    return AuditRecord(**(fields | kw))


# ---- URLs -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://postgres:@/postgres?host=/tmp/d", "postgresql+psycopg://postgres:@/postgres?host=/tmp/d"),
        ("postgres://u:p@db:5432/rag", "postgresql+psycopg://u:p@db:5432/rag"),
        ("postgresql+psycopg://u@h/rag", "postgresql+psycopg://u@h/rag"),
        ("postgresql+psycopg2://u@h/rag", "postgresql+psycopg2://u@h/rag"),
        ("sqlite:///x.db", "sqlite:///x.db"),
    ],
)  # fmt: skip
def test_sqlalchemy_url_takes_the_uri_db_start_prints(given: str, expected: str) -> None:
    assert sqlalchemy_url(given) == expected


# ---- migration --------------------------------------------------------------------------
def test_migrations_are_versioned_and_idempotent(db: Database) -> None:
    assert db.schema_version() == SCHEMA_VERSION == 3
    assert db.migrate() == 3  # second run applies nothing
    with db.read() as conn:
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM schema_version").scalar() == SCHEMA_VERSION
        )
        if conn.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    assert db.ping()


def test_a_second_process_migrating_at_once_applies_each_step_once(url: str) -> None:
    dbs = [Database(url) for _ in range(4)]
    with ThreadPoolExecutor(max_workers=len(dbs)) as pool:  # a worker's error is raised here
        versions = list(pool.map(Database.migrate, dbs))
    assert versions == [SCHEMA_VERSION] * 4
    with dbs[0].read() as conn:
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM schema_version").scalar() == SCHEMA_VERSION
        )
    for d in dbs:
        d.close()


# ---- keys -------------------------------------------------------------------------------
def test_keys_create_verify_revoke(db: Database) -> None:
    """Create, check, list and revoke on both backends; a revoke by another process takes
    effect even after the serving process cached a successful check."""
    keys = KeyManager(db, FAST)
    key_id, token = keys.create("alice", scopes="ask,admin", rpm=5)
    row = db.get_key(key_id)
    assert row is not None and row.secret_hash.startswith("$argon2id$")
    assert token.split("_", 2)[2] not in row.secret_hash
    assert row.scopes == ("ask", "admin") and row.rpm == 5 and row.rpd is None
    key = keys.authenticate(token)
    assert key.id == key_id and key.name == "alice"
    assert keys.authenticate(token).id == key_id  # second check: cached digest path
    other_id, _ = keys.create("bob")
    assert [r.id for r in db.list_keys()] == [key_id, other_id]

    KeyManager(db, FAST).revoke(key_id)  # another process (the CLI) revokes
    with pytest.raises(AuthError, match="revoked"):
        keys.authenticate(token)
    with pytest.raises(InputError, match="already revoked"):
        keys.revoke(key_id)
    with pytest.raises(InputError, match="no API key"):
        keys.revoke("ffffffffffff")
    assert db.revoke_key(key_id, 1.0) is False


# ---- budgets ----------------------------------------------------------------------------
def test_budget_is_exact_under_concurrency(db: Database) -> None:
    def five(_: int) -> list[bool]:
        return [db.consume("k1", [("minute", 60.0, 20)], now=120.0).allowed for _ in range(5)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        allowed = [ok for oks in pool.map(five, range(8)) for ok in oks]
    assert allowed.count(True) == 20 and len(allowed) == 40
    refused = db.consume("k1", [("minute", 60.0, 20)], now=150.0)
    assert not refused.allowed and refused.retry_after == 30.0 and refused.window == "minute"
    assert db.consume("k1", [("minute", 60.0, 20)], now=180.0).allowed  # new window


def test_day_window_refusal_does_not_spend_the_minute(db: Database) -> None:
    windows = [("minute", 60.0, 10), ("day", 86_400.0, 1)]
    assert db.consume("k", windows, now=0.0).allowed
    assert not db.consume("k", windows, now=1.0).allowed
    assert db.consume("k", [("minute", 60.0, None)], now=2.0).allowed  # no limit: no row
    with db.read() as conn:
        counts = dict(conn.execute(select(rate_windows.c.window, rate_windows.c["count"])).all())
    assert counts == {"minute": 1, "day": 1}


# ---- blocks -----------------------------------------------------------------------------
def test_block_unblock_and_usage(db: Database) -> None:
    assert db.block_state("k") == (None, None)
    db.block("k", 500.0, "signature: repeat-context")
    db.block("k", 400.0, "coverage")  # an earlier end never shortens a block
    assert db.block_state("k") == (500.0, "coverage")
    assert db.blocked_keys(now=450.0) == 1 and db.blocked_keys(now=600.0) == 0
    db.record(_audit("k", 10.0, outcome="refused", status=429))
    db.record(_audit("k", 11.0))
    usage = db.key_usage("k", since=0.0)
    assert usage == {
        "requests": 2,
        "throttled": 1,
        "blocked_until": 500.0,
        "block_reason": "coverage",
        "strikes": 2,
    }
    assert db.unblock("k") and db.block_state("k") == (None, None)
    assert not db.unblock("nobody")


# ---- served-chunk ledger and audit log --------------------------------------------------
def test_ledger_novelty_coverage_and_audit(db: Database) -> None:
    long_id = "corpus/" + "x" * 600 + "#7"  # ids are the corpus's own; some are long
    assert db.record(_audit("k", 100.0), served=["a", "b", "c", "a"]) == 1.0
    assert db.record(_audit("k", 200.0), served=["b", "d", long_id, "e"]) == 0.75
    assert db.record(_audit("other", 200.0), served=["a"]) == 1.0  # per key
    db.record(_audit("k", 250.0, endpoint="filter", novelty=None))
    assert sorted(db.served_chunk_ids("k")) == sorted(["a", "b", "c", "d", "e", long_id])
    assert db.coverage("k", since=0.0) == 6
    assert db.coverage("k", since=150.0) == 4  # b was served again at 200
    assert db.recent_novelty("k", 5, since=0.0) == [0.75, 1.0]  # newest first, asks only
    assert db.recent_novelty("k", 1, since=0.0) == [0.75]
    assert db.count_audit() == 4 and db.count_audit("k") == 3

    decisions = [{"defense": "ragdefender", "id": "z", "scores": {"suspicion": 0.9}}]
    db.record(_audit("k", 300.0, chunk_ids=["a", "b"], decisions=decisions, reason="ok"))
    rows = db.audit_rows("k")
    assert [r["ts"] for r in rows] == [100.0, 200.0, 250.0, 300.0]  # insertion order
    assert rows[-1]["chunk_ids"] == ["a", "b"] and rows[-1]["decisions"] == decisions
    assert rows[-1]["defenses"] == ["ragdefender"] and rows[0]["novelty"] == 1.0
    assert len(db.audit_rows(limit=2)) == 2
    ids = [r["id"] for r in db.audit_rows()]
    assert ids == sorted(ids) and len(set(ids)) == 5  # autoincrement ids


def test_concurrent_records_keep_every_audit_row_and_a_consistent_ledger(db: Database) -> None:
    chunks = [f"c{i}" for i in range(11)]

    def worker(w: int) -> None:
        for j in range(6):  # overlapping chunk sets in different orders
            served = chunks[(w + j) % 6 :][:6]
            db.record(_audit("k", float(w * 10 + j)), served=served[:: (-1) ** w])

    with ThreadPoolExecutor(max_workers=6) as pool:  # a worker's error is raised here
        list(pool.map(worker, range(6)))
    assert db.count_audit("k") == 36
    assert sorted(db.served_chunk_ids("k")) == sorted(chunks)


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate  # what psycopg's errors carry


@pytest.mark.parametrize(
    ("sqlstate", "tries"), [("40P01", 2), ("40001", 2), ("23505", 1)]
)  # deadlock and serialization failure are rerun; a unique violation is not
def test_a_write_aborted_by_the_server_to_break_a_deadlock_is_rerun(
    db: Database, sqlstate: str, tries: int
) -> None:
    from sqlalchemy.exc import OperationalError

    calls: list[int] = []

    def work(conn: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("INSERT ...", {}, _PgError(sqlstate))
        return "done"

    if tries == 1:
        with pytest.raises(StorageError, match=f"sqlstate {sqlstate}"):
            db.retried(work)
    else:
        assert db.retried(work) == "done"
    assert len(calls) == tries


# ---- the service on PostgreSQL (what `ragshield serve --config` builds) -----------------
def test_service_uses_a_postgresql_storage_url_from_its_config(
    pg_uri: str, tmp_path: Path, encoder: Any
) -> None:
    from fastapi.testclient import TestClient

    from ragshield.server import Service, create_app
    from ragshield.store.faiss_store import FaissStore
    from ragshield.types import Passage

    texts = ["Canberra is the capital of Australia.", "Sydney has the Opera House."]
    store = FaissStore(encoder.dim, encoder_name=encoder.name)
    store.add([Passage(f"p{i}", t) for i, t in enumerate(texts)], encoder.encode(texts))
    store.save(tmp_path / "idx")
    pg_url = fresh_pg_url(pg_uri)
    cfg_file = tmp_path / "server.toml"
    cfg_file.write_text(
        f'index = "idx"\n[storage]\nurl = "{pg_url}"\n{FAST_AUTH_TOML}', encoding="utf-8"
    )
    cfg = load_config(cfg_file)
    assert cfg.storage.resolved_url() == pg_url
    service = Service.from_config(cfg, encoder=encoder)
    try:
        assert service.db.engine.dialect.name == "postgresql"
        _, token = service.keys.create("alice")
        client = TestClient(create_app(service))
        health = client.get("/v1/health").json()
        assert health["status"] == "ok" and health["schema_version"] == SCHEMA_VERSION
        r = client.post(
            "/v1/ask",
            json={"question": "What is the capital of Australia?", "k": 2},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 200, r.text
        (row,) = service.db.audit_rows()
        assert row["outcome"] == "ok" and row["chunk_ids"] == r.json()["passage_ids"]
        assert service.db.coverage(row["key_id"], 0.0) == len(row["chunk_ids"])
    finally:
        service.close()


def test_keys_cli_takes_the_plain_uri_db_start_prints(pg_uri: str) -> None:
    from typer.testing import CliRunner

    from ragshield.server.cli import keys_app

    plain = fresh_pg_url(pg_uri).replace("postgresql+psycopg://", "postgresql://", 1)
    runner = CliRunner()
    made = runner.invoke(keys_app, ["create", "carol", "--db", plain])
    assert made.exit_code == 0, made.output
    listed = runner.invoke(keys_app, ["list", "--json", "--db", plain])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert row["name"] == "carol" and row["revoked"] is False


def test_v1_database_upgrades_to_long_chunk_ids(url: str) -> None:
    """A database a v1 server created (VARCHAR(255) chunk ids on PostgreSQL) migrates to v2
    in place and then takes ids of any length."""
    from sqlalchemy import Column, Float, MetaData, String, Table, insert

    from ragshield.server import tables as dbm

    d = Database(url)
    with d.write() as conn:
        old = MetaData()
        Table("schema_version", old, Column("version", dbm.Integer, primary_key=True),
              Column("applied_at", Float, nullable=False))  # fmt: skip
        Table("served_chunks", old, Column("key_id", String(32), primary_key=True),
              Column("chunk_id", String(255), primary_key=True),
              Column("first_at", Float, nullable=False), Column("last_at", Float, nullable=False))  # fmt: skip
        old.create_all(conn)
        dbm.metadata.create_all(
            conn, tables=[dbm.api_keys, dbm.rate_windows, dbm.key_state, dbm.audit_log]
        )
        conn.execute(insert(old.tables["schema_version"]).values(version=1, applied_at=0.0))
    assert d.schema_version() == 1
    assert d.migrate() == SCHEMA_VERSION
    long_id = "y" * 1000
    assert d.record(_audit("k", 1.0), served=[long_id]) == 1.0
    assert d.served_chunk_ids("k") == [long_id]
    d.close()
