"""What the scan's outputs cost: intervals, tags and gate per cell, and each format's writer.

Run: python benchmarks/bench_scan_formats.py

The CI example's scan (demo corpus, ``examples/ci/questions.jsonl``, template attack texts,
5 settings x 3 chains, seed 0), then :func:`ragshield.scan.gate.evaluate` and every
writer of :data:`ragshield.scan.formats.FORMATS`, median of 20 calls each.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from ragshield.demo import demo_files
from ragshield.indexing import index_corpus
from ragshield.scan.formats import FORMATS
from ragshield.scan.gate import Gate, evaluate, parse_rules
from ragshield.scan.questions import read_questions
from ragshield.scan.run import run_scan

SETTINGS = ["clean", "poisonedrag", "mixed-2x", "injection-prefixed", "suffix"]
CHAINS = ["none", "ragdefender", "ragdefender,ecosaferag"]


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-formats-"))
    index_corpus(demo_files()[0], root / "idx")
    questions = Path(__file__).resolve().parents[1] / "examples" / "ci" / "questions.jsonl"
    t0 = time.perf_counter()
    scan = run_scan(root / "idx", read_questions(questions), attacks=SETTINGS, defenses=CHAINS)
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in scan.timings.items())
    print(f"scan: {time.perf_counter() - t0:.1f} s ({stages})")
    gate = Gate(tuple(parse_rules(["attack_reaches>0.4"])))
    t0 = time.perf_counter()
    cells = evaluate(scan, gate)
    print(f"evaluate (intervals, tags, gate): {(time.perf_counter() - t0) * 1000:.2f} ms "
          f"for {len(cells)} cells\n")  # fmt: skip
    print("| format | file | size | time |\n|---|---|---|---|")
    for name, (filename, writer) in FORMATS.items():
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            payload = writer(scan, cells)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"| {name} | {filename} | {len(payload) / 1024:.1f} KiB | "
              f"{statistics.median(times):.2f} ms |")  # fmt: skip


if __name__ == "__main__":
    main()
