"""End-to-end poisoning benchmark with a real local LLM (issue: real answers, offline).

    python benchmarks/bench_e2e.py [--model qwen2.5-0.5b] [--questions 50] [--datasets nq hotpotqa]

For each dataset: the first ``--questions`` questions of the *test* split (odd positions of
``target_queries.json``; the improved defenses were tuned on the even ones), one seed, the
clean setting and the ``--attack`` setting (default ``mixed``: PoisonedRAG + blind + GARAG
interleaved) at 1× and 4×. Each defense filters the retrieval set (golden + 4 nearest other
goldens + M adversarial, shuffled), the 5 survivors nearest the question reach the LLM, which
answers with the papers' prompt (greedy, ≤ 32 new tokens, cut at the first newline).
ASR = normalised answer contains the attacker's target; ACC = contains the correct answer.
Answers are cached on disk by (model, exact prompt): a rerun costs nothing.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from ragshield.defenses.registry import build_chain
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.eval.poisoning import run_poisoning_eval
from ragshield.eval.report import markdown_table
from ragshield.generate.cache import CachedGenerator
from ragshield.generate.local_hf import LocalLLMGenerator
from ragshield.types import Generation

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "poisoning"
DEFENSES = ("none", "ragdefender-paper", "ragdefender", "ecosaferag", "ragdefender,ecosaferag")


class Metered:
    """Pass-through generator that totals the cost of the answers it really produced."""

    def __init__(self, inner: CachedGenerator) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.prompt_tokens = 0
        self.prefill_s = 0.0
        self.decode_s = 0.0

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        g = self.inner.generate(question, contexts)
        self.calls += 1
        self.prompt_tokens += g.prompt_tokens
        self.prefill_s += g.timings.get("prefill", 0.0)
        self.decode_s += g.timings.get("decode", 0.0)
        return g

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-0.5b")
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--datasets", nargs="+", default=["nq", "hotpotqa"])
    ap.add_argument("--attack", default="mixed")
    ap.add_argument("--ratios", type=float, nargs="+", default=[1, 4])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--dtype", default="auto", help="float32 | bfloat16 | auto (bf16 iff the CPU has AMX)"
    )
    ap.add_argument("--cache", type=Path, default=Path("runs/e2e-cache"))
    ap.add_argument("--out", type=Path, default=None, help="write the markdown tables here")
    args = ap.parse_args()
    if not SHARED.is_dir():
        raise SystemExit(f"shared data not found at {SHARED}")

    enc = SentenceTransformerEncoder()
    t0 = time.perf_counter()
    llm = LocalLLMGenerator(args.model, max_new_tokens=32, threads=args.threads, dtype=args.dtype)
    llm.warm_up()
    load_s = time.perf_counter() - t0
    gen = Metered(CachedGenerator(llm, args.cache))
    defenses = {d: (None if d == "none" else build_chain(d, enc)) for d in DEFENSES}
    print(
        f"# bench_e2e — generator {args.model} ({llm.dtype_}, loaded in {load_s:.1f} s, "
        f"{args.threads} thread(s)), "
        f"encoder {enc.name}, seed {args.seed}, test split, first {args.questions} questions\n"
    )
    report = []
    for ds in args.datasets:
        t1 = time.perf_counter()
        calls0, tok0, pre0, dec0 = gen.calls, gen.prompt_tokens, gen.prefill_s, gen.decode_s
        res = run_poisoning_eval(
            SHARED / ds,
            defenses,
            attacks=[args.attack],
            ratios=args.ratios,
            seeds=[args.seed],
            encoder=enc,
            generator=gen,  # type: ignore[arg-type]
            limit=args.questions,
            split="test",
            include_clean=True,
        )
        table = markdown_table(
            res, metrics=["asr", "accuracy", "filter_asr", "gold_in_context", "filter_ms"]
        )
        n = max(gen.calls - calls0, 1)
        cost = (
            f"{ds}: {gen.calls - calls0} answers in {time.perf_counter() - t1:.0f} s "
            f"({gen.inner.hits} cache hits in total so far); per answer, as measured when first "
            f"generated: {(gen.prompt_tokens - tok0) / n:.0f} prompt tokens, prefill "
            f"{(gen.prefill_s - pre0) / n:.2f} s, decode {(gen.decode_s - dec0) / n:.2f} s"
        )
        print(table)
        print(cost + "\n", flush=True)
        report += [table, cost, ""]
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(report), encoding="utf-8")


if __name__ == "__main__":
    main()
