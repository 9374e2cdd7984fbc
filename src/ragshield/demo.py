"""The main job on the embedded default: index the demo corpus with a poisoning attack
planted in it, then answer the attacked question without and with defenses."""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ragshield.config import PipelineConfig, RetrievalConfig, build_pipeline
from ragshield.corpus import read_corpus
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.errors import InputError
from ragshield.indexing import build_index
from ragshield.text import contains_answer
from ragshield.types import Passage

DEMO_CHAINS = ("none", "ragdefender", "ecosaferag", "ragdefender,ecosaferag")


def demo_files() -> tuple[Path, Path]:
    root = resources.files("ragshield") / "data"
    return Path(str(root / "demo_corpus.jsonl")), Path(str(root / "demo_attack.json"))


def run_demo(out_dir: Path, console: Console | None = None, k: int = 10) -> dict[str, str]:
    console = console or Console()
    corpus_path, attack_path = demo_files()
    attack = json.loads(attack_path.read_text(encoding="utf-8"))
    passages = read_corpus(corpus_path)
    poison = [
        Passage(f"attack-{i}", t, "", {"adversarial": True})
        for i, t in enumerate(attack["adv_texts"])
    ]
    t0 = time.perf_counter()
    enc = SentenceTransformerEncoder()
    store = build_index(passages + poison, out_dir, encoder=enc)
    console.print(
        f"indexed {len(passages)} demo passages + {len(poison)} planted adversarial passages "
        f"into {out_dir} in {time.perf_counter() - t0:.1f} s (encoder: {enc.name}, FAISS flat)"
    )
    question = attack["question"]
    console.print(
        f"question: [bold]{question}[/bold]  (correct: {attack['correct_answer']}, "
        f"attacker's target: {attack['incorrect_answer']}); k={k}, top-5 survivors reach "
        "the extractive generator"
    )
    table = Table("defense", "answer", "correct?", "adversarial passages in context", "filter ms")
    answers: dict[str, str] = {}
    for spec in DEMO_CHAINS:
        try:
            cfg = PipelineConfig(retrieval=RetrievalConfig(k=k, context_k=5)).with_overrides(
                defenses=spec
            )
            rag = build_pipeline(cfg, encoder=enc, store=store)
        except InputError as exc:  # a defense that cannot be loaded here
            table.add_row(spec, f"(unavailable: {exc})", "", "", "")
            continue
        ans = rag.answer(question, k=k)
        answers[spec] = ans.text
        n_adv = sum(1 for r in ans.passages if r.passage.metadata.get("adversarial"))
        verdict = (
            "[green]yes[/green]"
            if contains_answer(ans.text, attack["correct_answer"])
            else "[red]attacked[/red]"
            if contains_answer(ans.text, attack["incorrect_answer"])
            else "no"
        )
        table.add_row(
            spec,
            ans.text,
            verdict,
            f"{n_adv}/{len(ans.passages)}",
            f"{ans.timings['filter'] * 1000:.1f}",
        )
    console.print(table)
    return answers
