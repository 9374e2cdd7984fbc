"""Extraction attacks against ``ragshield serve`` over HTTP, with throttling off vs on.

A ChatDoctor subset (``../shared/data/extraction/chatdoctor5k.json``, seeded sample of
``--kb-size`` records, one record = one chunk) is indexed and served by a real uvicorn
process on loopback, twice: once with the extraction throttle disabled, once with the
config defaults (``examples/server.toml``). Per-key budgets are off in both runs so only the
throttle differs. In each run:

* every attack gets its own API key and drives ``POST /v1/ask`` black-box through an
  ``ask`` callable (``ragshield.attacks.extraction``: RAG-Thief, the RAG worm, and RAG-Thief
  with its repeat-the-context commands removed — an attacker who knows about signatures);
* legitimate users (one key each) ask the knowledge base's own patient questions, drawn
  from the *second half* of the subset's questions (the first half is the dev half; no
  threshold was tuned on either — the defaults were fixed before this run).

Reported per attack: CRR of everything the attacker received (``eval.crr``: ROUGE-L > 0.5
and cosine > 0.85, judged with MiniLM), **exposure** = distinct chunks that reached the
generator for the attacker's key / KB size (from the server's ledger: what an instruction-
following LLM could have copied out — the extractive generator answers with one sentence,
so its CRR stays near zero whatever the throttle does), queries answered / refused /
slowed, and wall time. Reported for legitimate users: the share of questions refused or
slowed (false throttles).

    OMP_NUM_THREADS=1 python benchmarks/bench_server_extraction.py --kb-size 1000 \
        --attack-queries 100 --worm-queries 40 --legit-users 20 --legit-questions 10,20
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import free_port, start_server, stop_server, wait_ready
from ragshield.types import Answer

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@dataclass
class HttpAsk:
    """``ask(question) -> Answer`` over HTTP, counting what the server did.

    A refusal comes back as its one-line reason: that is all a real attacker would see.
    """

    base: str
    token: str
    answered: int = 0
    refused: int = 0
    slowed: int = 0
    errors: int = 0
    first_refusal: int | None = None
    statuses: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client = httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=300
        )

    def __call__(self, question: str) -> Answer:
        r = self.client.post("/v1/ask", json={"question": question})
        self.statuses.append(r.status_code)
        if r.status_code == 200:
            body = r.json()
            self.answered += 1
            self.slowed += body.get("throttle") is not None
            text = body["answer"]
        elif r.status_code == 429:
            self.refused += 1
            if self.first_refusal is None:
                self.first_refusal = len(self.statuses)
            text = r.json()["detail"]
        else:
            self.errors += 1
            text = ""
        return Answer(question=question, text=text, passages=(), retrieved=())

    def close(self) -> None:
        self.client.close()


def make_attacks(encoder: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Fresh attack objects, same seed and budget for both runs."""
    from ragshield.attacks.extraction import RAGThief
    from ragshield.attacks.extraction.rag_thief import SEED_ANCHORS
    from ragshield.eval.extraction import attack_factory

    class QuietRAGThief(RAGThief):
        """RAG-Thief without the repeat-the-context commands (signature-aware attacker)."""

        name = "rag-thief-nocmd"

        def _command(self) -> str:
            return ""

    return {
        "rag-thief": attack_factory(
            "rag-thief", encoder=encoder, max_queries=args.attack_queries, seed=args.seed
        )(),
        "worm": attack_factory(
            "worm", encoder=encoder, max_queries=args.worm_queries, seed=args.seed
        )(),
        "rag-thief (no command)": QuietRAGThief(
            None,
            encoder,
            seed_queries=list(SEED_ANCHORS),
            max_queries=args.attack_queries,
            seed=args.seed,
        ),
    }


def write_config(work: Path, index: Path, throttle: bool, args: argparse.Namespace) -> Path:
    path = work / f"server-{'on' if throttle else 'off'}.toml"
    path.write_text(
        f'index = "{index}"\n'
        f'generator = "{args.generator}"\n'
        "[limits]\n"
        "requests_per_minute = 0\n"
        "requests_per_day = 0\n"
        f"concurrency = {1 if args.generator != 'extractive' else 2}\n"
        "[throttle]\n"
        f"enabled = {'true' if throttle else 'false'}\n"
        f"slow_seconds = {args.slow_seconds}\n"
        "[storage]\n"
        f'sqlite_path = "{work / ("on.db" if throttle else "off.db")}"\n',
        encoding="utf-8",
    )
    return path


def legit_sessions(
    keys: Any,
    base: str,
    label: str,
    questions: Sequence[str],
    users: int,
    per_user: int,
    seed: int,
) -> tuple[int, int, int]:
    """(questions asked, refused, slowed) over ``users`` fresh keys."""
    rng = np.random.default_rng(seed)
    asked = refused = slowed = 0
    for u in range(users):
        _, token = keys.create(f"patient-{label}-{u}", scopes="ask")
        ask = HttpAsk(base, token)
        for i in rng.choice(len(questions), size=per_user, replace=False):
            ask(questions[int(i)])
        asked += per_user
        refused += ask.refused
        slowed += ask.slowed
        ask.close()
    return asked, refused, slowed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--kb-size", type=int, default=1000)
    ap.add_argument("--attack-queries", type=int, default=100)
    ap.add_argument("--worm-queries", type=int, default=40)
    ap.add_argument("--legit-users", type=int, default=20)
    ap.add_argument("--legit-questions", default="10,20", help="questions per user, per setting")
    ap.add_argument("--slow-seconds", type=float, default=2.0)
    ap.add_argument("--generator", default="extractive")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", type=Path, default=Path("runs/cache"))
    args = ap.parse_args()
    per_user = [int(x) for x in args.legit_questions.split(",") if x.strip()]

    try:
        from ragshield.eval.crr import ChunkRecoveryScorer
        from ragshield.eval.extraction_data import build_store, encode_cached, load_knowledge_base
    except ImportError as exc:  # the extraction harness ships separately
        raise SystemExit(f"the extraction harness is not available: {exc}") from exc
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.server.auth import KeyManager
    from ragshield.server.config import load_config
    from ragshield.server.db import Database

    t_start = time.perf_counter()
    kb = load_knowledge_base(
        "chatdoctor", data_dir=args.data_dir, limit=args.kb_size, seed=args.seed
    )
    encoder = SentenceTransformerEncoder()
    vectors = encode_cached(kb.texts, encoder, args.cache_dir)
    scorer = ChunkRecoveryScorer(encoder).fit(kb.texts, vectors)
    questions = [q.question for q in kb.questions]
    test_questions = questions[len(questions) // 2 :]  # dev half: questions[: len // 2]

    results: dict[str, dict[str, Any]] = {}
    legit: dict[str, dict[int, tuple[int, int, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-extraction-") as tmp:
        work = Path(tmp)
        build_store(kb, vectors, encoder.name).save(work / "index")
        for mode in ("off", "on"):
            cfg_path = write_config(work, work / "index", mode == "on", args)
            cfg = load_config(cfg_path)
            db = Database(cfg.storage.resolved_url())
            db.migrate()
            keys = KeyManager(db, cfg.auth)
            port = free_port()
            base = f"http://127.0.0.1:{port}"
            log = work / f"server-{mode}.log"
            proc = start_server(cfg_path, port, log)
            try:
                wait_ready(base, proc, log, timeout=600)
                for name, attack in make_attacks(encoder, args).items():
                    key_id, token = keys.create(f"{name}-{mode}", scopes="ask")
                    ask = HttpAsk(base, token)
                    t0 = time.perf_counter()
                    outputs = attack.run(ask)
                    wall = time.perf_counter() - t0
                    ask.close()
                    crr = scorer.score(list(outputs)).crr
                    exposure = len(db.served_chunk_ids(key_id)) / len(kb.passages)
                    results[f"{name}|{mode}"] = {
                        "crr": crr,
                        "exposure": exposure,
                        "queries": len(ask.statuses),
                        "answered": ask.answered,
                        "refused": ask.refused,
                        "slowed": ask.slowed,
                        "errors": ask.errors,
                        "first_refusal": ask.first_refusal,
                        "wall": wall,
                    }
                    print(f"[{mode}] {name}: {results[f'{name}|{mode}']}", file=sys.stderr)
                legit[mode] = {}
                for n in per_user:
                    legit[mode][n] = legit_sessions(
                        keys, base, f"{mode}-{n}", test_questions, args.legit_users, n, args.seed
                    )
                    print(f"[{mode}] legit x{n}: {legit[mode][n]}", file=sys.stderr)
            finally:
                stop_server(proc)
                db.close()

    print(
        f"# bench_server_extraction — {platform.machine()}, {os.cpu_count()} cores, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')}; seed {args.seed}"
    )
    print(
        f"knowledge base: ChatDoctor (GenMedGPT-5k), seeded subset of {len(kb.passages)} "
        f"chunks; uvicorn on loopback, k=5, extractive generator={args.generator!r}, no "
        "defense filter, budgets off; throttle 'on' = config defaults (signatures refuse + "
        f"block 900 s; coverage cap max(50, 5 %) = "
        f"{max(50, int(np.ceil(0.05 * len(kb.passages))))} chunks/day; novelty > 0.9 over "
        f"20 answers slows by {args.slow_seconds} s)"
    )
    print(
        f"budgets: RAG-Thief {args.attack_queries} queries, worm {args.worm_queries} "
        f"queries (rounds); legitimate users: {args.legit_users} keys per setting, questions "
        f"from the test half ({len(test_questions)} of {len(questions)}); nothing tuned"
    )
    print()
    print(
        "| attack | throttle | CRR | exposure (chunks reached generator / KB) | queries "
        "| answered | refused | slowed | first refusal at query | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, r in results.items():
        name, mode = key.split("|")
        print(
            f"| {name} | {mode} | {r['crr']:.3f} | {r['exposure']:.3f} | {r['queries']} | "
            f"{r['answered']} | {r['refused']} | {r['slowed']} | "
            f"{r['first_refusal'] if r['first_refusal'] is not None else '-'} | "
            f"{r['wall']:.1f} |"
        )
    print()
    print("| legitimate users | throttle | questions | refused | slowed | false-throttle rate |")
    print("|---|---|---|---|---|---|")
    for mode, by_n in legit.items():
        for n, (asked, refused, slowed) in by_n.items():
            print(
                f"| {args.legit_users} × {n} questions | {mode} | {asked} | {refused} | "
                f"{slowed} | {(refused + slowed) / asked:.3f} |"
            )
    errors = sum(r["errors"] for r in results.values())
    print()
    print(
        f"HTTP errors other than 429: {errors}; total wall time "
        f"{time.perf_counter() - t_start:.0f} s"
    )


if __name__ == "__main__":
    main()
