"""Scale benchmark: FAISS flat / FAISS HNSW / pgvector HNSW, and Ray vs in-process indexing.

    python benchmarks/bench_scale.py [--sizes 100000 1000000] [--pg-max-minutes 30] [--seed 0]

Vectors: synthetic 384-d, drawn as a mixture of 2,000 Gaussian clusters (σ=0.35 around unit
centres, then L2-normalised) so neighbourhoods have structure like text embeddings; seeded.
Queries: 200 held-out points from the same mixture. recall@10 is measured against exact
inner-product search (numpy). Memory: resident-set growth of this process while the store is
built (FAISS), and the table + index size reported by PostgreSQL (pgvector). pgvector HNSW
builds stop at the first size whose build exceeds ``--pg-max-minutes``; the table prints the
build-time growth seen up to there. A real-text part uses the shared data
(``../shared/data``: ChatDoctor records + NQ/HotpotQA golden passages) when present.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ragshield.embed.base import l2_normalize
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def mixture(n: int, dim: int, seed: int, centres: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        c = centres[rng.integers(0, len(centres), size=m)]
        out[start : start + m] = l2_normalize(
            c + rng.normal(scale=0.35 / np.sqrt(dim) * 4, size=(m, dim)).astype(np.float32)
        )
    return out


def exact_topk(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ data.T
    idx = np.argpartition(-scores, k, axis=1)[:, :k]
    order = np.take_along_axis(scores, idx, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(idx, order, axis=1)


def timed_queries(search, queries: np.ndarray, k: int) -> tuple[list[set[int]], float, float]:  # type: ignore[no-untyped-def]
    results, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        hits = search(q, k)
        times.append((time.perf_counter() - t0) * 1000)
        results.append(hits)
    return results, float(np.percentile(times, 50)), float(np.percentile(times, 95))


def dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def bench_faiss(
    data: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    kind: str,
    tmp: Path,
    hnsw: dict[str, int],
) -> dict:
    before = rss_mb()
    passages = [Passage(str(i), "") for i in range(len(data))]
    store = FaissStore(data.shape[1], kind, **hnsw)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    store.add(passages, data)
    build = time.perf_counter() - t0
    mem = rss_mb() - before
    store.save(tmp / kind)
    size = dir_mb(tmp / kind)
    res, p50, p95 = timed_queries(
        lambda q, k: {int(h.id) for h in store.search(q[None, :], k)[0]}, queries, 10
    )
    recall = float(
        np.mean([len(r & set(t.tolist())) / 10 for r, t in zip(res, truth, strict=True)])
    )
    shutil.rmtree(tmp / kind, ignore_errors=True)
    return {
        "build_s": build,
        "disk_mb": size,
        "mem_mb": mem,
        "recall@10": recall,
        "p50_ms": p50,
        "p95_ms": p95,
    }


def bench_pg(
    uri: str,
    data: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,
    table: str,
    hnsw: dict[str, int],
    work_mem: str,
    max_minutes: float,
) -> dict | None:
    """Ingest + HNSW build + queries; ``None`` when the build ran past ``max_minutes``
    (PostgreSQL cancels it through ``statement_timeout``)."""
    import psycopg

    from ragshield.store.pgvector_store import PgVectorStore

    store = PgVectorStore(uri, data.shape[1], table=table, **hnsw)
    passages = [Passage(str(i), "") for i in range(len(data))]
    t0 = time.perf_counter()
    for s in range(0, len(data), 50_000):
        store.add(passages[s : s + 50_000], data[s : s + 50_000])
    ingest = time.perf_counter() - t0
    t1 = time.perf_counter()
    conn = store.connect()
    conn.execute(f"SET statement_timeout = '{max(1, int(max_minutes * 60))}s'")
    try:
        store.build_index(maintenance_work_mem=work_mem)
    except psycopg.errors.QueryCanceled:
        conn.rollback()
        conn.execute("SET statement_timeout = 0")
        conn.execute(f"DROP TABLE {table}")
        conn.commit()
        store.close()
        return None
    conn.execute("SET statement_timeout = 0")
    build = time.perf_counter() - t1
    conn = store.connect()
    size = conn.execute(f"SELECT pg_total_relation_size('{table}')").fetchone()[0] / 2**20
    conn.commit()
    res, p50, p95 = timed_queries(
        lambda q, k: {int(h.id) for h in store.search(q, k)[0]}, queries, 10
    )
    recall = float(
        np.mean([len(r & set(t.tolist())) / 10 for r, t in zip(res, truth, strict=True)])
    )
    conn.execute(f"DROP TABLE {table}")
    conn.commit()
    store.close()
    return {
        "ingest_s": ingest,
        "build_s": build,
        "disk_mb": size,
        "mem_mb": float("nan"),
        "recall@10": recall,
        "p50_ms": p50,
        "p95_ms": p95,
    }


def real_texts(limit: int) -> list[str]:
    texts: list[str] = []
    kb = SHARED / "extraction" / "chatdoctor5k.json"
    if kb.is_file():
        texts += [r["input"] + "\n" + r["output"] for r in json.loads(kb.read_text())]
    for ds in ("nq", "hotpotqa"):
        f = SHARED / "poisoning" / ds / "blind.json"
        if f.is_file():
            texts += sorted({r["ground_truth"] for r in json.loads(f.read_text())})
    return texts[:limit]


def bench_real(limit: int, seed: int) -> None:
    texts = real_texts(limit)
    if not texts:
        print("\n(real-text part skipped: ../shared/data not found)")
        return
    from ragshield.distributed import ray_encode, ray_runtime
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    print(
        f"\n## Real passages: {len(texts)} (ChatDoctor records + NQ/HotpotQA goldens), MiniLM-L6 encoder\n"
    )
    print("| path | workers | seconds | passages/s |")
    print("|---|---:|---:|---:|")
    enc = SentenceTransformerEncoder(cache_size=0)
    enc.warm_up()
    t0 = time.perf_counter()
    local = enc.encode(texts)
    dt = time.perf_counter() - t0
    print(f"| in-process | 1 | {dt:.1f} | {len(texts) / dt:.0f} |")
    for workers in (1, 2):
        with ray_runtime("local", num_cpus=2):
            ray_encode(texts[:256], workers=workers)  # start actors and load models, untimed
            t0 = time.perf_counter()
            vecs = ray_encode(texts, workers=workers)
            dt = time.perf_counter() - t0
        same = np.allclose(vecs, local, atol=1e-4)
        print(
            f"| Ray Data map_batches | {workers} | {dt:.1f} | {len(texts) / dt:.0f} | (same vectors: {same})"
        )
    rng = np.random.default_rng(seed)
    q = local[rng.choice(len(local), 200, replace=False)]
    truth = exact_topk(local, q, 10)
    with tempfile.TemporaryDirectory() as tmp:
        r = bench_faiss(local, q, truth, "hnsw", Path(tmp), {})
    print(
        f"\nFAISS HNSW on the real vectors: recall@10 {r['recall@10']:.3f}, p50 {r['p50_ms']:.2f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--pg-sizes",
        type=int,
        nargs="+",
        default=None,
        help="sizes for pgvector (default: --sizes); each build is cancelled at --pg-max-minutes",
    )
    ap.add_argument("--pg-max-minutes", type=float, default=30.0)
    ap.add_argument("--no-pg", action="store_true")
    ap.add_argument("--no-faiss", action="store_true", help="pgvector rows only")
    ap.add_argument("--real", type=int, default=10_000, help="real passages to encode (0 = skip)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hnsw-m", type=int, default=16, help="HNSW degree (pgvector default)")
    ap.add_argument("--ef-construction", type=int, default=64, help="(pgvector default)")
    ap.add_argument("--ef-search", type=int, default=100)
    ap.add_argument("--pg-work-mem", default="4GB", help="maintenance_work_mem for the build")
    args = ap.parse_args()
    # one HNSW setting for both engines so their builds compare like for like
    hnsw = {
        "hnsw_m": args.hnsw_m,
        "ef_construction": args.ef_construction,
        "ef_search": args.ef_search,
    }

    import faiss

    faiss.omp_set_num_threads(args.threads)
    print(
        f"# bench_scale — {os.cpu_count()} cores, {args.threads} FAISS thread(s), seed {args.seed}, "
        f"{args.dim}-d; HNSW m={args.hnsw_m} ef_construction={args.ef_construction} "
        f"ef_search={args.ef_search} for FAISS and pgvector; pgvector maintenance_work_mem "
        f"{args.pg_work_mem}\n"
    )
    rng = np.random.default_rng(args.seed)
    centres = l2_normalize(rng.normal(size=(2000, args.dim)))
    pg_uri = None
    pgdata = Path(tempfile.mkdtemp(prefix="ragshield-pg-"))
    if not args.no_pg:
        try:
            from ragshield.store import pgserver_local

            pg_uri = pgserver_local.start(pgdata, persistent=False)
        except Exception as exc:  # pragma: no cover
            print(f"(pgvector skipped: cannot start pgserver: {exc})")
    print("| vectors | store | build s | disk MB | memory MB | recall@10 | p50 ms | p95 ms |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    pg_stopped = False
    with tempfile.TemporaryDirectory() as tmp:
        pg_sizes = set(args.pg_sizes or args.sizes)
        for n in sorted(set(args.sizes) | pg_sizes):
            data = mixture(n, args.dim, args.seed + 1, centres)
            queries = mixture(200, args.dim, args.seed + 2, centres)
            truth = exact_topk(data, queries, 10)
            for kind in ("flat", "hnsw") if n in args.sizes and not args.no_faiss else ():
                r = bench_faiss(data, queries, truth, kind, Path(tmp), hnsw)
                print(
                    f"| {n:,} | FAISS {kind} | {r['build_s']:.1f} | {r['disk_mb']:.0f} | {r['mem_mb']:.0f} | {r['recall@10']:.3f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} |",
                    flush=True,
                )
            if pg_uri and not pg_stopped and n in pg_sizes:
                r = bench_pg(
                    pg_uri,
                    data,
                    queries,
                    truth,
                    f"bench_{n}",
                    hnsw,
                    args.pg_work_mem,
                    args.pg_max_minutes,
                )
                if r is None:
                    print(
                        f"| {n:,} | pgvector HNSW | > {args.pg_max_minutes * 60:.0f} (cancelled) "
                        "| | | | | |",
                        flush=True,
                    )
                    pg_stopped = True
                    continue
                print(
                    f"| {n:,} | pgvector HNSW (ingest {r['ingest_s']:.0f} s) | {r['build_s']:.1f} | {r['disk_mb']:.0f} | (server) | {r['recall@10']:.3f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} |",
                    flush=True,
                )
                if r["build_s"] > args.pg_max_minutes * 60:
                    print(
                        f"(pgvector stops here: build took {r['build_s'] / 60:.1f} min > {args.pg_max_minutes} min)"
                    )
                    pg_stopped = True
            del data
    if pg_uri:
        from ragshield.store import pgserver_local

        pgserver_local.stop(pgdata)
    shutil.rmtree(pgdata, ignore_errors=True)
    if args.real:
        bench_real(args.real, args.seed)


if __name__ == "__main__":
    main()
