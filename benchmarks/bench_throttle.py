"""False-positive and miss rates of the extraction throttle on labelled sessions.

Issue #15 item 13: a user asking 30 diverse, legitimate questions was slowed at query 25,
the same point as a patient sweeper. This measures it. The knowledge base is the SQuAD
on-topic set in ``shared/data/ontopic`` (whole articles, real encoder, FAISS, extractive
generator, top-5 to the generator, as ``ragshield serve`` runs by default).

* **normal** sessions: ``--queries`` SQuAD questions, each from a different article of
  the index (the most diverse legitimate user: every answer lands on new chunks);
* **extraction** sessions: the query streams ragshield's attacks produce against this
  index, one attack seed per session: RAG-Thief with its default seeds (commands
  included), RAG-Thief seeded with plain anchors (no command: signature-free) and the
  RAG worm.

Each session is replayed, query by query, through the real :class:`ExtractionThrottle` on
its own SQLite ledger (10 s between queries). A session is *flagged* at its first query
slowed or refused. False-positive rate = flagged normal sessions; miss rate = extraction
sessions never flagged within their queries. Sessions are split into a dev and a test
half (seeded); the grid is searched on dev only, and the chosen setting is reported on
both halves next to the shipped defaults.

    OMP_NUM_THREADS=1 python benchmarks/bench_throttle.py --sessions 20 --queries 30 --seed 0
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Session:
    label: str  # normal | extraction
    kind: str
    queries: tuple[str, ...]
    served: tuple[tuple[str, ...], ...]  # chunk ids each answer handed to the generator


def _data_dir(given: Path | None) -> Path:
    for d in (given, REPO.parent / "shared" / "data", Path("/work/shared/data")):
        if d is not None and (d / "ontopic").is_dir():
            return d
    raise SystemExit("shared/data/ontopic not found: pass --data DIR")


def build(args: argparse.Namespace) -> tuple[Any, list[Session], int]:
    from ragshield.attacks.extraction.rag_thief import SEED_ANCHORS, RAGThief
    from ragshield.attacks.extraction.worm import WormAttack
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.generate.extractive import ExtractiveGenerator
    from ragshield.pipeline import RAGPipeline
    from ragshield.store.faiss_store import FaissStore
    from ragshield.types import Passage

    raw = json.loads((args.data / "ontopic" / "squad_v1.1_dev_43articles.json").read_text())
    titles = list(dict.fromkeys(p["title"] for p in raw["passages"]))[: args.articles]
    keep = set(titles)
    passages = [
        Passage(p["id"], p["text"], p["title"]) for p in raw["passages"] if p["title"] in keep
    ]
    enc = SentenceTransformerEncoder()
    store = FaissStore(enc.dim, encoder_name=enc.name)
    store.add(passages, enc.encode([p.text for p in passages]))
    rag = RAGPipeline(enc, store, [], ExtractiveGenerator(enc), context_k=5)

    def served_of(queries: Sequence[str]) -> tuple[tuple[str, ...], ...]:
        return tuple(tuple(r.id for r in rag.answer(q, k=5).passages) for q in queries)

    rng = random.Random(args.seed)
    by_title: dict[str, list[str]] = {}
    for q in raw["questions"]:
        if q["title"] in keep:
            by_title.setdefault(q["title"], []).append(q["question"])
    sessions: list[Session] = []
    for _ in range(args.sessions):
        picked = rng.sample(titles, min(args.queries, len(titles)))
        qs = tuple(rng.choice(by_title[t]) for t in picked)
        sessions.append(Session("normal", "squad-diverse", qs, served_of(qs)))
    attacks = {
        "rag-thief": lambda s: RAGThief(encoder=enc, max_queries=args.queries, seed=s),
        "rag-thief-plain": lambda s: RAGThief(
            encoder=enc,
            max_queries=args.queries,
            seed=s,
            seed_queries=random.Random(s).sample(SEED_ANCHORS, len(SEED_ANCHORS)),
        ),
        "worm": lambda s: WormAttack(encoder=enc, max_queries=args.queries, seed=s),
    }
    per_kind = max(1, args.sessions // len(attacks))
    for kind, make in attacks.items():
        for s in range(per_kind):
            attack = make(args.seed * 1000 + s)
            attack.run(rag.answer)
            qs = tuple(attack.queries_)[: args.queries]
            sessions.append(Session("extraction", kind, qs, served_of(qs)))
    return enc, sessions, len(store)


def replay(session: Session, overrides: dict[str, Any], n_chunks: int, work: Path) -> int | None:
    """Index (1-based) of the first slowed/refused query, or None."""
    from ragshield.server.config import ThrottleConfig
    from ragshield.server.db import AuditRecord, Database
    from ragshield.server.throttle import ExtractionThrottle

    clock = [1_700_000_000.0]
    db = Database(f"sqlite:///{work / f'r{time.perf_counter_ns()}.db'}")
    db.migrate()
    throttle = ExtractionThrottle(ThrottleConfig(**overrides), db, n_chunks, clock=lambda: clock[0])
    try:
        for i, (q, ids) in enumerate(zip(session.queries, session.served, strict=True), 1):
            clock[0] += 10.0
            if throttle.check("k", q).action != "allow":
                return i
            rec = AuditRecord("r", "k", clock[0], "ask", 200, "ok", "", 5, [], list(ids), [],
                              None, None, None, 1.0)  # fmt: skip
            db.record(rec, served=list(ids))
        return None
    finally:
        db.close()


def rates(sessions: Sequence[Session], cfg: dict[str, Any], n: int, work: Path) -> dict[str, Any]:
    flags = [(s, replay(s, cfg, n, work)) for s in sessions]
    normal = [f for s, f in flags if s.label == "normal"]
    attack = [f for s, f in flags if s.label == "extraction"]
    fp = sum(f is not None for f in normal) / max(1, len(normal))
    miss = sum(f is None for f in attack) / max(1, len(attack))
    hit_at = [f for f in attack if f is not None]
    fp_at = [f for f in normal if f is not None]
    return {
        "fp": fp,
        "miss": miss,
        "n_normal": len(normal),
        "n_attack": len(attack),
        "attack_flag_median": sorted(hit_at)[len(hit_at) // 2] if hit_at else None,
        "normal_flag_median": sorted(fp_at)[len(fp_at) // 2] if fp_at else None,
    }


GRID = {
    "novelty_limit": (0.8, 0.9, 0.95, 1.0),
    "novelty_window": (10, 20, 30),
    "coverage_limit": (0.05, 0.1),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None)
    ap.add_argument("--articles", type=int, default=43, help="SQuAD articles indexed")
    ap.add_argument("--sessions", type=int, default=24, help="normal sessions (and attack)")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    args.data = _data_dir(args.data)
    logging.getLogger("ragshield.server").setLevel(logging.ERROR)  # one block line per replay
    t0 = time.perf_counter()
    _, sessions, n_chunks = build(args)
    rng = random.Random(args.seed)
    dev: list[Session] = []
    test: list[Session] = []
    for label in ("normal", "extraction"):
        group = [s for s in sessions if s.label == label]
        rng.shuffle(group)
        dev += group[: len(group) // 2]
        test += group[len(group) // 2 :]
    with tempfile.TemporaryDirectory(prefix="bench-throttle-") as tmp:
        work = Path(tmp)
        scored = []
        for values in itertools.product(*GRID.values()):
            cfg = dict(zip(GRID, values, strict=True))
            r = rates(dev, cfg, n_chunks, work)
            scored.append((r["fp"] + r["miss"], r["fp"], cfg))
        best = min(scored, key=lambda t: (t[0], t[1]))[2]
        print(
            f"# bench_throttle — SQuAD on-topic, {args.articles} articles ({n_chunks} chunks), "
            f"top-5 served; {args.queries} queries per session, 10 s apart; seed {args.seed}; "
            f"{len(dev)} dev / {len(test)} test sessions; grid {GRID} searched on dev only "
            f"(objective FP + miss); built and run in {time.perf_counter() - t0:.0f} s"
        )
        print()
        print("| setting | split | normal | extraction | FP rate | miss rate "
              "| median flag query (normal) | median flag query (extraction) |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|")
        for name, cfg in (("shipped defaults", {}), (f"tuned {best}", best)):
            for split, group in (("dev", dev), ("test", test)):
                r = rates(group, cfg, n_chunks, work)
                print(
                    f"| {name} | {split} | {r['n_normal']} | {r['n_attack']} | {r['fp']:.0%} | "
                    f"{r['miss']:.0%} | {r['normal_flag_median'] or '-'} | "
                    f"{r['attack_flag_median'] or '-'} |"
                )
        print()
        print("| attack kind | sessions | missed (defaults) | missed (tuned) |")
        print("|---|---|---|---|")
        for kind in sorted({s.kind for s in sessions if s.label == "extraction"}):
            group = [s for s in test if s.kind == kind]
            d = rates(group, {}, n_chunks, work)["miss"]
            t = rates(group, best, n_chunks, work)["miss"]
            print(f"| {kind} (test) | {len(group)} | {d:.0%} | {t:.0%} |")


if __name__ == "__main__":
    main()
