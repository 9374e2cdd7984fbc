"""Nearest neighbours among an index's own vectors: the one search its statistics share.

Example::

    from ragshield.store.neighbours import knn, nearest

    sims, rows = knn(x, 10, store.neighbour_index())   # every passage's 10 nearest others
    sims, rows = knn(x, 4, rows=sample)                  # a sample's, exact
    sims, rows = nearest(new, 10, x)                     # passages not in the index yet

Why one module: the index profile (:mod:`.profile`: the 1st-9th nearest-neighbour cosines)
and the novelty table (:mod:`.calibration_novelty`: each passage's ten neighbours) read the
same neighbourhoods; they used to search them two ways (a NumPy matrix product per block
and a FAISS index), and the novelty table's added passages a third (their own product and
partition). All now ask :func:`nearest`: the store's own FAISS index when given (what
``ragshield index`` searches; HNSW: sub-quadratic), else an exact NumPy product per block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BLOCK = 4096  # queries per search call: memory block × k results, not block × n cosines


def nearest(
    queries: np.ndarray,
    k: int,
    base: np.ndarray | None = None,
    index: Any = None,
    *,
    exclude: np.ndarray | None = None,
    block: int = BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """``(cosines, rows)``, each ``(len(queries), k)``, best first: each query's ``k``
    nearest rows of ``base`` (unit vectors), by ``index``'s search when given (a FAISS index
    holding ``base`` in order) else exactly (:func:`_exact`). ``exclude[i]``: a row query
    ``i`` must not get (itself, when the queries are rows of ``base``; ``-1`` for none),
    dropped wherever the search put it, so an identical twin keeps its place. Places a
    search could not fill are row ``-1``, cosine ``-inf``."""
    m = int(np.shape(queries)[0])
    sims, rows = np.full((m, k), -np.inf, np.float32), np.full((m, k), -1, np.int64)
    if k <= 0 or m == 0:
        return sims, rows
    if index is None:
        return _exact(queries, k, np.asarray(base, dtype=np.float32), exclude, block)
    want = k + (0 if exclude is None else 1)
    for start in range(0, m, block):
        q = np.ascontiguousarray(queries[start : start + block], dtype=np.float32)
        s, i = index.search(q, want)
        keep = i >= 0
        if exclude is not None:
            keep &= i != exclude[start : start + q.shape[0], None]
        order = np.argsort(~keep, axis=1, kind="stable")[:, :k]  # the first k kept, in order
        kept = np.take_along_axis(keep, order, axis=1)
        part = slice(start, start + q.shape[0])
        sims[part] = np.where(kept, np.take_along_axis(s, order, axis=1), -np.inf)
        rows[part] = np.where(kept, np.take_along_axis(i, order, axis=1), -1)
    return sims, rows


def _exact(
    queries: np.ndarray, k: int, base: np.ndarray, exclude: np.ndarray | None, block: int
) -> tuple[np.ndarray, np.ndarray]:
    """Brute force: one matrix product per ``block`` queries (at most 2^26 cosines, 256 MB,
    held at a time), the excluded row set to ``-inf``. NumPy's product, not FAISS's: the
    index profile's bars were measured with it, and the last bit of a p99.9 that one passage
    sets decides whether that passage passes its own bar."""
    m, n = int(np.shape(queries)[0]), base.shape[0]
    k_ = min(k, n)
    sims, rows = np.full((m, k), -np.inf, np.float32), np.full((m, k), -1, np.int64)
    step = max(1, min(block, (1 << 26) // max(n, 1)))
    for start in range(0, m, step):
        sim = np.asarray(queries[start : start + step], dtype=np.float32) @ base.T
        if exclude is not None:
            own = exclude[start : start + sim.shape[0]]
            hit = own >= 0
            sim[np.flatnonzero(hit), own[hit]] = -np.inf
        top = np.argpartition(-sim, k_ - 1, axis=1)[:, :k_] if k_ < n else np.argsort(-sim, axis=1)
        val = np.take_along_axis(sim, top, axis=1)
        order = np.argsort(-val, axis=1, kind="stable")
        val, top = np.take_along_axis(val, order, axis=1), np.take_along_axis(top, order, axis=1)
        part = slice(start, start + sim.shape[0])
        sims[part, :k_] = val
        rows[part, :k_] = np.where(np.isfinite(val), top, -1)
    return sims, rows


def knn(
    x: np.ndarray,
    k: int,
    index: Any = None,
    *,
    rows: np.ndarray | None = None,
    block: int = BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """``(cosines, rows)``, each ``(len(rows), k)``, of the unit vectors ``x``'s ``rows``
    (default: all) ``k`` nearest *other* rows, best first (:func:`nearest`; ``index``: a
    FAISS index holding ``x`` in the same order, e.g. the store's; one of another size is
    ignored). ``k`` is capped at ``len(x) - 1``."""
    n = int(np.shape(x)[0])
    rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
    k = min(k, n - 1)
    if k <= 0:
        return np.zeros((rows.size, 0), np.float32), np.zeros((rows.size, 0), np.int64)
    if index is not None and int(getattr(index, "ntotal", -1)) != n:
        index = None
    return nearest(x[rows], k, x, index, exclude=rows, block=block)
