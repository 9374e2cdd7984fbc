"""Index benchmark: encode throughput and search latency on this CPU.

    python benchmarks/bench_index.py [--sizes 10000 100000] [--encode 10000] [--seed 0]

Synthetic passages are random 40–80-word sequences over the demo corpus vocabulary (seeded).
Encoding is timed on ``--encode`` of them with the packaged all-MiniLM-L6-v2. For index sizes
larger than the encoded set, the encoded vectors are repeated with Gaussian noise
(σ=0.05, then re-normalised): search cost depends on the count and dimension of vectors, not
on their text. Search latency: one query at a time, 200 queries, p50/p95.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import os
import platform
import time

import numpy as np

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.embed.base import l2_normalize
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.store.faiss_store import FaissStore
from ragshield.text import words
from ragshield.types import Passage


def synthetic_passages(n: int, seed: int) -> list[str]:
    vocab = sorted({w for p in read_corpus(demo_files()[0]) for w in words(p.text)})
    rng = np.random.default_rng(seed)
    lengths = rng.integers(40, 81, size=n)
    return [" ".join(rng.choice(vocab, size=int(m))) + "." for m in lengths]


def grow(vectors: np.ndarray, n: int, seed: int) -> np.ndarray:
    if n <= len(vectors):
        return vectors[:n]
    rng = np.random.default_rng(seed + 1)
    reps = -(-n // len(vectors))
    big = np.tile(vectors, (reps, 1))[:n]
    return l2_normalize(big + rng.normal(scale=0.05, size=big.shape).astype(np.float32))


def latency(store: FaissStore, queries: np.ndarray, k: int) -> tuple[float, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        store.search(q[None, :], k)
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--encode", type=int, default=10_000, help="passages actually encoded")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch and faiss threads")
    args = ap.parse_args()

    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    print(
        f"# bench_index — {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{args.threads} thread(s), seed {args.seed}"
    )
    texts = synthetic_passages(args.encode, args.seed)
    enc = SentenceTransformerEncoder(batch_size=64)
    enc.warm_up()
    enc.encode(texts[:64])  # warm-up batch, not timed
    enc.clear_cache()
    t0 = time.perf_counter()
    vecs = enc.encode(texts)
    dt = time.perf_counter() - t0
    print(
        f"encode: {len(texts)} synthetic passages (40–80 words) in {dt:.1f} s = "
        f"{len(texts) / dt:.0f} passages/s ({enc.name})\n"
    )

    rng = np.random.default_rng(args.seed)
    print("| vectors | index | build s | k | p50 ms | p95 ms |")
    print("|---:|---|---:|---:|---:|---:|")
    for n in args.sizes:
        data = grow(vecs, n, args.seed)
        queries = l2_normalize(
            data[rng.choice(n, 200, replace=False)]
            + rng.normal(scale=0.1, size=(200, data.shape[1])).astype(np.float32)
        )
        passages = [Passage(str(i), "") for i in range(n)]
        for index_type in ("flat", "hnsw"):
            store = FaissStore(data.shape[1], index_type)  # type: ignore[arg-type]
            t0 = time.perf_counter()
            store.add(passages, data)
            build = time.perf_counter() - t0
            for k in (5, 30):
                p50, p95 = latency(store, queries, k)
                print(f"| {n:,} | {index_type} | {build:.1f} | {k} | {p50:.2f} | {p95:.2f} |")


if __name__ == "__main__":
    main()
