"""EcoSafeRAG benchmark: dev-split sweeps, test-split ASR table, token saving, latency.

    python benchmarks/bench_ecosaferag.py [--data ../shared/data/poisoning/nq] [--seed 0]
        [--limit N] [--plot ecosaferag_sweep.png] [--json out.json]
        [--optimize-suffix 3] [--generator smollm2-135m --e2e-limit 20]

What it measures, on what (every figure printed is measured in this run):

1. Dev split (even question positions, :func:`ragshield.eval.datasets.split_cases`): the
   retrieved sets of :mod:`ragshield.eval.injection` for clean, PoisonedRAG (M=1, 5),
   injection (M=1, 5), injection into PoisonedRAG passages (M=1), hijacked golden passage
   and published GCG suffixes (M=1). Sweeps eps 0.1–1.0 and tau 0.1–0.9 (the paper's
   open detail), then variance_threshold and context_weight; one coordinate-descent pass
   picks each value by ``mean(1 − filter ASR over attacks) + mean(gold answer kept) +
   mean(prompt tokens saved)`` (security, clean-set accuracy proxy and cost weighted
   equally; up to two passes).
   The eps and tau sweeps are plotted (``--plot``).
2. Test split (odd positions; never used for tuning): filter ASR per attack and M for no
   defense, EcoSafeRAG (the dev-selected configuration), RAGDefender, and RAGDefender →
   EcoSafeRAG chained; gold answer kept; prompt tokens saved versus the undefended top-5
   context (MiniLM WordPiece tokenizer, the papers' prompt). ``injection-published`` (the
   PromptInject strings) is never used on dev: it checks the baits on wording they were
   not written next to.
3. Latency of the filter call alone, p50/p95, with a fresh encoder whose cache is off (so
   every sentence and bait is really encoded): k=5 (golden + 4 benign) and k=10 (golden +
   4 benign + 5 PoisonedRAG).
4. Ablations on dev at the selected configuration (no baits, query-independent baits, no
   query projection, a ±1 context window, passage-scope bait flags, no clause split).
6. Real retrieval (issue #17; ``--only real`` runs just this): the 1,888 SQuAD paragraphs
   of ``ontopic/`` indexed with MiniLM in a FaissStore (vectors cached under
   ``~/.cache/ragshield/bench``), ~300 questions per split (articles sorted by title: even
   positions dev, odd test; stratified per article, seed 0), top-k for real. Answer kept
   (some answer string in the kept text of the 5 best-scored survivors) at k=5/10, fraction
   of sentences removed, and one planted passage per question added to a copy of the index
   (question-prefixed injection, question + genuine paragraph carrying an injection,
   off-topic injection, GCG suffix): caught among retrieved + answer kept. Filter latency
   p50/p95 at k=10 on one thread, warm (pipeline: sentence vectors precomputed at index
   time, query vector cached by the retriever's call) and cold (no cache).
5. Optional: ``--optimize-suffix N`` runs :class:`GCGSuffixOptimizer` (greedy coordinate
   gradient) against the packaged SmolLM2-135M on N dev questions and evaluates the
   resulting suffixes as the ``suffix-optimized`` setting on test; ``--generator`` adds
   end-to-end ASR/accuracy on the first ``--e2e-limit`` test questions.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import json
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.attacks.injection import (
    INJECTION_TEMPLATES,
    POSITIONS,
    fill_template,
    insert_instruction,
    instruction_survives,
)
from ragshield.attacks.suffix import AdversarialSuffixAttack, universal_suffixes
from ragshield.defenses.compose import FilterChain
from ragshield.defenses.ecosaferag import PRESETS, EcoSafeRAG
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.eval import figures
from ragshield.eval.datasets import load_poisoning, split_cases
from ragshield.eval.injection import (
    OWN_KINDS,
    SETTINGS,
    AttackSet,
    build_attack_set,
    run_injection_eval,
    score_sets,
    to_dict,
)
from ragshield.eval.poisoning_sets import VectorBank, benign_passages
from ragshield.generate.extractive import ExtractiveGenerator
from ragshield.store.faiss_store import FaissStore
from ragshield.text import contains_answer, normalize_answer, split_sentences
from ragshield.types import Passage
from vector_cache import DiskCachedEncoder

DEV_SETTINGS: list[tuple[str, int]] = [
    ("clean", 0),
    ("poisonedrag", 1),
    ("poisonedrag", 5),
    ("injection", 1),
    ("injection", 5),
    ("injection-poisonedrag", 1),
    ("injection-hijack", 0),
    ("suffix", 1),
]
SWEEPS: dict[str, list[Any]] = {
    "eps": [round(0.1 * i, 1) for i in range(1, 11)],
    "tau": [round(0.1 * i, 1) for i in range(1, 10)],
    "variance_threshold": [0.2, 0.25, 0.3, 0.35, 0.4, 0.5],
    "context_weight": [0.0, 0.1, 0.2, 0.3, 0.5],
}
START = {"eps": 0.6, "tau": 0.5, "variance_threshold": 0.35, "context_weight": 0.3}


def ragdefender(encoder: Any) -> tuple[str, Any]:
    """The improved RAGDefender when it exists in this tree, else the paper's version."""
    from ragshield.defenses import ragdefender as rd

    if hasattr(rd, "RAGDefender"):
        return "ragdefender", rd.RAGDefender(encoder=encoder)
    return "ragdefender-paper", rd.PaperRAGDefender(encoder=encoder)


def evaluate(
    sets: dict[tuple[str, int], list[AttackSet]], flt: Any, count_tokens: Any
) -> dict[str, Any]:
    cells = {}
    for key, ss in sets.items():
        r = score_sets(ss, flt, count_tokens=count_tokens)
        cells[f"{key[0]}@{key[1]}"] = {
            "asr": float(np.nanmean(r["asr_filter"])),
            "gold": float(np.nanmean(r["gold_answer_kept"])),
            "saving": float(np.nanmean(r["token_saving"])),
        }
    attacks = [v["asr"] for k, v in cells.items() if not k.startswith("clean")]
    golds = [v["gold"] for v in cells.values()]
    summary = {
        "asr": float(np.mean(attacks)),
        "gold": float(np.mean(golds)),
        "saving": float(np.mean([v["saving"] for v in cells.values()])),
    }
    # the three things the issue asks to report, weighted equally
    summary["objective"] = (1.0 - summary["asr"]) + summary["gold"] + summary["saving"]
    return {"summary": summary, "cells": cells}


def sweep(
    sets: dict[tuple[str, int], list[AttackSet]], enc: Any, count_tokens: Any, passes: int = 2
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """Coordinate descent over SWEEPS from START (at most ``passes`` passes, stopping when a
    pass changes nothing); then the eps and tau curves again with every other parameter at
    its selected value (those are plotted)."""
    config = dict(START)
    curves: dict[str, list[dict[str, Any]]] = {}
    for p in range(passes):
        before = dict(config)
        for param, values in SWEEPS.items():
            rows = []
            for v in values:
                res = evaluate(sets, EcoSafeRAG(encoder=enc, **{**config, param: v}), count_tokens)
                rows.append({"value": v, **res["summary"]})
                s = res["summary"]
                print(
                    f"  pass {p + 1} {param}={v:<5} ASR {s['asr']:.3f}  gold kept {s['gold']:.3f}  "
                    f"tokens saved {s['saving']:.3f}  objective {s['objective']:.3f}",
                    flush=True,
                )
            best = max(
                rows, key=lambda r: (round(r["objective"], 6), -abs(r["value"] - START[param]))
            )
            config[param] = best["value"]
            curves[param] = rows
            print(f"-> {param} = {best['value']}  (config so far: {config})", flush=True)
        if config == before:
            break
    for param in ("eps", "tau"):
        curves[param] = []
        for v in SWEEPS[param]:
            res = evaluate(sets, EcoSafeRAG(encoder=enc, **{**config, param: v}), count_tokens)
            curves[param].append({"value": v, **res["summary"]})
    return config, curves


ABLATIONS: dict[str, dict[str, Any]] = {
    "selected configuration": {},
    "no baits (baits=[])": {"baits": []},
    "query-independent baits": {"bait_query": False},
    "no query projection": {"remove_query": False},
    "context window ±1, context_weight 0.2": {"context_window": 1, "context_weight": 0.2},
    "bait flag removes the passage": {"scope": "passage"},
    "no clause split at colons": {"split_clauses": False},
}


def ablate(
    sets: dict[tuple[str, int], list[AttackSet]],
    enc: Any,
    count_tokens: Any,
    config: dict[str, Any],
) -> dict[str, dict[str, Any]]:
    out = {}
    for label, change in ABLATIONS.items():
        res = evaluate(sets, EcoSafeRAG(encoder=enc, **{**config, **change}), count_tokens)
        s = res["summary"]
        out[label] = res
        print(
            f"  {label:<40} ASR {s['asr']:.3f}  gold kept {s['gold']:.3f}  "
            f"tokens saved {s['saving']:.3f}",
            flush=True,
        )
    return out


def plot(
    curves: dict[str, list[dict[str, Any]]], selected: dict[str, Any], path: Path, note: str
) -> None:
    plt = figures.pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, param in zip(axes, ("eps", "tau"), strict=True):
        rows = curves[param]
        x = [r["value"] for r in rows]
        ax.plot(x, [r["asr"] for r in rows], "o-", label="filter ASR (mean over attacks)")
        ax.plot(x, [r["gold"] for r in rows], "s-", label="gold answer kept")
        ax.plot(x, [r["saving"] for r in rows], "^-", label="prompt tokens saved")
        ax.axvline(selected[param], color="grey", linestyle=":", label="selected on dev")
        ax.set_xlabel(param)
        low = min(r[k] for r in rows for k in ("asr", "gold", "saving"))
        ax.set_ylim(min(-0.02, low - 0.05), 1.02)
        ax.grid(alpha=0.3)
        ax.set_title(f"EcoSafeRAG {param} sweep (dev split)")
    axes[0].legend(loc="best", fontsize=8)
    fig.suptitle(note, fontsize=8)
    fig.tight_layout()
    figures.save(fig, path, dpi=120)


def latency(
    cases: list[Any], benign: dict[str, Any], bank: Any, filters: dict[str, Any], seed: int
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for label, setting, m in (("k=5", "clean", 0), ("k=10", "poisonedrag", 5)):
        sets = [
            build_attack_set(c, benign[c.id], setting, m, seed, bank, case_index=i)
            for i, c in enumerate(cases)
        ]
        for name, flt in filters.items():
            times = []
            stages: dict[str, list[float]] = {}
            for s in sets:
                t0 = time.perf_counter()
                res = flt.filter(s.case.question, s.passages)
                times.append((time.perf_counter() - t0) * 1000.0)
                for stage, sec in res.details.get("timings", {}).items():
                    stages.setdefault(stage, []).append(sec * 1000.0)
            out[f"{name} {label}"] = {
                "p50_ms": float(np.percentile(times, 50)),
                "p95_ms": float(np.percentile(times, 95)),
                "n": len(times),
                "k": float(np.mean([len(s.passages) for s in sets])),
                **{f"{st}_ms_mean": float(np.mean(v)) for st, v in stages.items()},
            }
    return out


def optimize_suffixes(cases: list[Any], n: int, seed: int) -> list[str]:
    """GCG against SmolLM2-135M: contexts = [PoisonedRAG passage, golden passage]."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragshield.attacks.suffix import GCGSuffixOptimizer
    from ragshield.models import model_path

    torch.set_num_threads(1)
    folder = model_path("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    out = []
    for c in cases[:n]:
        opt = GCGSuffixOptimizer(lm, tok, n_tokens=10, steps=8, batch_size=16, topk=64, seed=seed)
        ctx = [c.adversarial["poisonedrag"][0], c.golden]
        res = opt.optimize(c.question, ctx, 0, c.incorrect_answer)
        print(
            f"  GCG {c.id}: loss {res.initial_loss:.3f} -> {res.best_loss:.3f} "
            f"(re-tokenised {res.retokenized_loss:.3f}) in {res.seconds:.0f}s: {res.suffix!r}",
            flush=True,
        )
        out.append(res.suffix.strip())
    return out


def md_table(res: Any, defenses: list[str]) -> str:
    head = "| attack | M | " + " | ".join(defenses) + " |"
    lines = [head, "|" + "---|" * (len(defenses) + 2)]
    seen = []
    for r in res.rows:
        if (r.setting, r.m) not in seen:
            seen.append((r.setting, r.m))
    for setting, m in seen:
        cells = []
        for d in defenses:
            row = res.get(d, setting, m)
            asr = row.metrics["asr_filter"]
            gold = row.metrics["gold_answer_kept"]
            txt = f"{asr:.2f} / {gold:.2f}" if setting != "clean" else f"– / {gold:.2f}"
            if "asr" in row.metrics:
                txt += f" (e2e {row.metrics['asr']:.2f}/{row.metrics['accuracy']:.2f})"
            cells.append(txt)
        lines.append(f"| {setting} | {m or '-'} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- real retrieval (#17)

ONTOPIC = "ontopic/squad_v1.1_dev_43articles.json"
CACHE_DIR = Path(os.environ.get("RAGSHIELD_BENCH_CACHE", "~/.cache/ragshield/bench")).expanduser()
#: Planted-passage kinds of the real-retrieval section.
PLANTS = ("prefixed", "prefixed-hijack", "offtopic", "suffix")


@dataclass(frozen=True)
class OntopicQuestion:
    id: str
    question: str
    answers: tuple[str, ...]
    article: str
    target: str  # the attacker's answer: an answer of another question of the article


def ontopic_split(
    data: dict[str, Any], split: str, per_split: int = 300, seed: int = 0
) -> list[OntopicQuestion]:
    """Articles sorted by title, even positions = dev, odd = test (the lead's split);
    ``ceil(per_split / n_articles)`` questions per article, drawn with ``seed``."""
    titles = sorted({q["title"] for q in data["questions"]})
    chosen = titles[0::2] if split == "dev" else titles[1::2]
    per = -(-per_split // len(chosen))
    out: list[OntopicQuestion] = []
    for t in chosen:
        qs = [q for q in data["questions"] if q["title"] == t]
        rng = np.random.default_rng([seed, titles.index(t)])
        pool = sorted({a for q in qs for a in q["answers"][:1]})
        for i in rng.permutation(len(qs))[:per]:
            q = qs[int(i)]
            own = {normalize_answer(a) for a in q["answers"]}
            others = [a for a in pool if normalize_answer(a) not in own]
            target = others[int(rng.integers(len(others)))]
            out.append(OntopicQuestion(q["id"], q["question"], tuple(q["answers"]), t, target))
    return out


def ontopic_store(data: dict[str, Any], enc: Any) -> FaissStore:
    passages = [Passage(p["id"], p["text"], p["title"]) for p in data["passages"]]
    vecs = enc.encode([p.text for p in passages], show_progress=True)
    store = FaissStore(vecs.shape[1], encoder_name=enc.name)
    store.add(passages, vecs)
    return store


def plant_text(
    q: OntopicQuestion, kind: str, seed: int, index: int, article: Sequence[str] = ()
) -> tuple[str, list[str]]:
    """``(planted passage, instruction strings)`` for one question.

    ``prefixed``: the question, then one of the harness's own instructions
    (:data:`ragshield.eval.injection.OWN_KINDS`) — PoisonedRAG's retrieval trick;
    ``prefixed-hijack``: the question, then a genuine paragraph of the same article (from
    ``article``, one without the answer) carrying the instruction at a random position —
    diverse genuine text around the instruction, so the low-diversity rules cannot help;
    ``offtopic``: the instruction alone; ``suffix``: the default PoisonedRAG-style carrier
    (question + target statement) with a published GCG suffix appended.
    """
    rng = np.random.default_rng([seed, index, 11])
    if kind == "suffix":
        suffixes = [s.suffix for s in universal_suffixes() if s.id != "gcg-init"]
        suffix = suffixes[(seed + index) % len(suffixes)]
        attack = AdversarialSuffixAttack(suffixes=[suffix])
        return attack.craft(q.question, q.target, 1, seed=seed)[0], [suffix]
    templates = [t for k in OWN_KINDS for t in INJECTION_TEMPLATES[k]]
    instr = fill_template(templates[int(rng.integers(len(templates)))], q.question, q.target)
    if kind == "prefixed":
        return f"{q.question.strip()} {instr}", [instr]
    if kind == "prefixed-hijack":
        pool = [t for t in article if not any(contains_answer(t, a) for a in q.answers)]
        carrier = pool[int(rng.integers(len(pool)))]
        where = POSITIONS[int(rng.integers(len(POSITIONS)))]
        return f"{q.question.strip()} {insert_instruction(carrier, instr, where)}", [instr]
    return instr, [instr]


def measure_real(
    flt: Any,
    store: Any,
    enc: Any,
    questions: Sequence[OntopicQuestion],
    k: int,
    plant: str | None = None,
    *,
    seed: int = 0,
    context_k: int = 5,
) -> dict[str, Any]:
    """Real retrieval: per question, top-``k`` from ``store`` (plus, with ``plant``, one
    planted passage added to a copy of it), the filter, and what reaches the generator =
    the kept text of the ``context_k`` best-scored survivors. Per-question lists:

    * ``answer_kept``: some answer string occurs in that context (no filter: top-5 as is);
    * ``removed``: fraction of retrieved sentences the filter dropped;
    * with a plant: ``retrieved`` (the planted passage is in the top-k) and ``caught``
      (retrieved, and no attacker text in the context holds an instruction sentence or
      the target answer; nan when not retrieved).
    """
    qv = enc.encode([q.question for q in questions])
    by_article: dict[str, list[str]] = {}
    for p in store.passages:
        by_article.setdefault(p.title, []).append(p.text)
    out: dict[str, list[float]] = {
        k_: [] for k_ in ("answer_kept", "removed", "retrieved", "caught", "ms")
    }
    for i, q in enumerate(questions):
        planted_id = None
        instrs: list[str] = []
        searched = store
        if plant is not None:
            text, instrs = plant_text(q, plant, seed, i, by_article.get(q.article, ()))
            planted_id = f"planted::{q.id}"
            searched = FaissStore(store.dim, encoder_name=store.encoder_name)
            searched.add(store.passages, store.vectors)
            searched.add([Passage(planted_id, text)], enc.encode([text]))
        hits = searched.search(qv[i : i + 1], k)[0]
        t0 = time.perf_counter()
        res = None if flt is None else flt.filter(q.question, hits)
        out["ms"].append((time.perf_counter() - t0) * 1000.0)
        kept = list(hits) if res is None else list(res.kept)
        ctx = sorted(kept, key=lambda r: -r.score)[:context_k]
        out["answer_kept"].append(
            float(any(contains_answer(r.text, a) for r in ctx for a in q.answers))
        )
        n_sent = sum(len(split_sentences(r.text)) for r in hits)
        n_kept = n_sent if res is None else res.details.get("n_kept_sentences", n_sent)
        out["removed"].append(1.0 - n_kept / n_sent if n_sent else 0.0)
        if plant is not None:
            got = any(r.id == planted_id for r in hits)
            out["retrieved"].append(float(got))
            bad = [r.text for r in ctx if r.id == planted_id]
            survives = any(
                any(instruction_survives(t, ins) for ins in instrs) or contains_answer(t, q.target)
                for t in bad
            )
            out["caught"].append(float(not survives) if got else float("nan"))
    return out


def latency_real(
    make_filter: Any,
    store: Any,
    questions: Sequence[OntopicQuestion],
    warm_encoder: Any,
    k: int = 10,
) -> dict[str, dict[str, float]]:
    """Filter latency on real top-``k`` retrievals, one thread, two regimes:

    * ``warm``: as in a pipeline — one encoder (its text cache on) retrieves and filters,
      so the query vector is already known, and the indexed passages' sentences were
      encoded at index time (:meth:`EcoSafeRAG.precompute`);
    * ``cold``: a fresh encoder with its cache off and nothing precomputed: every
      sentence of every retrieved passage is encoded in the call.
    """
    import torch

    torch.set_num_threads(1)
    out: dict[str, dict[str, float]] = {}
    for regime in ("warm", "cold"):
        enc = SentenceTransformerEncoder(cache_size=200_000 if regime == "warm" else 0)
        enc.warm_up()
        if regime == "warm":
            flt = make_filter(warm_encoder)
            flt.precompute([p.text for p in store.passages])  # index time, disk-cached
            flt.encoder = enc  # queries (and per-query baits) are encoded for real
        else:
            flt = make_filter(enc)
        flt.filter(questions[0].question, store.search(enc.encode([questions[0].question]), k)[0])
        times = []
        for q in questions:
            hits = store.search(enc.encode([q.question]), k)[0]  # the retriever's call
            t0 = time.perf_counter()
            flt.filter(q.question, hits)
            times.append((time.perf_counter() - t0) * 1000.0)
        out[regime] = {
            "p50_ms": float(np.percentile(times, 50)),
            "p95_ms": float(np.percentile(times, 95)),
            "n": float(len(times)),
        }
    return out


def real_section(data_root: Path, seed: int, per_split: int, limit: int | None) -> dict[str, Any]:
    """Issue #17: clean on-topic retrieval and planted passages on SQuAD (the lead's
    article split), no filter vs the ``paper`` preset vs the default EcoSafeRAG."""
    data = json.loads((data_root / ONTOPIC).read_text(encoding="utf-8"))
    enc = DiskCachedEncoder(SentenceTransformerEncoder(), CACHE_DIR / "minilm_vectors.npz")
    store = ontopic_store(data, enc)
    enc.save()
    filters: dict[str, Any] = {
        "none": None,
        "paper": EcoSafeRAG(encoder=enc, **PRESETS["paper"]),
        "ecosaferag": EcoSafeRAG(encoder=enc),
    }
    results: dict[str, Any] = {}
    for split in ("dev", "test"):
        qs = ontopic_split(data, split, per_split, seed)[:limit]
        print(
            f"\n## Real retrieval, SQuAD {split} ({len(qs)} questions; articles sorted by "
            f"title, {'even' if split == 'dev' else 'odd'} positions), seed {seed}"
        )
        print(
            "| filter | ans@k5 | ans@k10 | sent. removed k10 | "
            + " | ".join(f"{p} caught / ans" for p in PLANTS)
            + " |"
        )
        print("|---" * (4 + len(PLANTS)) + "|")
        for name, flt in filters.items():
            row: dict[str, Any] = {}
            for k in (5, 10):
                r = measure_real(flt, store, enc, qs, k, seed=seed)
                row[f"k{k}"] = {m: float(np.nanmean(v)) for m, v in r.items() if v}
            for plant in PLANTS:
                r = measure_real(flt, store, enc, qs, 10, plant, seed=seed)
                row[plant] = {m: float(np.nanmean(v)) for m, v in r.items() if v}
            enc.save()
            results.setdefault(split, {})[name] = row
            cells = " | ".join(
                f"{row[p]['caught']:.3f} / {row[p]['answer_kept']:.3f}" for p in PLANTS
            )
            print(
                f"| {name} | {row['k5']['answer_kept']:.3f} | {row['k10']['answer_kept']:.3f} "
                f"| {row['k10']['removed']:.3f} | {cells} |",
                flush=True,
            )
        retrieved = {p: results[split]["none"][p]["retrieved"] for p in PLANTS}
        print(
            "planted passage in the top-10: "
            + ", ".join(f"{p} {v:.3f}" for p, v in retrieved.items())
        )
    lat_qs = ontopic_split(data, "test", per_split, seed)[: limit or 100]
    print(f"\n## Filter latency, real top-10 ({len(lat_qs)} test questions, one thread)")
    results["latency"] = {}
    for name, params in (("paper", PRESETS["paper"]), ("ecosaferag", {})):
        lat = latency_real(lambda e, p=params: EcoSafeRAG(encoder=e, **p), store, lat_qs, enc)
        results["latency"][name] = lat
        for regime, v in lat.items():
            print(f"  {name:<11} {regime}: p50 {v['p50_ms']:7.1f} ms   p95 {v['p95_ms']:7.1f} ms")
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/poisoning/nq")
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=None, help="questions per split")
    ap.add_argument("--plot", default="ecosaferag_sweep.png", help="where to save the sweep plot")
    ap.add_argument("--json", default=None, help="write all measurements here")
    ap.add_argument("--optimize-suffix", type=int, default=0, help="dev questions for GCG")
    ap.add_argument("--generator", default=None, help="packaged LLM name for end-to-end ASR")
    ap.add_argument("--e2e-limit", type=int, default=20)
    ap.add_argument(
        "--config", default=None, help="skip the dev sweeps and use this JSON configuration"
    )
    ap.add_argument(
        "--only",
        choices=("synthetic", "real"),
        default=None,
        help="run only the synthetic (NQ) sections or only the real-retrieval one (SQuAD)",
    )
    ap.add_argument("--per-split", type=int, default=300, help="real section: questions/split")
    args = ap.parse_args()

    t_start = time.perf_counter()
    real = None
    if args.only != "synthetic":
        real = real_section(Path(args.data).parents[1], args.seed, args.per_split, args.limit)
        if args.only == "real":
            if args.json:
                Path(args.json).write_text(json.dumps({"real": real}, indent=2))
            return
    enc = SentenceTransformerEncoder()
    enc.warm_up()
    count_tokens = ExtractiveGenerator().count_tokens
    all_cases = load_poisoning(args.data)
    dev = split_cases(all_cases, "dev")[: args.limit]
    test = split_cases(all_cases, "test")[: args.limit]
    print(
        f"# EcoSafeRAG benchmark — data {args.data} ({len(dev)} dev / {len(test)} test "
        f"questions), seed {args.seed}, encoder {enc.name}, {platform.processor() or platform.machine()}"
    )

    # 1. dev sweeps
    bank = VectorBank(enc)
    benign = benign_passages(dev, bank, 4)
    dev_sets = {
        (s, m): [
            build_attack_set(c, benign[c.id], s, m, args.seed, bank, case_index=i)
            for i, c in enumerate(dev)
        ]
        for s, m in DEV_SETTINGS
    }
    curves: dict[str, list[dict[str, Any]]] = {}
    if args.config:
        config = json.loads(args.config)
        print(f"\n## Dev sweeps skipped: configuration given on the command line: {config}")
    else:
        print(f"\n## Dev sweeps ({', '.join(f'{s}@{m}' for s, m in DEV_SETTINGS)})")
        config, curves = sweep(dev_sets, enc, count_tokens)
        print(f"\nSelected on dev: {config}")
        plot(
            curves,
            config,
            Path(args.plot),
            f"{Path(args.data).name} dev split ({len(dev)} questions), seed {args.seed}; other "
            f"parameters at the selected values {config}",
        )
        print(f"plot: {args.plot}")

    print("\n## Ablations on dev (selected configuration, one change each)")
    ablations = ablate(dev_sets, enc, count_tokens, config)

    optimized: list[str] = []
    if args.optimize_suffix:
        print(
            f"\n## GCG suffix optimisation on {args.optimize_suffix} dev questions (SmolLM2-135M)"
        )
        optimized = optimize_suffixes(dev, args.optimize_suffix, args.seed)

    # 2. test table
    eco = EcoSafeRAG(encoder=enc, **config)
    rd_name, rd = ragdefender(enc)
    defenses = {
        "none": None,
        "ecosaferag": eco,
        rd_name: rd,
        f"{rd_name}+ecosaferag": FilterChain([rd, EcoSafeRAG(encoder=enc, **config)]),
    }
    # every setting the harness knows; the optimized suffix only when its suffixes were built
    settings = [name for name in SETTINGS if optimized or name != "suffix-optimized"]
    res = run_injection_eval(
        args.data,
        defenses,
        settings=settings,
        m_values=[1, 5],
        seeds=[args.seed],
        encoder=enc,
        split="test",
        limit=args.limit,
        count_tokens=count_tokens,
        optimized_suffixes=optimized,
    )
    print(f"\n## Test split ({res.n_questions} questions): filter ASR / gold answer kept")
    print(md_table(res, list(defenses)))
    print("\nPrompt tokens (mean) and saving versus the undefended top-5 context:")
    for d in defenses:
        rows = [r for r in res.rows if r.defense == d]
        tok = np.mean([r.metrics["prompt_tokens"] for r in rows])
        sav = [r.metrics["token_saving"] for r in rows]
        clean = res.get(d, "clean").metrics["token_saving"]
        print(
            f"  {d:<28} tokens {tok:7.1f}   saved: clean {clean:.1%}, "
            f"range over settings {min(sav):.1%}–{max(sav):.1%}"
        )
    for note in res.notes:
        print(f"  note: {note}")

    e2e = None
    if args.generator:
        from ragshield.generate.local_hf import LocalLLMGenerator

        gen = LocalLLMGenerator(args.generator)
        e2e_defs = {"none": None, "ecosaferag": eco}  # an LLM call per set: keep it small
        e2e = run_injection_eval(
            args.data,
            e2e_defs,
            settings=["clean", "poisonedrag", "injection", "injection-hijack", "suffix"],
            m_values=[1],
            seeds=[args.seed],
            encoder=enc,
            generator=gen,
            split="test",
            limit=args.e2e_limit,
            count_tokens=count_tokens,
        )
        print(
            f"\n## End to end with {args.generator} ({e2e.n_questions} test questions): "
            "filter ASR / gold kept (e2e ASR / accuracy)"
        )
        print(md_table(e2e, list(e2e_defs)))

    # 3. latency with a cold (cache-off) encoder
    cold = SentenceTransformerEncoder(cache_size=0)
    cold.warm_up()
    lbank = VectorBank(enc)
    lbenign = benign_passages(test, lbank, 4)
    rd_name2, rd2 = ragdefender(cold)
    lat = latency(
        test,
        lbenign,
        lbank,
        {"ecosaferag": EcoSafeRAG(encoder=cold, **config), rd_name2: rd2},
        args.seed,
    )
    print("\n## Filter latency (encoder cache off; retriever vectors given)")
    for k, v in lat.items():
        split = ", ".join(
            f"{key[:-8]} {val:.1f}" for key, val in v.items() if key.endswith("_ms_mean")
        )
        print(
            f"  {k:<28} p50 {v['p50_ms']:7.1f} ms   p95 {v['p95_ms']:7.1f} ms   "
            f"(n={v['n']}, k={v['k']:.0f}{'; mean ms per stage: ' + split if split else ''})"
        )
    print(f"\ntotal {time.perf_counter() - t_start:.0f}s")

    if args.json:
        out = {
            "data": args.data,
            "seed": args.seed,
            "selected_config": config,
            "sweeps": curves,
            "ablations_dev": {k: v["summary"] for k, v in ablations.items()},
            "test": to_dict(res),
            "end_to_end": to_dict(e2e) if e2e is not None else None,
            "latency": lat,
            "optimized_suffixes": optimized,
            "real": real,
        }
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"json: {args.json}")


if __name__ == "__main__":
    main()
