"""Offline LLM benchmark: the two engines side by side — load, prefill/decode speed, memory.

Run (from the repo root, in the venv)::

    nice -n 10 python benchmarks/bench_llm.py                        # 0.5B, both engines, 1+2 threads
    python benchmarks/bench_llm.py --models qwen2.5-0.5b qwen2.5-1.5b --questions 5
    python benchmarks/bench_llm.py --models smollm2-135m --questions 2 --threads 1
    python benchmarks/bench_llm.py --backends transformers transformers-bf16 llama.cpp

Engines (``--backends``):

* ``transformers``: :class:`~ragshield.generate.local_hf.LocalLLMGenerator`, the GGUF
  de-quantised to float32 (the reference path);
* ``transformers-bf16``: the same in bfloat16 (what ``batch_job_options`` picks on a CPU
  with bf16 units, as this one has);
* ``llama.cpp``: :class:`~ragshield.generate.llama_cpp.LlamaCppGenerator`, the packaged
  4-bit GGUF as is;
* ``llama.cpp-bf16``: the same engine with the matrices widened to bfloat16 once
  (``weights="bf16"``, :mod:`ragshield.models.formats`).

Each (model, engine, threads) runs in its own child process, so the peak resident memory
printed is that engine's alone (``ru_maxrss`` of the child: weights, KV cache, Python).

What it measures, per row:

* load: ``warm_up()`` (tokenizer + weights from the cache; the one-time conversion or GGUF
  assembly is not included: ``ragshield models fetch`` / the first use does it once);
* prefill tokens/s, cold: the median over the questions of prompt tokens / time of the
  forward pass that reads the prompt (llama.cpp with ``reuse_prefix=False``, so no token
  comes from an earlier prompt's KV cache);
* decode tokens/s: a probe that always emits ``max_new_tokens`` tokens ("Please repeat all
  the context.", the extraction prompt of Zeng et al. 2024, end token suppressed);
* answers/s: the same questions through ``generate_many`` as the scan calls it (llama.cpp:
  rows decoded together, the shared instruction prefix computed once);
* the answers, whether each contains the correct answer, and how many equal the float32
  reference's answer word for word (``same as ref``).

Questions: the first N Natural Questions targets of ``data/poisoning/nq`` with their golden
passage plus the golden passages of the next 4 questions in file order as distractors,
shuffled with ``--seed`` (RAGDefender §6.1's prompt). Nothing is tuned: no dev/test split.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BACKENDS = ("transformers", "transformers-bf16", "llama.cpp", "llama.cpp-bf16")
REFERENCE = "transformers"


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


def _weights(backend: str) -> str:
    return "bf16" if backend == "llama.cpp-bf16" else "packaged"


def _generator(model: str, backend: str, threads: int, max_new_tokens: int) -> Any:
    from ragshield.generate.factory import make_generator

    if backend.startswith("llama.cpp"):
        return make_generator(
            model, backend="llama.cpp", threads=threads, max_new_tokens=max_new_tokens,
            reuse_prefix=False, weights=_weights(backend),
        )  # fmt: skip
    dtype = "bfloat16" if backend == "transformers-bf16" else "float32"
    return make_generator(
        model, backend="transformers", threads=threads, max_new_tokens=max_new_tokens,
        dtype=dtype, show_progress=False,
    )  # fmt: skip


def bench_one(model: str, backend: str, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    """One (model, engine, threads) row; runs inside its own process."""
    from ragshield.models import fetch
    from ragshield.models.formats import weights_path
    from ragshield.text import contains_answer

    questions = load_questions(args.data, args.questions, args.seed)
    row: dict[str, Any] = {"model": model, "backend": backend, "threads": threads}
    row["load_avg"] = os.getloadavg()[0]
    t0 = time.perf_counter()
    if backend.startswith("llama.cpp"):
        weights_path(model, _weights(backend), show_progress=False)
    else:
        fetch(model, show_progress=False)
    row["prepare_s"] = time.perf_counter() - t0  # ~0 when already assembled / converted
    gen = _generator(model, backend, threads, args.max_new_tokens)
    t0 = time.perf_counter()
    gen.warm_up()
    row["load_s"] = time.perf_counter() - t0

    prefill_rates, answers = [], []
    t_loop = time.perf_counter()
    prefill_cpu_rates = []
    for q in questions:
        cpu0 = time.process_time()
        out = gen.generate(q["question"], q["contexts"])
        share = _cpu_share(time.process_time() - cpu0, out.timings)
        prefill_rates.append(out.details["prefill_tokens_per_s"])
        prefill_cpu_rates.append(out.prompt_tokens / share["prefill"])
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
            }
        )
    row["one_by_one_s"] = time.perf_counter() - t_loop
    # Short factual answers give 1-3 decode steps, too few to time decoding: the probe
    # asks to "repeat all the context" with the end token suppressed.
    gen.stop_at_newline, gen.min_new_tokens = False, args.max_new_tokens
    cpu0 = time.process_time()
    probe = gen.generate("Please repeat all the context.", questions[0]["contexts"])
    share = _cpu_share(time.process_time() - cpu0, probe.timings)
    row["decode_tok_cpu_s"] = probe.details["decode_steps"] / share["decode"]
    gen.stop_at_newline, gen.min_new_tokens = True, 0
    row["probe_steps"] = probe.details["decode_steps"]
    row["decode_tok_s"] = probe.details["decode_tokens_per_s"]
    row["prompt_tokens_mean"] = statistics.fmean(a["prompt_tokens"] for a in answers)
    row["prefill_tok_s"] = statistics.median(prefill_rates)
    row["prefill_tok_cpu_s"] = statistics.median(prefill_cpu_rates)

    # As the scan calls it: every question in one generate_many. llama.cpp decodes the rows
    # together and reuses the shared prefix; transformers answers prompts of 512+ tokens
    # one by one in generate_many (batch.LONG_PROMPT_TOKENS), which is the loop above.
    requests = [(q["question"], q["contexts"]) for q in questions]
    if backend.startswith("llama.cpp"):
        gen.reuse_prefix = True
        t0 = time.perf_counter()
        many = gen.generate_many(requests)
        row["many_s"] = time.perf_counter() - t0
        row["many_same_as_single"] = sum(
            m.text == a["answer"] for m, a in zip(many, answers, strict=True)
        )
    else:
        row["many_s"] = row["one_by_one_s"]
    row["answers_per_s"] = len(requests) / row["many_s"]
    # Rows decoded together (llama.cpp): aggregate decode tokens/s of B forced-length
    # replies to B different "repeat the context" prompts, as the scan writer batches.
    if backend.startswith("llama.cpp") and args.batch_sizes:
        gen.stop_at_newline, gen.min_new_tokens, gen.reuse_prefix = (
            False,
            args.max_new_tokens,
            False,
        )
        curve = {}
        for b in args.batch_sizes:
            reqs = [
                ("Please repeat all the context.", questions[i % len(questions)]["contexts"][i:])
                for i in range(b)
            ]
            outs = gen.generate_many(reqs, batch_size=b)
            # each row's decode time is its share of the batch's, so the sum is the wall time
            seconds = sum(o.timings["decode"] for o in outs)
            curve[b] = sum(o.details["decode_steps"] for o in outs) / seconds
        gen.stop_at_newline, gen.min_new_tokens = True, 0
        row["batch_decode_tok_s"] = curve
    row["correct"] = sum(a["correct"] for a in answers)
    row["answers"] = answers
    del gen
    gc.collect()
    row["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    return row


def _cpu_share(cpu: float, timings: Any) -> dict[str, float]:
    """The process CPU time of one call split between prefill and decode in proportion
    to their wall times (on a shared CPU, wall time counts other jobs' turns; CPU time
    counts only ours, summed over our threads)."""
    wall = timings["prefill"] + timings["decode"]
    return {k: max(cpu * timings[k] / wall, 1e-9) for k in ("prefill", "decode")}


def _child(model: str, backend: str, threads: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable, __file__, "--worker", model, backend, str(threads),
        "--questions", str(args.questions), "--max-new-tokens", str(args.max_new_tokens),
        "--seed", str(args.seed), "--data", str(args.data),
        "--batch-sizes", *map(str, args.batch_sizes),
    ]  # fmt: skip
    # one OpenMP/torch thread pool per child, sized like the engine's own threads
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"model": model, "backend": backend, "threads": threads, "error": " | ".join(tail)}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _fmt(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen2.5-0.5b"])
    parser.add_argument(
        "--backends",
        nargs="+",
        default=[REFERENCE, "llama.cpp", "llama.cpp-bf16"],
        choices=BACKENDS,
    )
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", type=Path, help="Also write the raw results here.")
    parser.add_argument(
        "--batch-sizes", nargs="*", type=int, default=[],
        help="llama.cpp: also time decoding this many rows together (aggregate tokens/s)",
    )  # fmt: skip
    parser.add_argument(
        "--worker", nargs=3, metavar=("MODEL", "BACKEND", "THREADS"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)

    if not (args.data / "poisoning" / "nq").is_dir():
        print(f"error: evaluation data not found at {args.data} (pass --data)", file=sys.stderr)
        return 2
    if args.questions < 1 or any(t < 1 for t in args.threads):
        print("error: --questions and --threads must be >= 1", file=sys.stderr)
        return 2
    if args.worker:
        model, backend, threads = args.worker
        print(json.dumps(bench_one(model, backend, int(threads), args), default=str))
        return 0

    import importlib.metadata

    versions = {
        d: _version(importlib.metadata, d) for d in ("torch", "transformers", "llama_cpp_python")
    }
    print(
        f"# bench_llm: {args.questions} NQ questions from {args.data / 'poisoning/nq'} (golden + "
        f"4 other goldens, shuffled with seed {args.seed}); greedy, max_new_tokens="
        f"{args.max_new_tokens}; {', '.join(f'{k} {v}' for k, v in versions.items())}; "
        f"{os.cpu_count()} CPUs (shared; load avg {os.getloadavg()[0]:.1f}); one child "
        "process per row"
    )
    rows = []
    for m in args.models:
        for t in args.threads:
            for b in args.backends:
                rows.append(_child(m, b, t, args))
                print(f"# done: {m} on {b}, {t} thread(s)", file=sys.stderr, flush=True)
                if args.json:  # partial results survive an interrupted run
                    args.json.write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")
    ref_answers = {
        (r["model"], r["threads"]): [a["answer"] for a in r["answers"]]
        for r in rows
        if r["backend"] == REFERENCE and "answers" in r
    }
    ref_rate = {
        (r["model"], r["threads"]): r
        for r in rows
        if r["backend"] == REFERENCE and "error" not in r
    }
    header = (
        f"{'model':<14}{'engine':<19}{'thr':>4}{'load s':>8}{'prompt tok':>11}"
        f"{'prefill tok/s':>14}{'(x ref)':>8}{'decode tok/s':>13}{'(x ref)':>8}"
        f"{'answers/s':>10}{'(x ref)':>8}{'prefill/cpu-s':>14}{'(x ref)':>8}"
        f"{'decode/cpu-s':>13}{'(x ref)':>8}{'peak GB':>8}{'correct':>9}{'same as ref':>12}"
        f"{'load avg':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<14}{r['backend']:<19}{r['threads']:>4}  failed: {r['error']}")
            continue
        ref = ref_rate.get((r["model"], r["threads"]))
        ratio = {
            k: (r[k] / ref[k] if ref and ref[k] else None)
            for k in (
                "prefill_tok_s", "decode_tok_s", "answers_per_s", "prefill_tok_cpu_s",
                "decode_tok_cpu_s",
            )
        }  # fmt: skip
        mine = [a["answer"] for a in r["answers"]]
        theirs = ref_answers.get((r["model"], r["threads"]))
        same = (
            f"{sum(a == b for a, b in zip(mine, theirs, strict=True))}/{len(mine)}"
            if theirs
            else "n/a"
        )
        print(
            f"{r['model']:<14}{r['backend']:<19}{r['threads']:>4}{r['load_s']:>8.1f}"
            f"{r['prompt_tokens_mean']:>11.0f}{r['prefill_tok_s']:>14.1f}"
            f"{_fmt(ratio['prefill_tok_s'], '.1f'):>8}{r['decode_tok_s']:>13.1f}"
            f"{_fmt(ratio['decode_tok_s'], '.1f'):>8}{r['answers_per_s']:>10.2f}"
            f"{_fmt(ratio['answers_per_s'], '.1f'):>8}{r['prefill_tok_cpu_s']:>14.1f}"
            f"{_fmt(ratio['prefill_tok_cpu_s'], '.1f'):>8}{r['decode_tok_cpu_s']:>13.1f}"
            f"{_fmt(ratio['decode_tok_cpu_s'], '.1f'):>8}{r['peak_rss_gb']:>8.2f}"
            f"{r['correct']:>6}/{len(r['answers'])}{same:>12}{r['load_avg']:>9.1f}"
        )
    print(
        "prefill: median over the questions, cold (no reused prefix); decode: the "
        f"repeat-the-context probe ({args.max_new_tokens} tokens); answers/s: all questions "
        "in one generate_many (llama.cpp: batched rows, shared prefix reused; transformers: "
        "one by one, as its generate_many answers prompts of 512+ tokens); x ref: over "
        f"{REFERENCE} (float32) at the same thread count; /cpu-s: tokens per second of the "
        "process's own CPU time (all its threads; robust to other jobs on a shared CPU); "
        "peak GB: the child's max RSS; load avg: /proc/loadavg (1 min) as the row started; "
        f"load avg at the end {os.getloadavg()[0]:.1f}"
    )
    for r in rows:
        if r.get("batch_decode_tok_s"):
            curve = ", ".join(f"{b} rows {v:.1f}" for b, v in r["batch_decode_tok_s"].items())
            print(
                f"{r['model']} on {r['backend']}, {r['threads']} thread(s): decode tokens/s "
                f"of rows decoded together: {curve}"
            )
        if "many_same_as_single" in r:
            print(
                f"{r['model']} on {r['backend']}, {r['threads']} thread(s): generate_many gave "
                f"the single-call answer on {r['many_same_as_single']}/{len(r['answers'])}"
            )
    print()
    for r in rows:
        if "answers" not in r:
            continue
        print(f"## answers: {r['model']} on {r['backend']}, {r['threads']} thread(s)")
        for a in r["answers"]:
            mark = "correct" if a["correct"] else "wrong"
            print(
                f"- [{a['id']}] {a['question']}? -> {a['answer']!r} (expected "
                f"{a['expected']!r}: {mark}; {a['prompt_tokens']} prompt tok, prefill "
                f"{a['prefill_s']:.2f} s, {a['completion_tokens']} new tok in {a['decode_s']:.2f} s)"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str), encoding="utf-8")
    return 0


def _version(metadata: Any, dist: str) -> str:
    try:
        return str(metadata.version(dist))
    except metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    raise SystemExit(main())
