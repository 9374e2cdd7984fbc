"""Shared set-up of the service reliability tests: the demo index, a service factory and a
concurrent ASGI client (real encoder, FAISS, SQLite or PostgreSQL, argon2 at a low cost).

Test modules import the fixtures under their function names (``make_fixture``); pytest
knows them by ``name=`` (``make``), so no parameter shadows an import. ``tests/server``
takes its argon2 settings, ``bearer`` and the demo index from here too."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.indexing import build_index
from ragshield.server import Service, load_config
from ragshield.server.db import sqlalchemy_url

# argon2 at its lowest cost: key hashing in milliseconds (the tests check behaviour, not cost);
# the same settings as a config file's [auth] table, for tests that write one
FAST_AUTH = {"argon2_time_cost": 1, "argon2_memory_kib": 8, "argon2_parallelism": 1}
FAST_AUTH_TOML = "[auth]\n" + "".join(f"{k} = {v}\n" for k, v in FAST_AUTH.items())


@pytest.fixture(scope="module", name="demo_index")
def demo_index_fixture(tmp_path_factory: pytest.TempPathFactory, encoder: Any) -> Path:
    out = tmp_path_factory.mktemp("server") / "demo-index"
    build_index(read_corpus(demo_files()[0]), out, encoder=encoder)
    return out


@pytest.fixture(name="make")
def make_fixture(
    tmp_path: Path, encoder: Any, demo_index: Path
) -> Iterator[Callable[..., Service]]:
    """``make(**config overrides) -> Service`` on a fresh SQLite file (or ``storage=...``)."""
    made: list[Service] = []

    def _make(**overrides: Any) -> Service:
        overrides.setdefault("auth", FAST_AUTH)
        overrides.setdefault("storage", {"sqlite_path": str(tmp_path / f"s{len(made)}.db")})
        cfg = load_config(None, index=str(demo_index), **overrides)
        service = Service.from_config(cfg, encoder=encoder)
        made.append(service)
        return service

    yield _make
    for s in made:
        s.close()


def fresh_pg_url(uri: str) -> str:
    """A SQLAlchemy URL on a fresh schema of the test server (tests stay independent).

    (A schema, not a database: CREATE DATABASE copies a template and makes the server's
    shutdown checkpoint slow.)"""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    # random, not counted: pytest imports this module twice (as reliability._server_env by
    # the relative imports, tests.reliability._server_env from tests/server), and two
    # counters on the one session server handed out the same name
    name = f"ragshield_rel_{uuid.uuid4().hex[:16]}"
    admin = create_engine(sqlalchemy_url(uri))
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {name}")
    admin.dispose()
    url = make_url(sqlalchemy_url(uri)).update_query_dict({"options": f"-csearch_path={name}"})
    return url.render_as_string(hide_password=False)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def burst(
    app: Any,
    requests: Sequence[tuple[str, str, dict[str, Any] | None, dict[str, str]]],
    client_host: str = "127.0.0.1",
) -> list[httpx.Response]:
    """Send ``(method, path, json, headers)`` requests all at once through the ASGI app."""

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, client=(client_host, 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await asyncio.gather(
                *[client.request(m, p, json=j, headers=h) for m, p, j, h in requests]
            )

    return asyncio.run(run())
