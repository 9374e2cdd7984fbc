"""Filter latency: RAGDefender (faithful, improved, the authors' package) and the baseline.

    python benchmarks/bench_filter.py [--k 5 10 30 50] [--sets 30] [--repeats 3]
        [--authors-sets 10] [--out benchmarks/results]

What it measures, on what (every figure printed is measured in this run):

* wall time of one ``filter(question, retrieved)`` call, p50 and p95 in milliseconds, on
  one thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``), after a warm-up call;
* retrieved sets built from the NQ test split (odd question positions) of the shared
  poisoning data, k = 5, 10, 30, 50, two kinds: *clean* (golden + k−1 nearest other
  goldens) and *attacked* (golden + benign + min(k // 2, available) "mixed" adversarial
  passages); ``--sets`` questions × ``--repeats`` calls per cell;
* ragshield filters get the precomputed passage embeddings (``RetrievedPassage.embedding``,
  as the pipeline passes them);
* the authors' ``ragdefender`` 0.2.0 re-encodes the passages with the same MiniLM on every
  call, as it does in use (``--authors-sets`` questions, it is slow); a second row answers
  its embedding calls from a cache to isolate the algorithm's own cost. Skipped (and said
  so) when the package is not installed.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from bench_poisoning import (
    DATA,
    ROOT,
    AuthorsRAGDefender,
    DiskCachedEncoder,
    authors_package_version,
)
from ragshield.defenses.base import PassageFilter
from ragshield.defenses.baselines import SimilarityThresholdFilter
from ragshield.defenses.ragdefender import PaperRAGDefender, RAGDefender
from ragshield.eval.datasets import load_poisoning, split_cases
from ragshield.eval.poisoning_sets import (
    RetrievalSet,
    VectorBank,
    benign_passages,
    build_retrieval_set,
)


def make_sets(encoder: DiskCachedEncoder, k: int, n_sets: int) -> dict[str, list[RetrievalSet]]:
    cases = split_cases(load_poisoning(DATA / "nq"), "test")[:n_sets]
    bank = VectorBank(encoder)
    pool = benign_passages(split_cases(load_poisoning(DATA / "nq"), "all"), bank, k)
    out: dict[str, list[RetrievalSet]] = {"clean": [], "attacked": []}
    for i, c in enumerate(cases):
        out["clean"].append(
            build_retrieval_set(c, pool[c.id][: k - 1], None, 0, 0, bank, case_index=i)
        )
        available = sum(len(v) for v in c.adversarial.values())
        m = min(k // 2, available)
        rs = build_retrieval_set(c, pool[c.id][: k - 1 - m], "mixed", m / 5, 0, bank, case_index=i)
        out["attacked"].append(rs)
    return out


def time_filter(f: PassageFilter, sets: Sequence[RetrievalSet], repeats: int) -> list[float]:
    f.filter(sets[0].case.question, sets[0].passages)  # warm-up (lazy imports, vocabulary)
    times = []
    for _ in range(repeats):
        for rs in sets:
            t0 = time.perf_counter()
            f.filter(rs.case.question, rs.passages)
            times.append((time.perf_counter() - t0) * 1000.0)
    return times


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--k", nargs="+", type=int, default=[5, 10, 30, 50])
    ap.add_argument("--sets", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--authors-sets", type=int, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"evaluation data not found at {DATA}", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(1)
    encoder = DiskCachedEncoder()
    version = authors_package_version()
    filters: dict[str, PassageFilter] = {
        "similarity-threshold": SimilarityThresholdFilter(),
        "paper single-hop": PaperRAGDefender(mode="single_hop"),
        "paper multi-hop": PaperRAGDefender(mode="multi_hop"),
        "ragshield single-hop": RAGDefender(mode="single_hop"),
        "ragshield multi-hop": RAGDefender(mode="multi_hop"),
    }
    slow: dict[str, PassageFilter] = {}
    if version is not None:
        slow[f"authors {version} single-hop (re-encodes)"] = AuthorsRAGDefender(
            encoder.model_, "single_hop"
        )
        filters[f"authors {version} single-hop (vectors given)"] = AuthorsRAGDefender(
            encoder.model_, "single_hop", cached_encode=encoder.encode
        )
        filters[f"authors {version} multi-hop (vectors given)"] = AuthorsRAGDefender(
            encoder.model_, "multi_hop", cached_encode=encoder.encode
        )
    print(
        f"# Filter latency (ms per call, one thread)\n\nmachine: {platform.machine()}, "
        f"{os.cpu_count()} logical CPUs (shared), python {platform.python_version()}, torch "
        f"{torch.__version__}; NQ test split, {args.sets} sets × {args.repeats} calls per cell "
        f"({args.authors_sets} × 1 for the re-encoding authors' row); authors' package: "
        f"{version or 'not installed — rows skipped'}\n"
    )
    rows: list[dict[str, object]] = []
    for k in args.k:
        sets = make_sets(encoder, k, args.sets)
        for kind, ss in sets.items():
            cells = [(n, f, ss, args.repeats) for n, f in filters.items()]
            cells += [(n, f, ss[: args.authors_sets], 1) for n, f in slow.items()]
            for name, f, use, reps in cells:
                t = time_filter(f, use, reps)
                rows.append({
                    "k": k, "sets": kind, "filter": name, "n": len(t),
                    "p50_ms": float(np.percentile(t, 50)), "p95_ms": float(np.percentile(t, 95)),
                })  # fmt: skip
                print(f"  k={k:<3d} {kind:8s} {name:45s} p50 {rows[-1]['p50_ms']:8.2f}  "
                      f"p95 {rows[-1]['p95_ms']:8.2f}", file=sys.stderr, flush=True)  # fmt: skip
    encoder.save()
    names = list(dict.fromkeys(str(r["filter"]) for r in rows))
    cols = [(k, kind) for k in args.k for kind in ("clean", "attacked")]
    lines = ["| filter | " + " | ".join(f"k={k} {kind}" for k, kind in cols) + " |",
             "|---|" + "---|" * len(cols)]  # fmt: skip
    for n in names:
        cells = []
        for k, kind in cols:
            r = next(
                (r for r in rows if r["filter"] == n and r["k"] == k and r["sets"] == kind), None
            )
            cells.append("–" if r is None else f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    table = "cells: p50 / p95 ms\n\n" + "\n".join(lines) + "\n"
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "filter_latency.md").write_text(table)
    (args.out / "filter_latency.json").write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
