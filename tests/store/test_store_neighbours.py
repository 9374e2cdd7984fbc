"""The one neighbour search the index's statistics share (:mod:`ragshield.store.neighbours`):
the store's FAISS index and the exact product give the same neighbours, a passage is never
its own, and places a search cannot fill say so."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from ragshield.store.neighbours import knn, nearest


def _unit(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _all_pairs(x: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    sim = x[rows] @ x.T
    sim[np.arange(rows.size), rows] = -np.inf
    return np.argsort(-sim, axis=1, kind="stable")[:, :k]


@pytest.mark.parametrize(("n", "k", "block"), [(40, 5, 7), (200, 10, 4096), (12, 11, 3)])
@pytest.mark.parametrize("with_index", [False, True])
def test_knn_is_the_all_pairs_neighbourhood(n: int, k: int, block: int, with_index: bool) -> None:
    x = _unit(n)
    index = None
    if with_index:
        index = faiss.IndexFlatIP(x.shape[1])
        index.add(x)
    sims, rows = knn(x, k, index, block=block)
    assert rows.shape == (n, k) and np.array_equal(rows, _all_pairs(x, np.arange(n), k))
    assert np.all(np.diff(sims, axis=1) <= 1e-6)  # best first
    assert np.allclose(sims, np.take_along_axis(x @ x.T, rows, axis=1), atol=1e-6)


def test_a_sample_of_rows_and_an_index_of_another_size() -> None:
    x = _unit(50, seed=1)
    sample = np.array([3, 17, 40])
    other = faiss.IndexFlatIP(x.shape[1])
    other.add(x[:10])  # not x's index: ignored, the exact search is used
    _, rows = knn(x, 4, other, rows=sample)
    assert np.array_equal(rows, _all_pairs(x, sample, 4))
    assert all(r not in row for r, row in zip(sample, rows, strict=True))


def test_twins_keep_their_place_and_unfilled_places_say_so() -> None:
    x = np.vstack([_unit(3, seed=2)] * 2)  # rows i and i + 3 are identical
    _, rows = knn(x, 2)
    assert [row[0] for row in rows.tolist()] == [3, 4, 5, 0, 1, 2]
    sims, rows = nearest(x[:2], 4, x[:3])  # three passages to give four places
    assert np.all(rows[:, 3] == -1) and np.all(np.isneginf(sims[:, 3]))
    assert np.array_equal(rows[:, 0], [0, 1])  # not excluded: a query may find itself
