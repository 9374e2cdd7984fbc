"""The service builds its pipeline through ragshield.config, like ``ragshield ask``: it serves
a pgvector index (a real local PostgreSQL via pgserver; skipped with the reason when it cannot
start) and a RAGFort re-index with its query encoder; the shipped example config defends by
default; /v1/filter without a filter is a 400."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from tests.reliability._server_env import FAST_AUTH

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.errors import InputError
from ragshield.indexing import build_index
from ragshield.server import Service, create_app, load_config
from ragshield.types import Passage

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "server.toml"
ATTACK = json.loads(demo_files()[1].read_text(encoding="utf-8"))


def _service(tmp: Path, encoder: Any = None, config: Path | None = None, **over: Any) -> Service:
    tmp.mkdir(parents=True, exist_ok=True)
    over.setdefault("auth", FAST_AUTH)
    over.setdefault("storage", {"sqlite_path": str(tmp / "s.db")})
    return Service.from_config(load_config(config, **over), encoder=encoder)


def _ask(service: Service, question: str, **body: Any) -> dict[str, Any]:
    client = TestClient(create_app(service))
    _, token = service.keys.create("t")
    r = client.post(
        "/v1/ask",
        json={"question": question, **body},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


@pytest.fixture(scope="module")
def attacked_index(tmp_path_factory: pytest.TempPathFactory, encoder: Any) -> Path:
    poison = [Passage(f"attack-{i}", t) for i, t in enumerate(ATTACK["adv_texts"])]
    out = tmp_path_factory.mktemp("srvp") / "idx"
    build_index(read_corpus(demo_files()[0]) + poison, out, encoder=encoder)
    return out


def test_example_config_defends_and_filter_needs_a_filter(
    attacked_index: Path, tmp_path: Path, encoder: Any
) -> None:
    service = _service(tmp_path, encoder, EXAMPLE, index=str(attacked_index))
    try:
        assert service.config.defenses.chain == ["ragdefender", "ecosaferag", "canary"]
        out = _ask(service, ATTACK["question"])
        assert "Canberra" in out["answer"]
        assert any(d["removed"] for d in out["defenses"])
    finally:
        service.close()
    bare = _service(tmp_path / "b", encoder, index=str(attacked_index), retrieval={"k": 10})
    try:
        assert "Sydney" in _ask(bare, ATTACK["question"])["answer"]  # undefended: attacked
        client = TestClient(create_app(bare))
        _, token = bare.keys.create("f")
        r = client.post(
            "/v1/filter",
            json={"query": "q", "passages": [{"id": "a", "text": "x"}]},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 400
        assert "defenses.chain is empty" in r.json()["detail"]
    finally:
        bare.close()


# ---- pgvector ----------------------------------------------------------------------------
def test_service_serves_a_pgvector_index(pg_uri: str, tmp_path: Path, encoder: Any) -> None:
    idx = tmp_path / "pg-idx"
    build_index(
        read_corpus(demo_files()[0]),
        idx,
        encoder=encoder,
        store_uri=pg_uri,
        table="ragshield_srv_test",
    )
    assert json.loads((idx / "meta.json").read_text())["store"] == "pgvector"
    service = _service(tmp_path, encoder, index=str(idx), defenses={"chain": ["ragdefender"]})
    try:
        from ragshield.store.pgvector_store import PgVectorStore

        assert isinstance(service.store, PgVectorStore) and len(service.store) == 30
        out = _ask(service, "Who painted the Mona Lisa?")
        assert "Leonardo" in out["answer"] and "mona-lisa" in out["passage_ids"]
    finally:
        service.close()


# ---- RAGFort re-index ----------------------------------------------------------------------
TEXTS = [
    "Chest pain spreading to the left arm can be a heart attack.",
    "An ECG shows whether the heart rhythm is irregular.",
    "High blood pressure strains the heart over many years.",
    "Angina is chest pressure when the heart muscle lacks oxygen.",
    "An itchy red rash on the elbows may be eczema.",
    "Psoriasis causes thick silvery scales on the skin.",
    "Acne forms when hair follicles clog with oil and dead skin.",
    "Hives are raised itchy welts that appear after an allergy.",
    "A toothache with swelling may be a dental abscess.",
    "Bleeding gums when brushing are a sign of gingivitis.",
    "The dentist fills a cavity after removing the decay.",
    "Fluoride toothpaste protects teeth against decay.",
]
TRAIN_KW = {  # a few optimiser steps: mechanics, not quality (as tests/reindex/test_reindex.py)
    "batch_size": 12,
    "lr": 1e-4,
    "max_steps": 2,
    "show_progress": False,
    "num_threads": 1,
    "min_cluster_size": 3,
    "val_fraction": 0.0,
}


@pytest.fixture(scope="module")
def reindexed(tmp_path_factory: pytest.TempPathFactory, encoder: Any) -> Path:
    from ragshield.reindex import reindex

    root = tmp_path_factory.mktemp("ragfort")
    base = root / "base"
    build_index([Passage(f"p{i}", t) for i, t in enumerate(TEXTS)], base, encoder=encoder)
    reindex(base, root / "new", symmetric=True, **TRAIN_KW)
    return root / "new"


def test_service_serves_a_ragfort_reindex_with_its_query_encoder(
    reindexed: Path, tmp_path: Path
) -> None:
    service = _service(
        tmp_path, index=str(reindexed), defenses={"chain": ["ragfort-reindex", "ragdefender"]}
    )
    try:
        # the symmetric re-index names its trained encoder for queries
        assert str(service.encoder.path) == str(reindexed / "encoder")  # type: ignore[attr-defined]
        assert np.allclose(service.encoder.encode(TEXTS[:2]), service.store.vectors[:2], atol=1e-5)  # type: ignore[attr-defined]
        out = _ask(service, "my gums bleed when I brush")
        assert out["passage_ids"] and "ragfort-reindex" in service.health()["defenses"]
    finally:
        service.close()
    # the paper's asymmetric variant from the same folder, by a parameter
    base_q = _service(
        tmp_path / "b",
        index=str(reindexed),
        defenses={"chain": ["ragfort-inter"], "params": {"ragfort-inter": {"symmetric": False}}},
    )
    try:
        assert base_q.encoder.name == "all-MiniLM-L6-v2"
    finally:
        base_q.close()


def test_ragfort_on_a_plain_index_or_only_allowed_is_refused(
    attacked_index: Path, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match="not a RAGFort re-index"):
        _service(tmp_path, index=str(attacked_index), defenses={"chain": ["ragfort-inter"]})
    with pytest.raises(InputError, match=r"put it in defenses\.chain"):
        _service(tmp_path, index=str(attacked_index), defenses={"allowed": ["ragfort"]})
