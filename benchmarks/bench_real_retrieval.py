"""Defenses on real retrieval: the README's headline tables.

Usage::

    python benchmarks/bench_real_retrieval.py                       # both corpora, test split
    python benchmarks/bench_real_retrieval.py --split dev --datasets squad
    python benchmarks/bench_real_retrieval.py --defenses "none;ragdefender" --settings clean

What it measures (see :mod:`ragshield.eval.real_retrieval` for the metrics): every passage
of an on-topic corpus (``../shared/data/ontopic/``) is indexed with the packaged MiniLM
encoder in an exact FAISS index; each setting's attack passages are planted into a copy;
each question is retrieved for real (k = 10 by default) and every defense chain filters
it; the 5 survivors nearest the question are the context. Rows: no defense, the paper's
algorithm, the authors' ``ragdefender`` package (when installed; its embedding calls are
served from the same vectors), ragshield's defenses. The split rule (SQuAD: articles by
title, even = dev / odd = test; HotpotQA: the 44 shared poisoning targets = test) is in
:mod:`ragshield.eval.ontopic`; thresholds were chosen on dev only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATASETS = {
    "hotpotqa": ("ontopic/hotpotqa_distractor_dev100.json", "poisoning/hotpotqa", None),
    "squad": ("ontopic/squad_v1.1_dev_43articles.json", None, 6),
}
SETTINGS = "clean,poisonedrag-1,poisonedrag,mixed-2x,mixed-4x"
DEFENSES = "none;ragdefender-paper;authors;ragdefender;ecosaferag;ragdefender,ecosaferag"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="hotpotqa,squad")
    ap.add_argument("--split", default="test")
    ap.add_argument("--settings", default=SETTINGS)
    ap.add_argument("--defenses", default=DEFENSES)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-topic", type=int, default=None, help="SQuAD questions per article")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/ragshield/bench"))
    ap.add_argument("--generator", default=None, help="e.g. qwen2.5-0.5b: end-to-end ASR/ACC")
    ap.add_argument("--limit", type=int, default=None, help="first N questions of the split")
    args = ap.parse_args()
    if not SHARED.is_dir():
        sys.exit(f"skipped: {SHARED} is absent (the shared evaluation data)")

    from ragshield.defenses.registry import build_chains
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.cli.retrieval import ragdefender_params
    from ragshield.eval.ontopic import load_ontopic
    from ragshield.eval.real_retrieval import run_real_eval

    enc = SentenceTransformerEncoder()
    gen = bench_generator(args.generator, enc, args.cache_dir)
    for name in args.datasets.split(","):
        rel, pois, per_topic = DATASETS[name]
        data = load_ontopic(
            SHARED / rel,
            poisoning_dir=SHARED / pois if pois else None,
            per_topic=args.per_topic or per_topic,
            seed=args.seed,
        )
        mode = "multi_hop" if name == "hotpotqa" else "single_hop"
        spec = ";".join(c for c in args.defenses.split(";") if c != "authors")
        chains = build_chains(spec, enc, ragdefender_params(mode))
        if "authors" in args.defenses.split(";"):
            chains = _with_authors(chains, enc, mode)
        t0 = time.perf_counter()
        cases = data.split(args.split)[: args.limit]
        res = run_real_eval(
            data, cases, chains, args.settings.split(","),  # type: ignore[arg-type]
            encoder=enc, k=args.k, seed=args.seed, split=args.split, cache_dir=args.cache_dir,
            generator=gen,
        )  # fmt: skip
        print(res.to_markdown())
        print(f"({name}: {len(data.passages)} passages indexed, "
              f"{time.perf_counter() - t0:.0f} s)\n", flush=True)  # fmt: skip


def bench_generator(spec: str | None, enc: object, cache_dir: str) -> Any:
    """The end-to-end generator of the retrieval benchmarks (``None`` without ``spec``):
    greedy, <= 32 new tokens, answers cached under ``cache_dir/answers`` so a rerun
    resumes and every benchmark that asks the same (question, context) shares the answer.
    Threads: the generator's own default (llama.cpp: one), the machine is shared."""
    if not spec:
        return None
    from ragshield.generate.factory import make_generator

    return make_generator(
        spec, enc, cache_dir=os.path.join(cache_dir, "answers"), max_new_tokens=32, dtype="auto"
    )  # type: ignore[arg-type]


def _with_authors(chains: dict, enc: object, mode: str) -> dict:
    """Insert the authors' package after the paper row, if it is installed."""
    try:
        from bench_poisoning import AuthorsRAGDefender, authors_package_version
    except ImportError as exc:  # pragma: no cover - the package is optional
        print(f"authors' package row skipped: {exc}", file=sys.stderr)
        return chains
    try:
        import ragdefender  # noqa: F401
    except ImportError:
        print("authors' package `ragdefender` not installed: its row is skipped "
              "(pip install --no-deps ragdefender pandas)", file=sys.stderr)  # fmt: skip
        return chains
    out = {}
    for label, chain in chains.items():
        out[label] = chain
        if label == "ragdefender-paper":
            out[f"authors' ragdefender {authors_package_version()}"] = AuthorsRAGDefender(
                enc.model_,
                mode,
                cached_encode=enc.encode,  # type: ignore[attr-defined]
            )
    return out


if __name__ == "__main__":
    main()
