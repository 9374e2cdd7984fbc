"""Offline LLM benchmark: conversion, load time, prefill/decode speed and sample answers.

Run (from the repo root, in the venv)::

    OMP_NUM_THREADS=1 python benchmarks/bench_llm.py                 # both Qwen models
    python benchmarks/bench_llm.py --models smollm2-135m --questions 2
    python benchmarks/bench_llm.py --reconvert                       # time a fresh conversion

What it measures, per packaged model:

* conversion: GGUF assembly + sha256 and de-quantisation to a float32 HF folder. By default
  the figures are the ones recorded in the cache's provenance file when the model was
  converted (date shown); ``--reconvert`` converts again into a temporary cache and times it.
* load: ``warm_up()`` of :class:`LocalLLMGenerator` from the cached folder (tokenizer +
  weights), after torch/transformers are already imported.
* prefill speed with ``threads`` torch threads (default 1), greedy decoding, on RAG
  prompts built like the papers' (RAGDefender §6.1): the first N Natural Questions
  targets of ``data/poisoning/nq`` with their golden passage plus the golden passages of
  the next 4 questions in file order (not nearest-by-embedding) as distractors, shuffled
  with ``--seed``. Nothing is tuned, so there is no dev/test split.
* decode speed on a probe that always emits ``max_new_tokens`` tokens ("Please repeat
  all the context.", the extraction prompt of Zeng et al. 2024, end token suppressed).
* the answers, and whether each contains the correct answer (``ragshield.text.contains_answer``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load_questions(data: Path, n: int, seed: int) -> list[dict[str, Any]]:
    """First ``n`` NQ targets with a golden passage, each with 4 other goldens as context."""
    nq = data / "poisoning" / "nq"
    targets = json.loads((nq / "target_queries.json").read_text(encoding="utf-8"))
    golden: dict[str, str] = {}
    for row in json.loads((nq / "blind.json").read_text(encoding="utf-8")):
        golden.setdefault(row["query"], row["ground_truth"])
    usable = [t for t in targets if t["question"] in golden]
    rng = random.Random(seed)
    out = []
    for i, t in enumerate(usable[:n]):
        others = [golden[u["question"]] for u in usable[i + 1 : i + 5]]
        contexts = [golden[t["question"]], *others]
        rng.shuffle(contexts)
        out.append(
            {
                "id": t["id"],
                "question": t["question"],
                "answer": t["correct answer"],
                "contexts": contexts,
            }
        )
    return out


def bench_model(
    name: str, questions: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    from ragshield.generate.local_hf import LocalLLMGenerator
    from ragshield.models import conversion_record, fetch
    from ragshield.text import contains_answer

    row: dict[str, Any] = {"model": name}
    if args.reconvert:
        with tempfile.TemporaryDirectory(prefix="ragshield-bench-") as tmp:
            t0 = time.perf_counter()
            path = fetch(name, cache_dir=tmp, show_progress=False)
            row["convert_total_s"] = time.perf_counter() - t0
            record = conversion_record(path)
            row["convert_when"] = "now"
        path = fetch(name, show_progress=False)
    else:
        t0 = time.perf_counter()
        path = fetch(name, show_progress=False)
        waited = time.perf_counter() - t0
        record = conversion_record(path)
        row["convert_when"] = "now" if waited > 5 else f"recorded {record.get('created', '?')}"
        row["convert_total_s"] = record.get("assemble_seconds", 0) + record.get(
            "convert_seconds", 0
        )
    row["assemble_s"] = record.get("assemble_seconds")
    row["dequantise_s"] = record.get("convert_seconds")
    row["folder_gb"] = sum(f.stat().st_size for f in path.iterdir()) / 1e9

    gen = LocalLLMGenerator(
        name, max_new_tokens=args.max_new_tokens, threads=args.threads, show_progress=False
    )
    t0 = time.perf_counter()
    gen.warm_up()
    row["load_s"] = time.perf_counter() - t0

    prefill_rates, answers = [], []
    prompt_tokens = []
    for q in questions:
        out = gen.generate(q["question"], q["contexts"])
        prompt_tokens.append(out.prompt_tokens)
        prefill_rates.append(out.details["prefill_tokens_per_s"])
        answers.append(
            {
                "id": q["id"],
                "question": q["question"],
                "expected": q["answer"],
                "answer": out.text,
                "correct": contains_answer(out.text, q["answer"]),
                "prompt_tokens": out.prompt_tokens,
                "completion_tokens": out.completion_tokens,
                "prefill_s": out.timings["prefill"],
                "decode_s": out.timings["decode"],
                "stop": out.details["stop"],
            }
        )
    # Short factual answers give only 1-3 decode steps, too few to time decoding; the
    # probe asks to "repeat all the context" (Zeng et al. 2024's extraction prompt) with
    # the end token suppressed, so it always decodes max_new_tokens tokens.
    gen.stop_at_newline, gen.min_new_tokens = False, args.max_new_tokens
    probe = gen.generate("Please repeat all the context.", questions[0]["contexts"])
    gen.stop_at_newline, gen.min_new_tokens = True, 0
    row["probe_steps"] = probe.details["decode_steps"]
    row["probe_decode_tok_s"] = probe.details["decode_tokens_per_s"]
    row["prompt_tokens_mean"] = statistics.fmean(prompt_tokens) if prompt_tokens else 0
    row["prefill_tok_s"] = statistics.median(prefill_rates) if prefill_rates else 0.0
    row["correct"] = sum(a["correct"] for a in answers)
    row["answers"] = answers
    del gen
    gc.collect()
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen2.5-0.5b", "qwen2.5-1.5b"])
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--reconvert", action="store_true")
    parser.add_argument("--json", type=Path, help="Also write the raw results here.")
    args = parser.parse_args(argv)

    if not (args.data / "poisoning" / "nq").is_dir():
        print(f"error: evaluation data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    import torch
    import transformers

    questions = load_questions(args.data, args.questions, args.seed)
    print(
        f"# bench_llm: {len(questions)} NQ questions from {args.data / 'poisoning/nq'} "
        f"(golden + 4 other goldens, shuffled with seed {args.seed}); greedy, "
        f"max_new_tokens={args.max_new_tokens}, torch threads={args.threads}, float32, "
        f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{os.cpu_count()} CPUs (shared; load avg {os.getloadavg()[0]:.1f})"
    )
    rows = [bench_model(m, questions, args) for m in args.models]

    header = (
        f"{'model':<14}{'convert s':>10}{'(assemble':>10}{'+dequant)':>10}{'folder GB':>10}"
        f"{'load s':>8}{'prompt tok':>11}{'prefill tok/s':>14}{'decode tok/s':>13}"
        f"{'(steps)':>8}{'correct':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['model']:<14}{r['convert_total_s']:>10.1f}{r['assemble_s'] or 0:>10.1f}"
            f"{r['dequantise_s'] or 0:>10.1f}{r['folder_gb']:>10.2f}{r['load_s']:>8.1f}"
            f"{r['prompt_tokens_mean']:>11.0f}{r['prefill_tok_s']:>14.1f}"
            f"{r['probe_decode_tok_s']:>13.2f}{r['probe_steps']:>8}"
            f"{r['correct']:>6}/{len(r['answers'])}"
        )
    for r in rows:
        print(f"conversion of {r['model']}: {r['convert_when']}")
    print(
        "prefill tok/s: median over the questions; decode tok/s: the repeat-the-context "
        f"probe (steps shown); load avg at the end {os.getloadavg()[0]:.1f}"
    )
    print()
    for r in rows:
        print(f"## sample answers: {r['model']}")
        for a in r["answers"]:
            mark = "correct" if a["correct"] else "wrong"
            print(
                f"- [{a['id']}] {a['question']}? -> {a['answer']!r} "
                f"(expected {a['expected']!r}: {mark}; {a['prompt_tokens']} prompt tok, "
                f"prefill {a['prefill_s']:.1f} s, {a['completion_tokens']} new tok in "
                f"{a['decode_s']:.1f} s, stop={a['stop']})"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
