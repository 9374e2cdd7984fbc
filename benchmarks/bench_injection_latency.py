"""Per-query latency of InjectionGuard and the chain at k = 10 (issue #23 target: p50 <= 15 ms
on one thread with sentence vectors precomputed at index time), on its own.

    python benchmarks/bench_injection_latency.py [--data ../shared/data] [--seed 0]
        [--questions 105] [--repeat 3]

The same measurement as section 8 of ``bench_injection.py`` without its hour of other
work, so it can be run when the shared machine is quiet: the 1,888-paragraph SQuAD index,
the shipped head calibrated on it, ``precompute`` over the index (what ``ragshield index``
does), then each of ``--questions`` SQuAD test questions' real top-10 filtered by the guard
and by the chain (EcoSafeRAG -> InjectionGuard), ``--repeat`` times; p50 / p95 printed with
the load average before and after (the machine is shared: a timing means little without it).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ecosaferag import ontopic_split
from bench_injection import base_parser, make_guard, ontopic_index
from ragshield.defenses.compose import FilterChain
from ragshield.defenses.ecosaferag import EcoSafeRAG
from ragshield.defenses.injection.calibration import calibrate_index
from ragshield.defenses.injection.head import InjectionHead
from train_injection_head import cached_encoder


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = base_parser(__doc__)
    ap.add_argument("--questions", type=int, default=105)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--restated-span", default="0.7", help="the guard's restated_span, or 'none' (off)"
    )
    args = ap.parse_args()
    span = None if args.restated_span.lower() == "none" else float(args.restated_span)
    import torch

    torch.set_num_threads(1)
    enc = cached_encoder()
    idx = ontopic_index(args.data, enc)
    data, store, texts = idx.data, idx.store, idx.texts
    head = InjectionHead.packaged()
    cal = calibrate_index(texts, enc, head=head, sample=10**9)
    assert cal is not None
    qs = ontopic_split(data, "test", args.questions, args.seed)[: args.questions]
    hits = store.search(enc.encode([q.question for q in qs]), 10)
    enc.save()
    g = make_guard(enc, head, cal)
    g.restated_span = span
    g.precompute(texts)
    eco = EcoSafeRAG(encoder=enc)
    eco.precompute(texts)
    chain = FilterChain([eco, make_guard(enc, head, cal)])
    chain.filters[1].precompute(texts)  # type: ignore[attr-defined]
    chain.filters[1].restated_span = span  # type: ignore[attr-defined]
    lat: dict[str, list[float]] = {"injection-guard": [], "ragshield chain": []}
    before = load()
    for _ in range(args.repeat):
        for q, h in zip(qs, hits, strict=True):
            for name, flt in (("injection-guard", g), ("ragshield chain", chain)):
                t0 = time.perf_counter()
                flt.filter(q.question, h)
                lat[name].append((time.perf_counter() - t0) * 1000)
    print(
        f"# Latency, k=10, one thread, index sentences precomputed ({len(qs)} SQuAD test "
        f"questions x {args.repeat}; seed {args.seed}; guard at {g.operating_point}, "
        f"threshold {g.threshold_():.4f}, restated_span {span}); load average before {before}, after {load()}"
    )
    for k, v in lat.items():
        p50, p95 = np.percentile(v, 50), np.percentile(v, 95)
        print(f"  {k:<16} p50 {p50:6.2f} ms   p95 {p95:6.2f} ms")


if __name__ == "__main__":
    main()
