"""``ragshield scan`` at size, and LLM-written vs published PoisonedRAG texts (issue #18).

Usage::

    python benchmarks/bench_scan.py                                   # the full target run
    python benchmarks/bench_scan.py --questions 5 --no-generator      # a reduced run
    python benchmarks/bench_scan.py --compare-shared --targets 44 --e2e 10

Full mode (the target: <= 30 min on this 2-core machine, issue #18; <= 15 min with the
llama.cpp engine, issue #25): an index of 2,000 passages — the
1,888 SQuAD paragraphs of ``../shared/data/ontopic/squad_v1.1_dev_43articles.json`` and the
first 112 HotpotQA ones — built with ``ragshield index`` (packaged MiniLM, exact FAISS);
``--questions`` (50) SQuAD *test*-split questions (odd-position articles, see
:mod:`ragshield.eval.ontopic`), drawn round-robin over the articles with ``--seed``; every
attack (``--attacks``, default one setting per attack family: clean, poisonedrag,
mixed-2x, injection-prefixed, injection-offtopic, injection-hijack, suffix, extraction); 3 chains (none;
ragdefender; ragdefender,ecosaferag); the packaged Qwen2.5-0.5B writes targets and attack
texts and answers end to end (``--no-generator``: filter-level only), extraction with
``--extraction-queries`` (10) per attack and chain. It prints the time per stage, the
time per question of the LLM stages (so a reduced run extrapolates) and the summary table.
LLM replies and answers are cached under ``--out``; a rerun resumes (so a new ``--out``
times a cold scan). The local model runs with :func:`~ragshield.generate.factory.batch_job_options`
(one thread per core; on llama.cpp, the default engine, the bf16 weights where its build
has AVX512-BF16; on transformers, bf16 where the CPU has it): give it the machine. The
engine, the load average at the start and end and the process's CPU time are printed
beside the stage times, and per LLM stage the engine's CPU by token kind (prefill and
decode, tokens per CPU-second, rows per decode step). ``--typo-overlap`` (auto: on with two
cores) runs the GARAG typo search in a second thread beside the writer's LLM (same texts;
its thread's CPU printed). ``--writer-refill on`` gives the writer continuous batching and
``--answer-batch 1`` answers one RAG prompt per engine call (both llama.cpp layouts, off by
default: ``docs/results-llm-engine.md``, rounds 8 and 9, say what each changes).

``--compare-shared``: on the 44 HotpotQA poisoning targets (test split, the shared
incorrect answers as targets), PoisonedRAG (5 passages per target) planted into the
HotpotQA on-topic index, no defense: the published texts vs texts written by the packaged
0.5B model (:class:`~ragshield.attacks.poisonedrag.PoisonedRAGAttack`). Reported for
both: ``adv_retrieved`` (planted passages in the top-10), ``attack_reaches`` (one in the
5-passage context) and, on the first ``--e2e`` targets, end-to-end ASR with the 0.5B
generator; and the ratio generated / shared (issue #18 asks >= 0.8).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SQUAD = "ontopic/squad_v1.1_dev_43articles.json"
HOTPOT = "ontopic/hotpotqa_distractor_dev100.json"
CHAINS = ("none", "ragdefender", "ragdefender,ecosaferag")
#: One setting per attack of issue #18: PoisonedRAG; misleading + GARAG typos (mixed-2x
#: plants PoisonedRAG, misleading and typo copies together); injection in a new passage
#: (question-prefixed and off-topic) and in an existing one (hijack); GCG suffix;
#: RAG-Thief and the worm (extraction). clean anchors accuracy.
EVERY_ATTACK = (
    "clean", "poisonedrag", "mixed-2x", "injection-prefixed", "injection-offtopic",
    "injection-hijack", "suffix", "extraction",
)  # fmt: skip
MODEL = "qwen2.5-0.5b"
OVERLAP = {"auto": None, "on": True, "off": False}  # --typo-overlap -> AttackTextWriter


def _corpus(path: Path, n_passages: int) -> int:
    """SQuAD's paragraphs, then HotpotQA's, up to ``n_passages``, as a JSONL corpus."""
    from ragshield.eval.ontopic import load_ontopic

    rows = [p for name in (SQUAD, HOTPOT) for p in load_ontopic(SHARED / name).passages]
    rows = rows[:n_passages]
    with path.open("w", encoding="utf-8") as fh:
        for p in rows:
            fh.write(json.dumps({"_id": p.id, "title": p.title, "text": p.text}) + "\n")
    return len(rows)


def _questions(n: int, seed: int) -> list:
    """``n`` SQuAD test questions, one article after another (round-robin), seeded."""
    import random

    from ragshield.eval.ontopic import load_ontopic
    from ragshield.scan.questions import ScanQuestion

    test = load_ontopic(SHARED / SQUAD).split("test")
    by_topic: dict[str, list] = {}
    for c in test:
        by_topic.setdefault(c.topic, []).append(c)
    rng = random.Random(seed)
    for group in by_topic.values():
        rng.shuffle(group)
    picked = []
    while len(picked) < n and any(by_topic.values()):
        for topic in sorted(by_topic):
            if by_topic[topic] and len(picked) < n:
                picked.append(by_topic[topic].pop())
    return [ScanQuestion(c.question, c.answers) for c in picked]


def full(args: argparse.Namespace) -> None:
    from rich.console import Console

    from ragshield.attacks.writer import TextWriter
    from ragshield.generate.factory import batch_job_options, make_generator
    from ragshield.indexing import index_corpus
    from ragshield.scan.cli import _print_summary
    from ragshield.scan.run import run_scan
    from ragshield.scan.writer import AttackTextWriter

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    index = out / "index"
    if not (index / "meta.json").is_file():
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            n = _corpus(Path(tmp) / "corpus.jsonl", args.passages)
            index_corpus(Path(tmp) / "corpus.jsonl", index)
        timings["build_index (not part of a scan)"] = time.perf_counter() - t0
        print(f"indexed {n} passages in {timings['build_index (not part of a scan)']:.0f} s")
    qs = _questions(args.questions, args.seed)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    opts = batch_job_options(MODEL)
    if args.state_cache_mb is not None:  # llama.cpp only: saved prompt states' RAM
        opts["state_cache_mb"] = args.state_cache_mb
    writer_opts = {**opts, **({"refill": True} if args.writer_refill == "on" else {})}
    writer = TextWriter(  # replies cached under --out: a new --out times a cold scan
        MODEL, cache_dir=out / "cache" / "attack-text", local_options=writer_opts,
    )  # fmt: skip
    t0, c0 = time.perf_counter(), time.process_time()
    writer.warm_up()
    timings["load_writer"] = time.perf_counter() - t0
    cpu_writer = time.process_time() - c0
    gen = None
    if not args.no_generator:
        answer_opts = {**opts}
        if args.answer_batch is not None:  # llama.cpp: RAG prompts per generate_many group
            answer_opts["batch_size"] = args.answer_batch
        gen = make_generator(MODEL, cache_dir=out / "cache" / "answers", **answer_opts)
    from ragshield.scan.run import open_scan_store

    t0, c0 = time.perf_counter(), time.process_time()
    opened = open_scan_store(index)
    timings["open_index"] = time.perf_counter() - t0
    cpu_open = time.process_time() - c0
    from ragshield.eval.plant import REAL_SETTINGS

    attacks = [a.strip() for a in args.attacks.split(",") if a.strip()]
    if attacks == ["all"]:
        attacks = [*REAL_SETTINGS, "extraction"]
    print(f"attacks: {', '.join(attacks)}; chains: {'; '.join(CHAINS)}; seed {args.seed}")
    print(f"engine: {_engine(writer.generator_)}; writer refill {args.writer_refill}; "
          f"answer batch {args.answer_batch or 'default'}; load avg at the start {_load()}")  # fmt: skip
    scan = run_scan(
        index, qs, attacks=attacks, defenses=list(CHAINS),
        generator=gen, out_dir=out / "scan", question_source="SQuAD test questions",
        show_progress=True, opened=opened, timings=timings,
        attack_writer=AttackTextWriter(writer, opened[1], overlap=OVERLAP[args.typo_overlap]),
        attacker=writer.generator_,
        extraction_queries=args.extraction_queries,
    )  # fmt: skip
    _print_summary(Console(width=120), scan)
    total = sum(v for k, v in scan.timings.items() if not k.startswith("build_index"))
    nq = len(scan.questions)
    cpu = dict(scan.notes.get("cpu_s") or {})
    cpu["load_writer"] = cpu_writer
    cpu["open_index"] = cpu.get("open_index", 0.0) + cpu_open  # the scan adds its encoder load
    print("\n| stage | wall s | wall s per question | CPU s (all threads) | CPU s per question |")
    print("|---|---:|---:|---:|---:|")
    for k, v in scan.timings.items():
        c = cpu.get(k)
        ctext = f"{c:.1f} | {c / nq:.2f}" if c is not None else "not measured | "
        print(f"| {k} | {v:.1f} | {v / nq:.2f} | {ctext} |")
    cpu_total = sum(cpu.values())
    print(f"| **scan total** ({scan.n_passages} passages, {nq} questions) | {total:.1f} | | "
          f"{cpu_total:.1f} | |")  # fmt: skip
    scaled = ("write_attacks", "attack_and_filter")  # the stages that grow with the questions
    wall = {k: v for k, v in scan.timings.items() if not k.startswith("build_index")}
    for label, t in (("wall", wall), ("CPU", cpu)):
        per_q = sum(t.get(k, 0.0) for k in scaled) / nq
        fixed = sum(t.values()) - per_q * nq
        print(f"{label} time extrapolated to 50 questions: {(fixed + 50 * per_q) / 60:.1f} min "
              f"(fixed {fixed:.0f} s + 50 x {per_q:.1f} s)")  # fmt: skip
    print("on an idle 2-core machine the wall time would lie between CPU / 2 (both cores "
          "busy) and the CPU time (one busy)")  # fmt: skip
    print(f"attack texts: {scan.notes.get('attack_texts')}")
    texts = dict(scan.notes.get("attack_texts") or {})
    if "cpu_typos" in texts:
        where = "beside the LLM (own thread)" if texts.get("typo_overlap") else "after the LLM"
        print(f"write_attacks: the GARAG typo search took {texts['cpu_typos']:.1f} CPU s of "
              f"its own thread, {where}")  # fmt: skip
    _print_tokens(dict(scan.notes.get("prompt_tokens") or {}))
    _print_engine(dict(scan.notes.get("prompt_tokens") or {}), cpu)
    _print_cells(dict(scan.notes.get("cell_cost") or {}))
    print(f"load avg at the end {_load()} (2 cores; other jobs share them)")
    used = time.process_time() - cpu0
    print(
        f"CPU time of the scan process: {used:.0f} s over {time.perf_counter() - wall0:.0f} s of "
        "wall time (all threads; on a machine of its own the wall time would approach it, "
        "or half of it where both cores work)"
    )


def _print_tokens(tokens: dict) -> None:
    """The engines' prompt tokens per LLM stage (ragshield.generate.counters): what a
    change to prompt sharing buys, as counts the load does not move."""
    keys = ("requested", "computed", "reused", "shared", "restored")
    print("\n| stage | prompts run | answer-cache hits | prompt tokens: " + " | ".join(keys)
          + " | computed / requested |")  # fmt: skip
    print("|---|---:|---:|" + "---:|" * (len(keys) + 1))
    total: dict[str, int] = {}
    for stage, moved in [*tokens.items(), ("**all LLM stages**", None)]:
        moved = total if moved is None else moved
        if moved is not total:
            for k, v in moved.items():
                total[k] = total.get(k, 0) + v
        share = moved.get("computed", 0) / moved["requested"] if moved.get("requested") else 0
        cells = " | ".join(f"{moved.get(k, 0):,}" for k in keys)
        print(f"| {stage} | {moved.get('rows', 0):,} | {moved.get('cache_hits', 0):,} | {cells} | "
              + (f"{share:.3f} |" if moved.get("requested") else "not run |"))  # fmt: skip


def _print_engine(tokens: dict, cpu: dict) -> None:
    """Per LLM stage, the CPU inside the engine's calls against the stage's whole CPU (what
    a faster engine can buy and what only less work around the model can: filters,
    encoders, the typo search), then the engine's CPU by token kind: prefill (prompt
    tokens, compute-bound) and decode (generated tokens, one step per token of every row
    still running), with tokens per CPU-second and rows per decode step."""
    print("\n| stage | stage CPU s | engine CPU s | CPU s around the engine | engine wall s | "
          "tokens generated | decode steps |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for stage, moved in tokens.items():
        if "engine_cpu_ms" not in moved:
            continue
        eng, whole = moved["engine_cpu_ms"] / 1000, cpu.get(stage, 0.0)
        print(f"| {stage} | {whole:.1f} | {eng:.1f} | {whole - eng:.1f} | "
              f"{moved.get('engine_ms', 0) / 1000:.1f} | {moved.get('generated', 0):,} | "
              f"{moved.get('decode_steps', 0):,} |")  # fmt: skip
    print("\n| stage | prefill CPU s | prompt tokens computed | computed per prefill CPU-s | "
          "decode CPU s | tokens generated | generated per decode CPU-s | rows per decode "
          "step | prefill wall s | decode wall s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for stage, moved in tokens.items():
        if "prefill_cpu_ms" not in moved:
            continue
        pre, dec = moved["prefill_cpu_ms"] / 1000, moved.get("decode_cpu_ms", 0) / 1000
        comp, made = moved.get("computed", 0), moved.get("generated", 0)
        steps = moved.get("decode_steps", 0)
        print(f"| {stage} | {pre:.1f} | {comp:,} | {_per(comp, pre)} | {dec:.1f} | {made:,} | "
              f"{_per(made, dec)} | {_per(moved.get('decode_rows', 0), steps, 2)} | "
              f"{moved.get('prefill_ms', 0) / 1000:.1f} | {moved.get('decode_ms', 0) / 1000:.1f} |")  # fmt: skip


def _print_cells(cells: dict) -> None:
    """The answering stage per (setting, chain) cell (``scan.notes["cell_cost"]``): prompts
    run and answer-cache hits, prompt tokens requested and computed, tokens generated, the
    engine's CPU and the cell's whole CPU (a setting's planting counts to its first
    chain): what dropping a setting or a chain from a scan would save."""
    if not cells:
        return
    print("\n| setting / chain | prompts run | answer-cache hits | prompt tokens requested | "
          "computed | tokens generated | engine CPU s | cell CPU s | share of the stage's CPU |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    whole = sum(c.get("cpu_s", 0.0) for c in cells.values())
    for cell, c in cells.items():
        print(f"| {cell} | {c.get('rows', 0):,} | {c.get('cache_hits', 0):,} | "
              f"{c.get('requested', 0):,} | {c.get('computed', 0):,} | {c.get('generated', 0):,} | "
              f"{c.get('engine_cpu_ms', 0) / 1000:.1f} | {c.get('cpu_s', 0.0):.1f} | "
              f"{_per(c.get('cpu_s', 0.0), whole, 3)} |")  # fmt: skip


def _per(n: float, d: float, digits: int = 0) -> str:
    """``n / d``, or "not measured" when nothing was timed (never a made-up 0)."""
    return f"{n / d:.{digits}f}" if d > 0 else "not measured"


def _load() -> str:
    """The 1/5/15-minute load averages: a wall time means little without them."""
    import os

    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _engine(gen: object) -> str:
    """Which engine and weights answered (the scan's timing depends on both)."""
    inner = getattr(gen, "inner", gen)
    backend = getattr(inner, "backend", type(inner).__name__)
    weights = getattr(inner, "weights_", None) or getattr(inner, "dtype_", None)
    threads = getattr(inner, "threads_", None) or getattr(inner, "threads", None)
    return f"{backend}, weights {weights}, {threads} thread(s)"


def compare_shared(args: argparse.Namespace) -> None:
    from ragshield.attacks.poisonedrag import PoisonedRAGAttack
    from ragshield.attacks.writer import TextWriter, write_in_batches
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.ontopic import load_ontopic
    from ragshield.eval.real_retrieval import build_base_store, run_real_eval
    from ragshield.generate.factory import batch_job_options, make_generator

    out = Path(args.out)
    data = load_ontopic(SHARED / HOTPOT, poisoning_dir=SHARED / "poisoning" / "hotpotqa")
    cases = [c for c in data.split("test") if c.attack_texts.get("poisonedrag")][: args.targets]
    enc = SentenceTransformerEncoder()
    store = build_base_store(data, enc)
    writer = TextWriter(MODEL, local_options=batch_job_options(MODEL))
    attack = PoisonedRAGAttack(writer)
    t0 = time.perf_counter()

    def craft_all() -> list[tuple[str, ...]]:
        return [
            tuple(attack.craft(c.question, c.target_answer, 5, seed=i)) for i, c in enumerate(cases)
        ]

    write_in_batches(writer, craft_all)  # batched replies into the cache, then read back
    llm_cases = [
        dataclasses.replace(c, attack_texts={"poisonedrag": texts}, attack_source="llm")
        for c, texts in zip(cases, craft_all(), strict=True)
    ]
    write_s = time.perf_counter() - t0
    n_written = sum(len(c.attack_texts["poisonedrag"]) for c in llm_cases)
    print(f"\nwrote {n_written} passages for {len(cases)} targets in {write_s:.0f} s")
    gen = (
        make_generator(
            MODEL, cache_dir=out / "compare-cache" / "answers", **batch_job_options(MODEL)
        )
        if args.e2e
        else None
    )
    # poisonedrag-1 plants each target's first passage: LLM-written whenever the LLM wrote
    # one, so that row compares the texts alone; poisonedrag (5) tops a short LLM list up
    # with template texts (column "sources").
    rows = {}
    for label, cs in (("shared", cases), ("llm", llm_cases)):
        for setting in ("poisonedrag-1", "poisonedrag"):
            res = run_real_eval(
                data, cs, {"none": None}, [setting], encoder=enc, base_store=store,
                split="test", seed=args.seed,
            )  # fmt: skip
            row = res.get("none", setting)
            m: dict = dict(row.metrics)
            m["planted"], m["sources"] = row.m_planted, row.sources
            if gen is not None:
                e2e = run_real_eval(
                    data, cs[: args.e2e], {"none": None}, [setting], encoder=enc,
                    base_store=store, split="test", seed=args.seed, generator=gen,
                )  # fmt: skip
                m["asr"] = e2e.get("none", setting).metrics["asr"]
            rows[(setting, label)] = m
    keys = ["planted", "adv_retrieved", "attack_reaches"] + (["asr"] if gen else [])
    print(f"\nPoisonedRAG on {len(cases)} HotpotQA targets, no defense"
          + (f" (ASR on the first {args.e2e})" if gen else ""))  # fmt: skip
    print("| setting | texts | sources | " + " | ".join(keys) + " |")
    print("|---|---|---|" + "---:|" * len(keys))
    for (setting, label), m in rows.items():
        vals = " | ".join(f"{m[k]:.3f}" for k in keys)
        print(f"| {setting} | {label} | {m['sources']} | {vals} |")
    for setting in ("poisonedrag-1", "poisonedrag"):
        llm, shared = rows[(setting, "llm")], rows[(setting, "shared")]
        ratio = [f"{k} {llm[k] / shared[k]:.2f}" for k in keys[1:] if shared[k]]
        print(f"ratio llm / shared ({setting}): " + ", ".join(ratio))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare-shared", action="store_true")
    ap.add_argument("--passages", type=int, default=2000)
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--extraction-queries", type=int, default=10)
    ap.add_argument(
        "--attacks",
        default=",".join(EVERY_ATTACK),
        help="scan settings (default: one per attack family; 'all' settings adds "
        "poisonedrag-1 and mixed-4x, intensity variants)",
    )
    ap.add_argument("--no-generator", action="store_true", help="filter-level metrics only")
    ap.add_argument("--targets", type=int, default=44, help="--compare-shared: targets")
    ap.add_argument("--e2e", type=int, default=0, help="--compare-shared: targets for ASR")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--state-cache-mb", type=int, default=None,
        help="llama.cpp: RAM for saved prompt states (default: the generator's; 0 = off)",
    )  # fmt: skip
    ap.add_argument(
        "--typo-overlap", choices=("auto", "on", "off"), default="auto",
        help="the GARAG typo search beside the writer's LLM in a second thread "
        "(auto: with two cores or more)",
    )  # fmt: skip
    ap.add_argument(
        "--writer-refill", choices=("on", "off"), default="off",
        help="llama.cpp: continuous batching for the attack-text writer (LlamaEngineOptions."
        "refill; changes which rows share a step, so texts and mixed-2x's ASR: results round 9)",
    )  # fmt: skip
    ap.add_argument(
        "--answer-batch", type=int, default=None,
        help="llama.cpp: rows per generate_many group when answering (default: the "
        "generator's, 8; 1 = the single-call path: results round 8)",
    )  # fmt: skip
    ap.add_argument("--out", default="runs/bench-scan")
    args = ap.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"skipped: {SHARED} is absent (the shared evaluation data)")
    compare_shared(args) if args.compare_shared else full(args)


if __name__ == "__main__":
    main()
