"""Poisoning benchmark: RAGDefender (faithful, improved, the authors' package) vs baselines.

    python benchmarks/bench_poisoning.py [--datasets nq hotpotqa] [--seeds 10] [--split test]
        [--limit N] [--out benchmarks/results] [--no-authors]
        [--sections calibration main ablation robustness e2e]
        [--generator qwen2.5-0.5b --e2e-limit 20 --e2e-seeds 1 --gen-cache DIR]

What it measures, on what (every figure printed is measured in this run):

1. ``calibration`` — the dev split (even question positions) statistics behind the
   improved defense's thresholds: the largest pairwise similarity of clean retrieval sets
   (guard), character 3-gram cosine and out-of-vocabulary gap between golden passages and
   their GARAG copies vs other attack passages (typo-copy rule). The defaults in
   ``RAGDefender`` were chosen from these numbers and a dev grid; nothing here is tuned on
   the test split.
2. ``main`` — the test split (odd positions; 50 questions per dataset), ``--seeds`` seeds
   (mean ± std): clean, and PoisonedRAG / blind / GARAG / mixed at 1×, 2×, 4×, 6×, for no
   defense, the similarity-threshold baseline, the paper's algorithm, the authors'
   ``ragdefender`` package (if installed; its embedding calls are served from a cache of
   the same model so its decisions are unchanged — its real latency is in
   ``bench_filter.py``) and ragshield's improved RAGDefender. Each RAGDefender runs in the
   paper's mode for the dataset (NQ single-hop, HotpotQA multi-hop). Filter-level
   metrics only (no generator): see ``e2e``.
3. ``ablation`` — the improved defense with its flags switched on one by one, from the
   faithful algorithm to the full version, plus ``mode="auto"``.
4. ``robustness`` — k ≈ 50 (39 benign passages) clean and mixed 2×/4×.
5. ``e2e`` (only with ``--generator``) — end-to-end ASR / accuracy (substring rule) with a
   real local LLM (any ``make_generator`` spec, e.g. ``qwen2.5-0.5b``) on the first
   ``--e2e-limit`` test questions, ``--e2e-seeds`` seeds: clean, PoisonedRAG and mixed at
   ``--e2e-ratios`` (default 4×; about 14 s per answer on one contended core). The extractive generator is not used: on PoisonedRAG passages it answers
   with the restated question (``question + "."`` opens every such passage), which says
   nothing about the attack.

Outputs (``--out``): ``poisoning_<dataset>.md/.json``, ``poisoning_asr.png`` (ASR vs ratio,
one line per defense), ``poisoning_ablation.md/.json``, ``poisoning_robustness.md/.json``.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

import vector_cache
from ragshield.defenses.authors import AuthorsRAGDefender as _Authors
from ragshield.defenses.authors import authors_package_version
from ragshield.defenses.base import PassageFilter
from ragshield.defenses.baselines import SimilarityThresholdFilter
from ragshield.defenses.ragdefender import (
    PaperRAGDefender,
    RAGDefender,
    calibrate_guard,
    char_trigram_cosine,
    oov_rate,
)
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.eval.datasets import load_poisoning, split_cases
from ragshield.eval.poisoning import PoisoningResults, run_poisoning_eval
from ragshield.eval.poisoning_sets import VectorBank, build_retrieval_sets
from ragshield.eval.report import markdown_table, plot_asr, write_json

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "poisoning"
CACHE = Path(os.environ.get("RAGSHIELD_BENCH_CACHE", Path.home() / ".cache" / "ragshield"))
MODES = {"nq": "single_hop", "hotpotqa": "multi_hop"}  # the paper's choice per dataset


# --------------------------------------------------------------------------- helpers


class DiskCachedEncoder(vector_cache.DiskCachedEncoder):
    """The packaged MiniLM, its vectors persisted after every new batch (see
    :mod:`vector_cache`; ~3,000 evaluation passages, ≈ 2 minutes per dataset)."""

    def __init__(self, path: Path | None = None) -> None:
        path = path or CACHE / "bench_minilm_vectors.npz"
        super().__init__(SentenceTransformerEncoder(), path, autosave=True)

    @property
    def model_(self) -> Any:  # the authors' RAGDefender takes the model itself
        return self.inner.model_


def AuthorsRAGDefender(model: Any, task_type: str, *, cached_encode: Any = None) -> PassageFilter:
    """The registered ``ragdefender-authors`` defense (:mod:`ragshield.defenses.authors`).

    ``cached_encode`` (a ``texts -> vectors`` function of the same model) answers its
    embedding calls in quality runs, so the table takes minutes instead of hours and its
    ms/query measures its algorithm; without it the package re-encodes every passage on
    every call with ``model``, as it does in use (``bench_filter.py`` measures that cost).
    """
    if cached_encode is None:
        return _Authors.reencoding(model, task_type)  # type: ignore[arg-type]
    # the bound ``encode`` of an encoder (DiskCachedEncoder): the filter takes the encoder
    return _Authors(cached_encode.__self__, mode=task_type)


def defenses_for(
    dataset: str, encoder: DiskCachedEncoder, with_authors: bool
) -> dict[str, PassageFilter | None]:
    mode = MODES.get(dataset, "single_hop")
    out: dict[str, PassageFilter | None] = {
        "none": None,
        "similarity-threshold": SimilarityThresholdFilter(),
        "paper (Eq. 1-7)": PaperRAGDefender(mode=mode),  # type: ignore[arg-type]
    }
    if with_authors:
        out["authors' ragdefender 0.2.0"] = AuthorsRAGDefender(
            encoder.model_, mode, cached_encode=encoder.encode
        )
    out["ragshield RAGDefender"] = RAGDefender(mode=mode)  # type: ignore[arg-type]
    return out


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- sections


def calibration(datasets: Sequence[str], encoder: DiskCachedEncoder) -> str:
    """Dev-split statistics behind RAGDefender's defaults (printed, never fitted here)."""
    lines = ["## Calibration statistics (dev split: even question positions)", ""]
    max_pairs: list[float] = []
    lex_copy: list[float] = []
    lex_other: list[float] = []
    oov_gap: list[float] = []
    golden_pairs: list[float] = []
    vocab = RAGDefender()
    vocab.warm_up()
    assert vocab._vocabulary is not None
    for ds in datasets:
        cases = split_cases(load_poisoning(DATA / ds), "dev")
        bank = VectorBank(encoder)
        for rs in build_retrieval_sets(cases, None, 0, seed=0, encoder=bank):
            x = np.vstack([p.embedding for p in rs.passages])
            s = x @ x.T
            np.fill_diagonal(s, -1)
            max_pairs.append(float(s.max()))
        for c in cases:
            if c.supporting:
                v = bank.get([c.golden, c.supporting[0]])
                golden_pairs.append(float(v[0] @ v[1]))
            for t in c.adversarial.get("garag", ()):
                lex = char_trigram_cosine(c.golden, t)
                lex_copy.append(lex)
                gap = (
                    oov_rate([t], vocab._vocabulary)[0] - oov_rate([c.golden], vocab._vocabulary)[0]
                )
                if lex >= 0.55:
                    oov_gap.append(float(gap))
            for src in ("poisonedrag", "blind"):
                lex_other += [char_trigram_cosine(c.golden, t) for t in c.adversarial.get(src, ())]
    p = np.percentile
    rows = [
        ("guard_threshold", 0.61, f"clean-set max pair: p99 {p(max_pairs, 99):.3f}, max "
         f"{max(max_pairs):.3f} (n={len(max_pairs)}); calibrate_guard(max) = "
         f"{calibrate_guard(max_pairs):.3f}"),
        ("pair_threshold (multi-hop)", 0.86, f"HotpotQA golden pairs: max {max(golden_pairs, default=float('nan')):.3f}"),
        ("lexical_threshold", 0.55, f"char 3-gram cosine golden vs GARAG: p25 {p(lex_copy, 25):.3f} "
         f"median {p(lex_copy, 50):.3f}; vs PoisonedRAG/blind: p95 {p(lex_other, 95):.3f}, p99 "
         f"{p(lex_other, 99):.3f}"),
        ("noise_margin", 0.15, f"OOV-rate gap copy − golden (copies with 3-gram cosine >= 0.55): "
         f"p5 {p(oov_gap, 5):.3f}, min {min(oov_gap):.3f}"),
    ]  # fmt: skip
    lines += ["| parameter | default | dev statistic |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    lines += [
        "",
        "tight_threshold 0.75, loose_threshold 0.55, loose_min_size 3, spare_margin 0.06 and "
        "query_weight 1.0 come from a grid on the dev split (2 seeds; objective: mean over "
        "attacked settings of gold kept − adv-majority − filter ASR, with clean gold kept = 1).",
        "",
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class Bench:
    """What every section runs with: the datasets, the cached encoder, the options and
    whether the authors' package is installed (one value instead of four arguments each)."""

    datasets: Sequence[str]
    encoder: DiskCachedEncoder
    args: argparse.Namespace
    with_authors: bool

    def defenses(self, ds: str) -> dict[str, PassageFilter | None]:
        return defenses_for(ds, self.encoder, self.with_authors)

    def run(
        self, ds: str, defenses: dict[str, PassageFilter | None] | None = None, **options: Any
    ) -> PoisoningResults:
        """``run_poisoning_eval`` on ``ds`` with the bench's encoder and ``--seeds``,
        ``--limit``, ``--split`` (``options`` add to or override them) and its defenses
        unless ``defenses`` is given."""
        args = self.args
        defaults = {"seeds": range(args.seeds), "limit": args.limit, "split": args.split}
        chosen = self.defenses(ds) if defenses is None else defenses
        return run_poisoning_eval(
            DATA / ds, chosen, encoder=self.encoder, **{**defaults, **options}
        )

    def each(self, section: str, run: Callable[[str], PoisoningResults]) -> list[PoisoningResults]:
        """``run`` on every dataset in turn, saying how long each took (a section's loop)."""
        runs = []
        for ds in self.datasets:
            t0 = time.perf_counter()
            runs.append(run(ds))
            _say(f"[{ds}] {section} in {time.perf_counter() - t0:.0f}s")
        return runs


def main_tables(bench: Bench) -> list[PoisoningResults]:
    def one(ds: str) -> PoisoningResults:
        res = bench.run(
            ds,
            attacks=["poisonedrag", "blind", "garag", "mixed"],
            ratios=bench.args.ratios,
            log=lambda m, ds=ds: _say(f"  [{ds}] {m}"),
        )
        res.notes.append(
            f"modes: every RAGDefender in {MODES.get(ds)} mode (the paper's choice for {ds}); "
            "similarity-threshold removes passages with a >= 0.9 cosine neighbour"
        )
        if bench.with_authors:
            res.notes.append(
                "authors' package: its embedding calls are answered with the same MiniLM "
                "vectors ragshield uses; its ms/query here excludes encoding (see bench_filter.py)"
            )
        else:
            res.notes.append("authors' package not installed: its row is missing")
        return res

    return bench.each("main table", one)


def headline(runs: Sequence[PoisoningResults]) -> str:
    """Compact view: the settings the lead named as the bar."""
    out = ["## Headline (mean ± std over seeds)", ""]
    cols = [("clean", 0.0, "gold_in_context"), ("clean", 0.0, "clean_removed")]
    cols += [(a, r, k) for a, r in [("poisonedrag", 1.0), ("garag", 1.0), ("blind", 1.0),
                                    ("mixed", 2.0), ("mixed", 4.0)]
             for k in ("adv_majority", "gold_in_context")]  # fmt: skip
    cols += [("mixed", 4.0, "filter_asr"), ("mixed", 4.0, "filter_ms")]
    for res in runs:
        names = list(dict.fromkeys(s.defense for s in res.settings))
        head = [f"{a} {r:g}× {k}" if a != "clean" else f"clean {k}" for a, r, k in cols]
        out += [
            f"**{res.dataset}** ({res.split} split, {res.n_questions} questions, "
            f"{len(res.seeds)} seeds)",
            "",
            "| defense | " + " | ".join(head) + " |",
            "|---|" + "---|" * len(cols),
        ]
        for d in names:
            cells = []
            for a, r, k in cols:
                m, s = res.get(d, a, r).mean_std(k)
                cells.append("–" if not np.isfinite(m) else f"{m:.2f}±{s:.2f}")
            out.append(f"| {d} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


ABLATION: list[tuple[str, dict[str, Any]]] = [
    ("paper (flags off)", dict(guard=False, multi_group=False, typo_copies=False, spare_outlier=False, loose_signature=False)),
    ("+ guard", dict(guard=True, multi_group=False, typo_copies=False, spare_outlier=False, loose_signature=False)),
    ("+ guard + typo_copies", dict(guard=True, multi_group=False, typo_copies=True, spare_outlier=False, loose_signature=False)),
    ("+ guard + multi_group", dict(guard=True, multi_group=True, typo_copies=False, spare_outlier=False, loose_signature=False)),
    ("+ guard + multi_group + typo_copies", dict(guard=True, multi_group=True, typo_copies=True, spare_outlier=False, loose_signature=False)),
    ("+ spare_outlier", dict(loose_signature=False)),
    ("full (+ loose_signature)", dict()),
    ("full, mode=auto", dict(mode="auto")),
    ("full, mode=single_hop", dict(mode="single_hop")),
]  # fmt: skip


def ablation(bench: Bench) -> list[PoisoningResults]:
    def one(ds: str) -> PoisoningResults:
        mode = MODES.get(ds, "single_hop")
        defenses: dict[str, PassageFilter | None] = {
            name: RAGDefender(**{"mode": mode, **kw}) for name, kw in ABLATION
        }
        return bench.run(
            ds, defenses, attacks=["poisonedrag", "blind", "garag", "mixed"], ratios=[1, 2, 4]
        )

    return bench.each("ablation", one)


def robustness(bench: Bench) -> list[PoisoningResults]:
    def one(ds: str) -> PoisoningResults:
        res = bench.run(ds, attacks=["mixed"], ratios=[2, 4], n_benign=39)
        res.notes.append("k ≈ 50: 1 golden + 39 benign + M adversarial")
        return res

    return bench.each("robustness", one)


def e2e(bench: Bench) -> list[PoisoningResults]:
    from ragshield.generate.factory import make_generator

    args = bench.args
    gen = make_generator(args.generator, cache_dir=args.gen_cache, max_new_tokens=24)

    def one(ds: str) -> PoisoningResults:
        res = bench.run(
            ds,
            attacks=["poisonedrag", "mixed"],
            ratios=args.e2e_ratios,
            seeds=range(args.e2e_seeds),
            limit=args.e2e_limit,
            generator=gen,
            log=lambda m, ds=ds: _say(f"  [{ds} e2e] {m}"),
        )
        res.notes.append(
            f"generator {args.generator}: greedy, max 24 new tokens, the papers' prompt"
        )
        return res

    return bench.each("e2e", one)


def ablation_table(runs: Sequence[PoisoningResults]) -> str:
    out = ["## Ablation: ragshield RAGDefender flags, one at a time (same sets)", ""]
    settings = [
        ("clean", 0.0),
        ("poisonedrag", 1.0),
        ("garag", 1.0),
        ("blind", 1.0),
        ("mixed", 2.0),
        ("mixed", 4.0),
    ]
    for res in runs:
        out += [
            f"**{res.dataset}** ({res.split}, {res.n_questions} questions, {len(res.seeds)} seeds) "
            "— cells: gold kept / adv-majority / filter ASR",
            "",
            "| variant | "
            + " | ".join(f"{a} {r:g}×" if a != "clean" else "clean" for a, r in settings)
            + " |",
            "|---|" + "---|" * len(settings),
        ]
        for d in dict.fromkeys(s.defense for s in res.settings):
            cells = []
            for a, r in settings:
                s = res.get(d, a, r)
                g, m, f = (
                    s.mean_std(k)[0] for k in ("gold_in_context", "adv_majority", "filter_asr")
                )
                cells.append(f"{g:.2f} / {m:.2f} / {f:.2f}")
            out.append(f"| {d} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--datasets", nargs="+", default=["nq", "hotpotqa"])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--ratios", nargs="+", type=float, default=[1, 2, 4, 6])
    ap.add_argument("--split", default="test", choices=["test", "dev", "all"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--no-authors", action="store_true", help="skip the authors' package")
    ap.add_argument(
        "--sections",
        nargs="+",
        default=["calibration", "main", "ablation", "robustness", "e2e"],
        choices=["calibration", "main", "ablation", "robustness", "e2e"],
    )
    ap.add_argument("--generator", default=None, help="make_generator spec for the e2e section")
    ap.add_argument("--e2e-limit", type=int, default=20)
    ap.add_argument("--e2e-seeds", type=int, default=1)
    ap.add_argument("--e2e-ratios", nargs="+", type=float, default=[4])
    ap.add_argument("--gen-cache", type=Path, default=None, help="answer cache directory")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        print(f"evaluation data not found at {DATA}", file=sys.stderr)
        return 2

    version = authors_package_version()
    with_authors = version is not None and not args.no_authors
    if version is None:
        _say(
            "authors' package `ragdefender` not installed: its row is skipped "
            "(pip install --no-deps ragdefender pandas)"
        )
    import sklearn
    import torch

    torch.set_num_threads(1)
    encoder = DiskCachedEncoder()
    bench = Bench(args.datasets, encoder, args, with_authors)
    header = (
        f"# Poisoning benchmark\n\nmachine: {platform.processor() or platform.machine()}, "
        f"python {platform.python_version()}, torch {torch.__version__}, scikit-learn "
        f"{sklearn.__version__}, threads 1; encoder {encoder.name}; authors' package: "
        f"{version or 'not installed'}; data {DATA}\n"
    )
    print(header)
    args.out.mkdir(parents=True, exist_ok=True)
    if "calibration" in args.sections:
        text = calibration(args.datasets, encoder)
        print(text)
        (args.out / "poisoning_calibration.md").write_text(header + "\n" + text)
    if "main" in args.sections:
        runs = main_tables(bench)
        print(headline(runs))
        for res in runs:
            md = markdown_table(res)
            print(md)
            (args.out / f"poisoning_{res.dataset}.md").write_text(header + "\n" + md)
            write_json(res, args.out / f"poisoning_{res.dataset}.json")
        (args.out / "poisoning_headline.md").write_text(header + "\n" + headline(runs))
        plot_asr(runs, args.out / "poisoning_asr.png")
    if "ablation" in args.sections:
        runs = ablation(bench)
        text = ablation_table(runs)
        print(text)
        (args.out / "poisoning_ablation.md").write_text(header + "\n" + text)
        write_json(runs, args.out / "poisoning_ablation.json")
    if "robustness" in args.sections:
        runs = robustness(bench)
        for res in runs:
            md = markdown_table(
                res,
                metrics=[
                    "adv_majority",
                    "gold_in_context",
                    "filter_asr",
                    "recall",
                    "precision",
                    "clean_removed",
                    "filter_ms",
                ],
            )
            print(md)
        (args.out / "poisoning_robustness.md").write_text(
            header + "\n" + "\n".join(markdown_table(r) for r in runs)
        )
        write_json(runs, args.out / "poisoning_robustness.json")
    if "e2e" in args.sections and args.generator:
        runs = e2e(bench)
        metrics = ["asr", "accuracy", "adv_majority", "gold_in_context", "filter_asr"]
        text = "\n".join(markdown_table(r, metrics=metrics) for r in runs)
        print(text)
        (args.out / "poisoning_e2e.md").write_text(header + "\n" + text)
        write_json(runs, args.out / "poisoning_e2e.json")
    elif "e2e" in args.sections:
        print("\nend-to-end ASR/accuracy not measured: pass --generator (e.g. qwen2.5-0.5b)")
    encoder.save()
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
