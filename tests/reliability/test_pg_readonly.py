"""Opening a pgvector index for reading never writes to the user's database (issue #27,
root cause 4), and a hand-edited pointer is refused in one line (root cause 13).

``scan`` and ``ask`` on a pointer whose table was missing ran ``CREATE EXTENSION`` /
``CREATE TABLE IF NOT EXISTS`` and inserted a ``ragshield_meta`` row. Each case here uses a
database of its own, created empty, and checks it is still empty afterwards.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragshield.errors import InputError, RagshieldError
from ragshield.store.persist import load_store, write_meta_dir

psycopg = pytest.importorskip("psycopg")
_N = itertools.count()


def _fresh_db(pg_uri: str) -> str:
    name = f"ragshield_ro_{next(_N)}"
    with psycopg.connect(pg_uri, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name}")
        c.execute(f"CREATE DATABASE {name}")
    head, sep, query = pg_uri.partition("?")
    return f"{head.rpartition('/')[0]}/{name}{sep}{query}"


def _contents(uri: str) -> tuple[list[Any], list[Any]]:
    with psycopg.connect(uri) as c:
        tables = c.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
        ext = c.execute("SELECT extname FROM pg_extension WHERE extname = 'vector'").fetchall()
    return tables, ext


def _pointer(tmp_path: Path, **meta: Any) -> Path:
    out = tmp_path / "idx"
    write_meta_dir(out, {"format_version": 1, "store": "pgvector", "dim": 4, **meta})
    return out


def test_pointer_to_missing_table_creates_nothing(pg_uri: str, tmp_path: Path) -> None:
    uri = _fresh_db(pg_uri)
    before = _contents(uri)
    assert before == ([], [])
    store = load_store(_pointer(tmp_path, uri=uri, table="nosuch"))
    with pytest.raises(InputError, match=r"nosuch .*does not exist; nothing was created"):
        store.search(np.ones((1, 4), dtype=np.float32), 1)
    assert _contents(uri) == before


def test_existing_index_opens_read_only(pg_uri: str, tmp_path: Path) -> None:
    from ragshield.store.pgvector_store import PgVectorStore
    from ragshield.types import Passage

    uri = _fresh_db(pg_uri)
    built = PgVectorStore(uri, 4, table="ro_ok")
    vecs = np.eye(4, dtype=np.float32)
    built.add([Passage(f"p{i}", f"text {i}") for i in range(4)], vecs)
    built.save(tmp_path / "idx")
    built.close()
    before = _contents(uri)
    store = load_store(tmp_path / "idx")
    hits = store.search(vecs[2:3], 1)
    assert hits[0][0].passage.id == "p2"
    assert store.connect().read_only
    store.close()
    assert _contents(uri) == before


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        ({"table": "t"}, "lacks 'uri'"),
        ({"uri": "postgresql://x@127.0.0.1:1/db"}, "lacks 'table'"),
        ({"uri": "postgresql://x@127.0.0.1:1/db", "table": "t", "hnsw_m": "abc"}, "'hnsw_m'"),
        ({"uri": "postgresql://x@127.0.0.1:1/db", "table": "t", "ef_search": 10**30}, "ef_search"),
        ({"uri": "\x00garbage", "table": "t"}, "not a PostgreSQL address"),
        ({"uri": ["a"], "table": "t"}, "'uri' must be a str"),
        ({"uri": "postgresql://x@127.0.0.1:1/db", "table": "Robert'); DROP"}, "identifier"),
    ],
)
def test_hand_edited_pointer_is_refused(
    tmp_path: Path, meta: dict[str, Any], match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGSHIELD_PG_URI", raising=False)
    json.dumps(meta)  # every case is a pointer a user could write by hand
    with pytest.raises(InputError, match=match):
        load_store(_pointer(tmp_path, **meta))


def test_garbage_dsn_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("pgvector")
    monkeypatch.delenv("RAGSHIELD_PG_URI", raising=False)
    store = load_store(_pointer(tmp_path, uri="host=127.0.0.1 port=notaport", table="t"))
    with pytest.raises(RagshieldError, match="cannot connect to PostgreSQL"):
        store.connect()
