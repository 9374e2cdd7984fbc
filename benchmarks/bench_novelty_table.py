"""What building and extending the index-side novelty table costs (issue #28).

Usage::

    nice -n 10 python benchmarks/bench_novelty_table.py                    # real + 100k
    python benchmarks/bench_novelty_table.py --sizes 2000,20000 --index flat,hnsw

What it measures (:mod:`ragshield.store.calibration_novelty`): CPU seconds (this process,
``time.process_time``; one thread) and wall seconds to build the table ``ragshield index``
stores, with each passage's ten neighbours from

* ``flat`` — the store's exact FAISS ``IndexFlatIP`` (what ``ragshield index`` builds by
  default; the same neighbours as the all-pairs loop it replaced, pinned in
  ``tests/store/test_store_novelty.py``), and
* ``hnsw`` — a FAISS HNSW index (``ragshield index --index-type hnsw``; its build time is
  reported apart: the store builds it anyway),

plus ``with_added`` of 5 passages (a scan's or an attacker's plants per target; the first
call, which also builds the index's ``{id: Novelty}`` table, and the median of five more,
the filter-aware oracle's per-call cost) and ``extended`` of 100 (a ``ragshield add``
batch).

Corpora: ``real`` = the SQuAD on-topic corpus (every paragraph of the 43 articles, packaged
MiniLM vectors, cached under ``--cache-dir``); synthetic sizes = random 384-d vectors around
200 centres with 40-word texts drawn from a Zipf vocabulary of 50,000 words (seed 0) —
vectors and words are unrelated, so only the timing means something there. The machine is
shared: the load average is printed beside each figure.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def synthetic(n: int, seed: int = 0, dim: int = 384) -> tuple[list[str], list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, dim)).astype(np.float32)
    x = centres[rng.integers(0, 200, n)] + 0.8 * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    vocab = np.array([f"w{i}" for i in range(50_000)])
    words = np.minimum(rng.zipf(1.3, (n, 40)) - 1, 49_999)
    texts = [" ".join(vocab[row]) for row in words]
    return [f"s{i}" for i in range(n)], texts, x


def real(cache_dir: str) -> tuple[list[str], list[str], np.ndarray]:
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.ontopic import load_ontopic
    from ragshield.eval.real_retrieval import build_base_store

    data = load_ontopic(SHARED / "ontopic/squad_v1.1_dev_43articles.json")
    store = build_base_store(data, SentenceTransformerEncoder(), cache_dir)
    return [p.id for p in store.passages], [p.text for p in store.passages], store.vectors


def timed(fn: Any) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c0, time.perf_counter() - w0


def faiss_index(kind: str, x: np.ndarray) -> Any:
    import faiss

    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(x.shape[1], 32, faiss.METRIC_INNER_PRODUCT)  # the store's M
        index.hnsw.efConstruction = 200  # FaissStore's default
        index.hnsw.efSearch = 128
    else:
        index = faiss.IndexFlatIP(x.shape[1])
    index.add(x)
    return index


def run(label: str, ids: list[str], texts: list[str], x: np.ndarray, kinds: list[str]) -> None:
    from ragshield.store.calibration_novelty import NoveltyIndex, _words

    _words("warm up")  # the stop-word list's import is not the table's cost
    for kind in kinds:
        index, c_idx, w_idx = timed(lambda kind=kind: faiss_index(kind, x))
        nov, cpu, wall = timed(lambda index=index: NoveltyIndex(ids, texts, x, index=index))
        five = ["a0", "a1", "a2", "a3", "a4"]
        _, c5, w5 = timed(lambda nov=nov, five=five: nov.with_added(five, texts[:5], x[:5]))
        again = [  # the filter-aware oracle's case: one call per candidate batch
            timed(lambda nov=nov, five=five, i=i: nov.with_added(five, texts[i:i + 5],
                                                                 x[i : i + 5]))[1:]
            for i in range(5, 30, 5)
        ]  # fmt: skip
        c5r, w5r = (float(np.median([t[j] for t in again])) for j in (0, 1))
        extra = [f"b{i}" for i in range(100)]
        _, c100, w100 = timed(
            lambda nov=nov, extra=extra: nov.extended(extra, texts[:100], x[:100])
        )
        print(f"| {label} | {len(ids):,} | {kind} | {c_idx:.1f} / {w_idx:.1f} | "
              f"{cpu:.1f} / {wall:.1f} | {c5 * 1000:.0f} / {w5 * 1000:.0f} | "
              f"{c5r * 1000:.0f} / {w5r * 1000:.0f} | "
              f"{c100:.2f} / {w100:.2f} | {_load()} |", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="real,100000", help="'real' and/or synthetic sizes")
    ap.add_argument("--index", default="flat,hnsw", help="neighbour search: flat, hnsw")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/ragshield/bench"))
    args = ap.parse_args()
    kinds = args.index.split(",")
    print(
        "| corpus | passages | neighbours | FAISS index build CPU / wall s | table build "
        "CPU / wall s | with_added 5, first: CPU / wall ms | with_added 5, again (median "
        "of 5): CPU / wall ms | extended 100: CPU / wall s | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for size in args.sizes.split(","):
        if size == "real":
            if not SHARED.is_dir():
                print(f"skipped real: {SHARED} is absent", file=sys.stderr)
                continue
            run("SQuAD on-topic (MiniLM)", *real(args.cache_dir), kinds)
        else:
            run("synthetic", *synthetic(int(size)), kinds)


if __name__ == "__main__":
    main()
