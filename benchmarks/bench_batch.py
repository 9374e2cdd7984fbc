"""Batched answering with the packaged 0.5B model: seconds per answer by batch width.

Usage::

    python benchmarks/bench_batch.py                       # 16 prompts, widths 1 4 8 16
    python benchmarks/bench_batch.py --prompts 32 --widths 8 32 --dtype float32

Why: ``ragshield scan`` answers every (setting, chain) question end to end, and on a CPU
its time goes to these answers. A RAG prompt (five on-topic paragraphs, ~700-1,000
tokens) is prefill-bound, unlike the short attack-text replies the batch width was first
measured on (:mod:`ragshield.generate.batch`): a wide batch pads every row to its longest
one, a narrow one decodes fewer rows per step. This measures which width answers real
retrieval prompts fastest.

Prompts: SQuAD *test*-split questions (odd-position articles, :mod:`ragshield.eval.ontopic`),
``--seed`` picks them; each context is the question's gold paragraph plus the next four
paragraphs of its article (on-topic, real lengths). Each width answers the same prompts
uncached; the answers are checked for equality across widths (greedy; bf16 may break a
near-tie differently, which is reported, not hidden). Nothing is tuned on the result here;
the scan's width is a constant cited from this benchmark's output.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import random
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SQUAD = SHARED / "ontopic" / "squad_v1.1_dev_43articles.json"


def _prompts(n: int, seed: int) -> list[tuple[str, list[str]]]:
    from ragshield.eval.ontopic import load_ontopic

    data = load_ontopic(SQUAD)
    by_id = {p.id: i for i, p in enumerate(data.passages)}
    cases = data.split("test")
    random.Random(seed).shuffle(cases)
    out = []
    for c in cases[:n]:
        i = by_id[c.gold_ids[0]]
        ctx = [p.text for p in data.passages[i : i + 5]]
        out.append((c.question, ctx))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--widths", type=int, nargs="+", default=[1, 4, 8, 16])
    ap.add_argument("--dtype", default="auto", help="auto (bf16 where the CPU has it) | float32")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not SQUAD.is_file():
        sys.exit(f"skipped: {SQUAD} is absent (the shared evaluation data)")
    from ragshield.generate.factory import batch_job_options
    from ragshield.generate.local_hf import LocalLLMGenerator

    opts = batch_job_options("qwen2.5-0.5b") | {"dtype": args.dtype}
    gen = LocalLLMGenerator("qwen2.5-0.5b", **opts)
    gen.warm_up()
    requests = _prompts(args.prompts, args.seed)
    lengths = sorted(len(gen.prompt_ids(q, c)) for q, c in requests)
    print(f"{len(requests)} SQuAD test prompts (seed {args.seed}), prompt tokens "
          f"min {lengths[0]} / median {lengths[len(lengths) // 2]} / max {lengths[-1]}; "
          f"{opts}")  # fmt: skip
    print(
        "| batch width | seconds | s / answer | answers equal to width 1 |\n|---:|---:|---:|---:|"
    )
    first: list[str] | None = None
    for width in args.widths:
        t0 = time.perf_counter()
        if width == 1:
            texts = [gen.generate(q, c).text for q, c in requests]
        else:
            texts = [g.text for g in gen.generate_many(requests, batch_size=width)]
        s = time.perf_counter() - t0
        first = first or texts
        same = sum(a == b for a, b in zip(first, texts, strict=True))
        print(f"| {width} | {s:.1f} | {s / len(requests):.2f} | {same}/{len(texts)} |", flush=True)


if __name__ == "__main__":
    main()
