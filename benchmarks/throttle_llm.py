"""The throttle tuned and measured on sessions an LLM answered, so the leak signal reaches it.

Why a module of its own: ``bench_throttle.py``'s SQuAD sessions are answered by the
extractive generator, which never copies a chunk, so the output checks' leak signal
(canary, verbatim, breadth, recovery → ``ExtractionThrottle.report_leak``) can never fire
there. Here every session is replayed from ``bench_extraction.py``'s per-query logs —
ChatDoctor, 500 chunks, Qwen2.5-0.5B answering, the output check's verdict on each answer
as it ran — so the throttle sees what the shipped service would see:

* **normal** sessions are cut from utility logs (the knowledge base's own patient
  questions, answered through the canary row): the answered questions are split in two
  halves by position (dev / test); each half gives ``--normal-per-kind`` *diverse* sessions
  (``--queries`` questions drawn at random) and as many *topical* ones (three seed questions,
  each followed by its nearest answered questions — a patient asking follow-ups);
* **extraction** sessions are whole attack logs (RAG-Thief, the worm, the canary-aware
  thief, ``worm-one``), each assigned to dev or test by the command line.

Each session is replayed through the real throttle (``bench_throttle.replay_llm``: each
logged query retrieved again for its served chunk ids, a caught answer reported as the
service does). The grid is searched on dev with the signatures off (the attacker who
avoids every known command), and the choice is reported on both halves beside the shipped
defaults.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The grid searched here: ``bench_throttle.GRID`` without its coverage shares — on the
#: 500-chunk index every one of them (5–15 % = 25–75 chunks) is under the shipped
#: ``coverage_min_chunks`` floor (150), so they are one setting, and the replay costs a
#: third of the time.
LLM_GRID: dict[str, tuple[int, ...]] = {
    "novelty_window": (0, 20),
    "region_limit": (0, 30, 40, 50, 60, 80, 100),
}


@dataclass(frozen=True)
class LoggedSession:
    """One replayable session: its queries, the chunks each answer was given, the verdicts."""

    label: str  # normal | extraction
    kind: str
    queries: tuple[str, ...]
    served: tuple[tuple[str, ...], ...]
    leaks: tuple[bool, ...]


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def _run_name(path: Path) -> str:
    """The run a log belongs to (``OUT/logs/ROW.jsonl`` → ``OUT``; a loose log's folder)."""
    return path.parent.parent.name if path.parent.name == "logs" else path.parent.name


def topical_order(vectors: np.ndarray, rng: random.Random, n: int, runs: int = 3) -> list[int]:
    """``n`` question indices in ``runs`` runs: a random seed question, then its nearest
    questions by cosine (no index twice) — a user asking follow-ups about one complaint."""
    taken: set[int] = set()
    order: list[int] = []
    per = [n // runs + (i < n % runs) for i in range(runs)]
    for size in per:
        free = [i for i in range(len(vectors)) if i not in taken]
        seed = rng.choice(free)
        sims = vectors[free] @ vectors[seed]
        near = [free[int(j)] for j in np.argsort(-sims)[:size]]
        order += near
        taken.update(near)
    return order


def normal_sessions(
    records: Sequence[dict[str, Any]],
    served: Sequence[tuple[str, ...]],
    vectors: np.ndarray,
    *,
    per_kind: int,
    queries: int,
    seed: int,
    half: str,
) -> list[LoggedSession]:
    """``per_kind`` diverse and ``per_kind`` topical sessions of ``queries`` answered
    questions each, drawn (seeded) from ``records``."""
    rng = random.Random(f"{seed}-{half}")
    out: list[LoggedSession] = []
    for kind in ("diverse", "topical"):
        for _ in range(per_kind):
            idx = (
                rng.sample(range(len(records)), queries)
                if kind == "diverse"
                else topical_order(vectors, rng, queries)
            )
            out.append(
                LoggedSession(
                    "normal",
                    f"normal-{kind}",
                    tuple(records[i]["query"] for i in idx),
                    tuple(served[i] for i in idx),
                    tuple(bool(records[i].get("leak")) for i in idx),
                )
            )
    return out


def llm_halves(args: argparse.Namespace) -> tuple[dict[str, list[LoggedSession]], int, int]:
    """The dev and test sessions built from the logs, the index's chunk count and how many
    answered normal questions the halves were cut from."""
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.extraction_data import encode_cached, load_knowledge_base
    from ragshield.pipeline import RAGPipeline
    from ragshield.store.faiss_store import FaissStore

    kb = load_knowledge_base("chatdoctor", data_dir=args.data, limit=args.kb_limit, seed=args.seed)
    enc = SentenceTransformerEncoder()
    store = FaissStore(enc.dim, encoder_name=enc.name)
    store.add(list(kb.passages), encode_cached(kb.texts, enc, args.encode_cache))
    rag = RAGPipeline(enc, store, [], None, context_k=5)

    def served_of(qs: Sequence[str]) -> list[tuple[str, ...]]:
        return [tuple(h.id for h in hit) for hit in rag.retrieve_many(list(qs), 5)]

    pool = [r for p in args.llm_normal for r in _records(p)]
    if len(pool) < 2 * args.queries:
        raise SystemExit(f"{len(pool)} answered normal questions: too few for two halves")
    pool_served = served_of([r["query"] for r in pool])
    vecs = np.asarray(enc.encode([r["query"] for r in pool]), dtype=np.float32)
    mid = len(pool) // 2
    halves: dict[str, list[LoggedSession]] = {}
    for half, sl, logs in (
        ("dev", slice(0, mid), args.llm_dev),
        ("test", slice(mid, None), args.llm_test),
    ):
        sessions = normal_sessions(
            pool[sl],
            pool_served[sl],
            vecs[sl],
            per_kind=args.normal_per_kind or 20,
            queries=args.queries,
            seed=args.seed,
            half=half,
        )
        for path in logs:
            recs = _records(path)
            qs = [r["query"] for r in recs]
            sessions.append(
                LoggedSession(
                    "extraction",
                    f"{_run_name(path)}/{path.stem.replace('__', ' × ')}",
                    tuple(qs),
                    tuple(served_of(qs)),
                    tuple(bool(r.get("leak")) for r in recs),
                )
            )
        halves[half] = sessions
    return halves, len(kb.passages), len(pool)


def llm_bench(args: argparse.Namespace) -> None:
    """Build the sessions from the logs, search the grid on dev, print both halves."""
    from bench_throttle import FP_TARGET, pick, replay_llm

    t0 = time.perf_counter()
    halves, n, n_pool = llm_halves(args)
    mid = n_pool // 2
    with tempfile.TemporaryDirectory(prefix="bench-throttle-llm-") as tmp:
        work = Path(tmp)

        def flags(sessions: Sequence[LoggedSession], over: dict[str, Any], signal: bool) -> list:
            return [
                replay_llm(s.queries, s.served, s.leaks, over, n, work, report_leaks=signal)
                for s in sessions
            ]

        def rates(sessions: Sequence[LoggedSession], got: Sequence[Any]) -> tuple[float, float]:
            normal = [g for s, g in zip(sessions, got, strict=True) if s.label == "normal"]
            attack = [g for s, g in zip(sessions, got, strict=True) if s.label != "normal"]
            return (
                sum(g is not None for g in normal) / max(1, len(normal)),
                sum(g is None for g in attack) / max(1, len(attack)),
            )

        no_sig: dict[str, Any] = {"signatures": {}}
        scored = []
        for values in itertools.product(*LLM_GRID.values()):
            cfg = no_sig | dict(zip(LLM_GRID, values, strict=True))
            fp, miss = rates(halves["dev"], flags(halves["dev"], cfg, True))
            scored.append((fp, miss, cfg))
        best = pick(scored)
        dev, test = halves["dev"], halves["test"]
        print(
            f"# throttle on LLM-answered sessions — chatdoctor, {n} chunks (seed {args.seed}), "
            f"top-5 served, 10 s between queries; normal: {n_pool} answered questions "
            f"({', '.join(map(str, args.llm_normal))}) in halves of {mid} / {n_pool - mid}, "
            f"{args.normal_per_kind or 20} diverse + {args.normal_per_kind or 20} topical "
            f"sessions of {args.queries} per half; extraction: whole logs; grid {LLM_GRID} searched "
            f"on dev with signatures off and the leak signal on (fewest misses with FP <= "
            f"{FP_TARGET:.0%}); {time.perf_counter() - t0:.0f} s"
        )
        print()
        print("| setting | split | session | queries | caught as run | first flagged (rule) |")
        print("|---|---|---|---|---|---|")
        settings = {
            "shipped defaults": ({}, True),
            "no signatures": (no_sig, True),
            "no signatures, no leak signal": (no_sig, False),
            "dev choice (no signatures)": (best, True),
        }
        for name, (over, signal) in settings.items():
            for half, group in (("dev", dev), ("test", test)):
                got = flags(group, over, signal)
                for kind in dict.fromkeys(s.kind for s in group if s.label == "normal"):
                    hit = [g for s, g in zip(group, got, strict=True) if s.kind == kind]
                    at = sorted(g[0] for g in hit if g is not None)
                    print(
                        f"| {name} | {half} | {kind} ×{len(hit)} | {args.queries} | "
                        f"{sum(sum(s.leaks) for s in group if s.kind == kind)} | "
                        f"{len(at)} flagged{f' (queries {at})' if at else ''} |"
                    )
                for s, g in zip(group, got, strict=True):
                    if s.label == "normal":
                        continue
                    cell = "never" if g is None else f"{g[0]} ({g[1]})"
                    print(
                        f"| {name} | {half} | {s.kind} | {len(s.queries)} | {sum(s.leaks)} | {cell} |"
                    )
                fp, miss = rates(group, got)
                print(f"| {name} | {half} | **FP {fp:.1%} / miss {miss:.0%}** | | | |")
        print()
        print(f"dev choice: {best}")
