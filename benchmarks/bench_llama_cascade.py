"""What RAGFort's cascade costs per answer on llama.cpp, beside each of its models alone.

Run (from the repository root; the store is ``ragshield index`` of the extraction bench's
500 ChatDoctor chunks, the queries the first lines of an extraction log)::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_llama_cascade.py \\
        --index runs/s8/idx500 --queries runs/s9-ragfort/logs/none__rag-thief.jsonl --n 5

Per query: the top 5 chunks retrieved with the store's encoder, then one answer per row, in
this order, with the extraction bench's LLM settings (RAGFort's plain prompt, 160 new
tokens, greedy, whole reply, packaged weights, one thread):

* ``draft``: the draft model alone (``LlamaCppGenerator``: the undefended bench row);
* ``reference``: the reference model alone through the cascade's own code (``gamma=0``:
  RAGFort's undefended baseline);
* ``cascade``: RAGFort's cascade (Algorithm 1, Eq. 5, :class:`CascadeGenerator` defaults),
  both models on llama.cpp (:mod:`ragshield.generate.llama_cascade`).

Each answer starts from empty KV caches (no prompt prefix shared between rows).

Printed per row: CPU-seconds per answer (``getrusage`` of this process: the machine is
shared, wall time is not a speed figure here), wall seconds, tokens generated, the
cascade's acceptance and deferral counts, and the retrieved chunks each answer recovers
by RAGFort's CRR rule (ROUGE-L > 0.5 and cosine > 0.85, :class:`ChunkRecoveryScorer`
against the 5 chunks it was given). No figure here is an extraction rate (a handful of
queries, not an attack): it says what one answer costs and whether the cascade copies less
on the same prompts.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)

# isort: split
import argparse
import json
import resource
import time
from pathlib import Path
from typing import Any


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, required=True, help="a ragshield index folder")
    ap.add_argument("--queries", type=Path, required=True, help="a JSONL log with 'query'")
    ap.add_argument("--n", type=int, default=5, help="first N queries of the log")
    ap.add_argument("--draft", default="qwen2.5-0.5b")
    ap.add_argument("--reference", default="qwen2.5-1.5b")
    ap.add_argument("--rows", default="draft,reference,cascade")
    ap.add_argument("--max-new-tokens", type=int, default=160)
    ap.add_argument("--weights", default="packaged")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="write every answer's record")
    args = ap.parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    bad = [r for r in rows if r not in ("draft", "reference", "cascade")]
    if bad or args.n < 1 or not args.queries.is_file() or not args.index.is_dir():
        ap.error(
            f"bad --rows {bad}" if bad else "need --n >= 1, an existing --queries file and --index"
        )
    queries = []
    with args.queries.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                queries.append(json.loads(line)["query"])
            if len(queries) == args.n:
                break

    from ragshield.eval.crr import ChunkRecoveryScorer
    from ragshield.generate.cascade import CascadeGenerator
    from ragshield.generate.llama_cpp import LlamaCppGenerator
    from ragshield.indexing import open_index

    store, encoder = open_index(args.index)
    llm: dict[str, Any] = {
        "max_new_tokens": args.max_new_tokens,
        "stop_at_newline": False,
        "prompt_style": "ragfort",
        "threads": args.threads,
        "weights": args.weights,
        "n_ctx": 4096,  # one sequence of ~1,000 prompt tokens and its answer
        "batch_size": 1,
    }
    draft = LlamaCppGenerator(args.draft, **llm)
    reference = LlamaCppGenerator(args.reference, **llm)
    decoding = {"max_new_tokens": args.max_new_tokens, "prompt_style": "ragfort"}
    generators: dict[str, Any] = {
        "draft": draft,
        "reference": CascadeGenerator(draft, reference, gamma=0, seed=args.seed, **decoding),
        "cascade": CascadeGenerator(draft, reference, seed=args.seed, **decoding),
    }
    for name in rows:  # loads outside the timings
        gen = generators[name]
        gen.warm_up()
    if "draft" not in rows:
        draft.warm_up()
    reference.warm_up()
    print(
        f"# RAGFort cascade on llama.cpp: draft {args.draft}, reference {args.reference}, "
        f"weights {args.weights}, {args.threads} thread(s), {len(queries)} queries of "
        f"{args.queries}, top 5 of {args.index} ({len(store)} chunks), seed {args.seed}"
    )
    records: list[dict[str, Any]] = []
    for qi, query in enumerate(queries):
        hits = store.search(encoder.encode([query]), 5)[0]
        contexts = [h.text for h in hits]
        judge = ChunkRecoveryScorer(encoder).fit(contexts)
        for name in rows:
            draft.engine_.forget()  # each row computes its own prompt (no shared prefix)
            reference.engine_.forget()
            c0, w0 = _cpu(), time.perf_counter()
            out = generators[name].generate(query, contexts)
            cpu, wall = _cpu() - c0, time.perf_counter() - w0
            recovered = judge.score([out.text]).n_recovered
            d = out.details
            rec = {
                "query": qi,
                "row": name,
                "cpu_s": round(cpu, 2),
                "wall_s": round(wall, 2),
                "prompt_tokens": out.prompt_tokens,
                "tokens": out.completion_tokens,
                "recovered": recovered,
                "accepted": d.get("accepted"),
                "drafted": d.get("drafted"),
                "deferrals": d.get("deferrals"),
                "copy_positions": d.get("copy_positions"),
                "copy_deferrals": d.get("copy_deferrals"),
                "reference_forwards": d.get("reference_forwards"),
                "text": out.text,
            }
            records.append(rec)
            print(
                f"  q{qi} {name:9s} {cpu:6.1f} CPU-s {wall:6.1f} s  {out.completion_tokens:3d} "
                f"tokens  recovered {recovered}/5"
                + (
                    f"  accepted {d['accepted']}/{d['drafted']}  deferrals {d['deferrals']} "
                    f"(copy {d['copy_deferrals']}/{d['copy_positions']})"
                    if name == "cascade"
                    else ""
                ),
                flush=True,
            )
    print("\n| row | answers | CPU-s per answer | CPU-s per token | tokens | chunks recovered |")
    print("|---|---|---|---|---|---|")
    for name in rows:
        mine = [r for r in records if r["row"] == name]
        cpu = sum(r["cpu_s"] for r in mine)
        toks = sum(r["tokens"] for r in mine)
        print(
            f"| {name} | {len(mine)} | {cpu / len(mine):.1f} | "
            f"{cpu / toks if toks else float('nan'):.3f} | {toks} | "
            f"{sum(r['recovered'] for r in mine)} of {5 * len(mine)} |"
        )
    casc = [r for r in records if r["row"] == "cascade"]
    if casc:
        drafted = sum(r["drafted"] or 0 for r in casc)
        print(
            f"cascade: {sum(r['accepted'] or 0 for r in casc)} of {drafted} drafts accepted, "
            f"{sum(r['deferrals'] or 0 for r in casc)} deferrals (r̂ = 1), "
            f"{sum(r['copy_deferrals'] or 0 for r in casc)} of "
            f"{sum(r['copy_positions'] or 0 for r in casc)} copy positions deferred"
        )
    if args.json:
        args.json.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
