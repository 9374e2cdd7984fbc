"""One VectorStore suite, run unchanged against FAISS and PostgreSQL + pgvector.

The pgvector cases run on a real local server (``pgserver``, the ``pg_uri`` fixture of
conftest.py) and skip, with the reason, only when it cannot start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragshield.embed.base import l2_normalize
from ragshield.errors import InputError
from ragshield.store.faiss_store import FaissStore
from ragshield.store.persist import load_store
from ragshield.types import Passage

DIM = 16


_counter = iter(range(10**6))


@pytest.fixture(params=["faiss", "pgvector-hnsw", "pgvector-exact"])
def make_store(request: pytest.FixtureRequest) -> Iterator[Any]:
    made: list[Any] = []

    def factory() -> Any:
        if request.param == "faiss":
            return FaissStore(DIM)
        from ragshield.store.pgvector_store import PgVectorStore

        uri = request.getfixturevalue("pg_uri")
        store = PgVectorStore(
            uri,
            DIM,
            table=f"t{next(_counter)}",
            exact=request.param.endswith("exact"),
            ef_search=100,
        )
        made.append(store)
        return store

    yield factory
    for s in made:
        s.close()


def _data(n: int, seed: int = 0) -> tuple[list[Passage], np.ndarray]:
    rng = np.random.default_rng(seed)
    vecs = l2_normalize(rng.normal(size=(n, DIM)))
    return [
        Passage(f"p{i}", f"text {i}", "t", {"i": i, "even": i % 2 == 0}) for i in range(n)
    ], vecs


def test_add_search_len(make_store: Any) -> None:
    store = make_store()
    ps, vecs = _data(100)
    store.add(ps, vecs)
    assert len(store) == 100 and store.dim == DIM
    hits = store.search(vecs[:3], 5)
    exact = np.argsort(-(vecs[:3] @ vecs.T), axis=1)[:, :5]
    for row, ex in zip(hits, exact, strict=True):
        assert row[0].id == f"p{ex[0]}"
        assert len({h.id for h in row} & {f"p{i}" for i in ex}) >= 4
        assert [h.rank for h in row] == list(range(5))
        assert row[0].score == pytest.approx(1.0, abs=1e-4)
        assert np.allclose(row[0].embedding, vecs[int(row[0].id[1:])], atol=1e-5)
        assert row[0].passage.metadata["i"] == int(row[0].id[1:])


def test_export_is_every_row_in_insertion_order(make_store: Any) -> None:
    """``export()`` is how the scan copies an index (no SQL outside ``store/``)."""
    store = make_store()
    ps, vecs = store.export()
    assert ps == [] and vecs.shape[0] == 0
    ps, vecs = _data(20, seed=3)
    store.add(ps[:12], vecs[:12])
    store.add(ps[12:], vecs[12:])
    got, got_vecs = store.export()
    assert [p.id for p in got] == [p.id for p in ps]
    assert got[5].metadata == {"i": 5, "even": False} and got[5].title == "t"
    assert got_vecs.dtype == np.float32 and np.allclose(got_vecs, vecs, atol=1e-6)


def test_bad_input(make_store: Any) -> None:
    store = make_store()
    with pytest.raises(InputError, match="empty"):
        store.search(np.zeros((1, DIM), np.float32), 1)
    ps, vecs = _data(4)
    with pytest.raises(InputError, match="shape"):
        store.add(ps, vecs[:, :3])
    store.add(ps, vecs)
    with pytest.raises(InputError, match=r"k \(5\) must be at most"):
        store.search(vecs[:1], 5)
    with pytest.raises(InputError, match="k must be an int"):
        store.search(vecs[:1], 0)


def test_save_and_reopen(make_store: Any, tmp_path: Path) -> None:
    store = make_store()
    ps, vecs = _data(30)
    store.add(ps, vecs)
    store.save(tmp_path / "idx")
    reopened = load_store(tmp_path / "idx", uri=getattr(store, "uri", None))
    assert len(reopened) == 30
    assert [h.id for h in reopened.search(vecs[4], 3)[0]] == [
        h.id for h in store.search(vecs[4], 3)[0]
    ]


# ---- pgvector-only behaviour (upsert, transactions, filters, HNSW) -----------------------
@pytest.fixture()
def pg_store(pg_uri: str) -> Iterator[Any]:
    from ragshield.store.pgvector_store import PgVectorStore

    store = PgVectorStore(pg_uri, DIM, table=f"t{next(_counter)}", ef_search=100)
    yield store
    store.close()


def test_pg_reingest_is_idempotent_upsert(pg_store: Any) -> None:
    ps, vecs = _data(20)
    pg_store.add(ps, vecs)
    pg_store.add(ps, vecs)
    assert len(pg_store) == 20
    changed = [Passage("p0", "new text")]
    pg_store.add(changed, vecs[:1])
    assert pg_store.search(vecs[0], 1)[0][0].text == "new text"


def test_pg_interrupted_ingest_keeps_old_data(
    pg_store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ps, vecs = _data(10)
    pg_store.add(ps, vecs)

    def crash() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(pg_store, "on_ingest_batch", crash)
    more, more_vecs = _data(50, seed=1)
    more = [Passage(f"n{i}", p.text) for i, p in enumerate(more)]
    with pytest.raises(KeyboardInterrupt):
        pg_store.add(more, more_vecs)
    assert len(pg_store) == 10


def test_pg_hnsw_and_metadata_filter(pg_store: Any) -> None:
    ps, vecs = _data(300)
    pg_store.add(ps, vecs)
    with pytest.raises(InputError, match="maintenance_work_mem must look like"):
        pg_store.build_index(maintenance_work_mem="1GB'; DROP TABLE x; --")
    pg_store.build_index(maintenance_work_mem="256MB")
    hits = pg_store.search(vecs[:20], 10)
    exact = np.argsort(-(vecs[:20] @ vecs.T), axis=1)[:, :10]
    recall = np.mean(
        [
            len({h.id for h in row} & {f"p{i}" for i in ex}) / 10
            for row, ex in zip(hits, exact, strict=True)
        ]
    )
    assert recall >= 0.9
    even = pg_store.search(vecs[1], 5, where={"even": True})[0]
    assert even and all(h.passage.metadata["even"] for h in even)


def test_pg_dimension_mismatch(pg_store: Any) -> None:
    from ragshield.store.pgvector_store import PgVectorStore

    pg_store.add(*_data(2))
    other = PgVectorStore(pg_store.uri, DIM + 1, table=pg_store.table)
    with pytest.raises(InputError, match="another encoder"):
        other.connect()


def test_cli_index_into_pgvector_and_ask(
    pg_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from ragshield.cli import run
    from ragshield.demo import demo_files

    corpus, _ = demo_files()
    table = f"t{next(_counter)}"
    assert (
        run(
            [
                "index",
                str(corpus),
                "--out",
                str(tmp_path / "i"),
                "--store",
                pg_uri,
                "--table",
                table,
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "i" / "meta.json").read_text())["store"] == "pgvector"
    capsys.readouterr()
    assert (
        run(["ask", str(tmp_path / "i"), "Who discovered penicillin?", "--k", "2", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["passages"][0]["id"] == "penicillin"
    assert run(["index", str(corpus), "--out", str(tmp_path / "j"), "--store", "mysql://x"]) == 2


def test_cli_db_status_when_stopped(tmp_path: Path) -> None:
    from ragshield.cli import run

    assert run(["db", "status", "--data", str(tmp_path / "none")]) == 1
