"""FAISS store: search correctness against numpy, persistence, atomic writes, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragshield.embed.base import l2_normalize
from ragshield.errors import InputError
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage


def _data(n: int = 200, dim: int = 16, seed: int = 0) -> tuple[list[Passage], np.ndarray]:
    rng = np.random.default_rng(seed)
    vecs = l2_normalize(rng.normal(size=(n, dim)))
    return [Passage(f"p{i}", f"text {i}", metadata={"i": i}) for i in range(n)], vecs


@pytest.mark.parametrize("index_type", ["flat", "hnsw"])
def test_search_matches_numpy(index_type: str) -> None:
    ps, vecs = _data()
    store = FaissStore(16, index_type)  # type: ignore[arg-type]
    store.add(ps, vecs)
    q = vecs[:5] + 0.01
    hits = store.search(q, 10)
    exact = np.argsort(-(l2_normalize(q) @ vecs.T), axis=1)[:, :10]
    for row, ex in zip(hits, exact, strict=True):
        got = [int(h.id[1:]) for h in row]
        overlap = len(set(got) & set(ex.tolist())) / 10
        assert overlap >= (1.0 if index_type == "flat" else 0.9)
        assert [h.rank for h in row] == list(range(10))
        assert row[0].embedding is not None and row[0].embedding.shape == (16,)


def test_ivf_needs_training_data() -> None:
    ps, vecs = _data(50)
    with pytest.raises(InputError, match="nlist"):
        FaissStore(16, "ivf", nlist=64).add(ps, vecs)
    store = FaissStore(16, "ivf", nlist=4, nprobe=4)
    store.add(ps, vecs)
    assert store.search(vecs[:1], 1)[0][0].id == "p0"


def test_save_load_roundtrip(tmp_path: Path) -> None:
    ps, vecs = _data()
    store = FaissStore(16, encoder_name="enc")
    store.add(ps, vecs)
    store.save(tmp_path / "idx")
    loaded = FaissStore.load(tmp_path / "idx")
    assert len(loaded) == 200 and loaded.encoder_name == "enc"
    assert loaded.passages[3] == ps[3]
    a = [h.id for h in store.search(vecs[7], 5)[0]]
    b = [h.id for h in loaded.search(vecs[7], 5)[0]]
    assert a == b
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_failed_save_leaves_old_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ps, vecs = _data(20)
    store = FaissStore(16)
    store.add(ps, vecs)
    store.save(tmp_path / "idx")
    bigger = FaissStore(16)
    bigger.add(*_data(30, seed=1))

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", boom)
    with pytest.raises(OSError, match="disk full"):
        bigger.save(tmp_path / "idx")
    assert len(FaissStore.load(tmp_path / "idx")) == 20
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


@pytest.mark.parametrize(
    ("k", "match"),
    [
        (0, "k must be an int >= 1"),
        (True, "k must be an int"),
        (21, r"k \(21\) must be at most .* \(20\)"),
    ],
)
def test_bad_k(k: object, match: str) -> None:
    ps, vecs = _data(20)
    store = FaissStore(16)
    store.add(ps, vecs)
    with pytest.raises(InputError, match=match):
        store.search(vecs[:1], k)  # type: ignore[arg-type]


def test_bad_adds_and_empty() -> None:
    store = FaissStore(16)
    with pytest.raises(InputError, match="empty"):
        store.search(np.zeros((1, 16), np.float32), 1)
    ps, vecs = _data(3)
    with pytest.raises(InputError, match="shape"):
        store.add(ps, vecs[:, :8])
    with pytest.raises(InputError, match="3 passages but 2 vectors"):
        store.add(ps, vecs[:2])
    store.add(ps, vecs)
    with pytest.raises(InputError, match="duplicate"):
        store.add(ps[:1], vecs[:1])
    with pytest.raises(InputError, match="index_type"):
        FaissStore(16, "lsh")  # type: ignore[arg-type]


def test_load_not_an_index(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a ragshield index"):
        FaissStore.load(tmp_path)
