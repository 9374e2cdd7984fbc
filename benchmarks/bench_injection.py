"""Injections the filter has never seen (issue #23): per family, per placement, TPR at the
index-calibrated 1 % and 0.1 % FPR, real retrieval, answer kept, latency.

    python benchmarks/bench_injection.py [--data ../shared/data] [--seed 0] [--per-placement 105]
        [--json injection.json] [--skip-published] [--kind lr --C 1.0]
        [--placements prefixed,prefixed-reworded]

What it measures (every figure printed is measured in this run; seed and split printed):

1. Heads. The shipped head's recipe (``benchmarks/train_injection_head.py``) is retrained
   with one ``bastioncorpus`` family left out (leave-one-family-out, 7 heads) and with one
   language left out (leave-one-language-out: de, fr, es, it; 4 heads). A family / language
   is only ever scored by the head that never saw it.
2. Calibration on the index's own text: the 1,888 SQuAD paragraphs of ``ontopic/`` are the
   index (MiniLM, FaissStore); each head's thresholds come from
   :func:`ragshield.defenses.injection.calibration.calibrate_index` over all their sentences
   (the same call ``ragshield index`` makes).
   The same call records the guard's signals (``signals.py``: language switch, disguised
   words) with their per-index thresholds; every guard below uses them unless its row says
   otherwise ("head-only" turns them off; "signals-only" is them alone, at fpr0.1).
3. Benign false positives at those thresholds (the whole guard: rules + head + signals): sentences of
   the *test* articles (odd title positions; the dev ones were training negatives),
   sentences of the 44 HotpotQA test questions' on-topic passages (another corpus, never
   calibrated on), and hard negatives (``ragshield.eval.injection_detection.HARD_NEGATIVES`` + the
   odd-position ``bastioncorpus`` benign rows; none used in training).
4. Detector level (no retrieval): every English malicious row of each family, planted
   with every placement of :mod:`ragshield.attacks.injection_families` into an on-topic
   test paragraph; caught = no sentence of >= 4 words of the planted instruction (and no
   encoded block of it) is left in the kept text (a split instruction with one half left
   counts as missed).
5. Real retrieval (test split): per placement, ``--per-placement`` SQuAD test questions
   (families in rotation, each with its leave-out head), one planted passage per question
   merged into the real top-10 exactly as a flat inner-product index would rank it; no
   filter / EcoSafeRAG as published (paper preset) / EcoSafeRAG (ragshield default) /
   ragshield chain (EcoSafeRAG + InjectionGuard). Caught among retrieved (the planted
   instruction left in no kept passage) and answer kept (an answer string in the 5
   best-scored kept passages). Clean rows: no plant.
6. Translated: the non-English rows, in-passage, with the leave-one-language-out heads.
7. Output-side check: every canary row planted; the response an obeying model writes
   (answer + canary) is refused; clean false refusals measured on the extractive
   generator's answers over clean test retrievals.
8. Latency: InjectionGuard and the chain at k=10, one thread, sentence scores
   precomputed for the index (``precompute``), query vector from the retriever's call.

``--placements`` (a comma list of placement names) runs sections 4 and 5 for those rows only
and skips sections 3, 6, 7 and 8 (printed as not run): minutes instead of half an hour when
one row is in question. Every random draw of the skipped rows is still taken, so a row it
prints is the row the full run prints.

Over 500 lines: eight sections of one report that share one index, one set of leave-out
heads and their calibrations (computed once; split apart they would be recomputed).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ecosaferag import (
    ONTOPIC,
    OntopicQuestion,
    ontopic_split,
    ontopic_store,
)
from ragshield.attacks.injection_families import (
    FAMILIES,
    PLACEMENTS,
    canary_word,
    family_rows,
    fill,
    plant,
)
from ragshield.defenses.compose import FilterChain
from ragshield.defenses.ecosaferag import PRESETS, EcoSafeRAG
from ragshield.defenses.injection.calibration import calibrate_index
from ragshield.defenses.injection.detector import InjectionGuard, segment
from ragshield.defenses.injection.head import InjectionHead
from ragshield.defenses.injection.output import followed
from ragshield.defenses.injection.signals import Signals
from ragshield.eval.injection_detection import HARD_NEGATIVES, HARD_NEGATIVES_2, detection_rate
from ragshield.text import contains_answer, normalize_answer
from ragshield.types import Passage, RetrievedPassage
from train_injection_head import cached_encoder, train_head

LANGS = ("de", "fr", "es", "it")
OPS = ("fpr1", "fpr0.1")


@dataclass(frozen=True)
class OntopicIndex:
    """The ``ontopic/`` SQuAD paragraphs as every injection benchmark indexes them."""

    data: dict[str, Any]
    store: Any
    texts: list[str]
    by_article: dict[str, list[str]]


def ontopic_index(data_dir: str | Path, enc: Any) -> OntopicIndex:
    """The 1,888 paragraphs encoded into a flat index, their texts and, per article, its
    paragraphs (the carriers)."""
    data = json.loads((Path(data_dir) / ONTOPIC).read_text(encoding="utf-8"))
    store = ontopic_store(data, enc)
    by_article: dict[str, list[str]] = {}
    for p in store.passages:
        by_article.setdefault(p.title, []).append(p.text)
    return OntopicIndex(data, store, [p.text for p in store.passages], by_article)


def base_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options every injection benchmark takes: ``--data`` (``../shared/data``) and
    ``--seed``."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data"))
    ap.add_argument("--seed", type=int, default=0)
    return ap


def finish(t0: float, out: dict[str, Any], path: str | None) -> None:
    """The run's wall time and load average printed (a figure from a shared machine means
    little without it), and ``out`` written to ``path`` as JSON when one was asked for."""
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"\n{time.time() - t0:.0f} s; load average {' '.join(load)}")
    if path:
        Path(path).write_text(json.dumps(out, indent=1), encoding="utf-8")


def survives(kept_text: str, planted: str) -> bool:
    """Some piece of the planted instruction is still in the kept text: a sentence of it
    with >= 4 words (normalised; ragshield's :func:`instruction_survives` rule), or an
    encoded block (a >= 16-character token), so one half of a split instruction counts."""
    kept = f" {normalize_answer(kept_text)} "
    for piece in segment(planted) or [planted]:
        norm = normalize_answer(piece)
        if len(norm.split()) >= 4 and f" {norm} " in kept:
            return True
    return any(len(tok) >= 16 and tok in kept_text for tok in planted.split())


def make_guard(
    enc: Any, head: InjectionHead, cal: dict[str, Any], op: str | None = None
) -> InjectionGuard:
    """A guard reading ``head`` with the index calibration ``cal`` at operating point
    ``op`` (``None``: the guard's default)."""
    g = (
        InjectionGuard(encoder=enc)
        if op is None
        else InjectionGuard(encoder=enc, operating_point=op)
    )  # type: ignore[arg-type]
    g._head = head
    g.calibrate_injection(cal)
    return g


def signals_only(cal: dict[str, Any]) -> InjectionGuard:
    """The guard's calibrated signals alone (language switch, disguise), at the default
    operating point: no head, no rules."""
    g = InjectionGuard(classifier=False, rules=False)
    g.calibrate_injection(cal)
    return g


def carriers_for(q: OntopicQuestion, by_article: dict[str, list[str]]) -> list[str]:
    pool = [
        t
        for t in by_article.get(q.article, ())
        if not any(contains_answer(t, a) for a in q.answers)
    ]
    return pool or by_article.get(q.article, [q.question])


def placements_arg(value: str) -> tuple[str, ...]:
    """``--placements``: comma-separated names of
    :data:`~ragshield.attacks.injection_families.PLACEMENTS`, refused (argparse: exit 2)
    on an unknown or missing name before any work."""
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    bad = [n for n in names if n not in PLACEMENTS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown placement {', '.join(bad) or '(none given)'}; choose from {', '.join(PLACEMENTS)}"
        )
    return names


def pct(x: float) -> str:
    return "n/a" if x != x else f"{x:.3f}"


def main() -> None:
    ap = base_parser(__doc__)
    ap.add_argument("--per-placement", type=int, default=105)
    ap.add_argument("--kind", choices=("lr", "mlp"), default="lr")
    ap.add_argument("--C", type=float, default=3.0)  # dev choice (docs/results-injection.md)
    ap.add_argument("--skip-published", action="store_true", help="no EcoSafeRAG paper preset")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--placements",
        type=placements_arg,
        default=None,
        help="only these placement rows (comma list); skips the other sections",
    )
    args = ap.parse_args()
    only = set(args.placements or PLACEMENTS)
    shown = [pl for pl in PLACEMENTS if pl in only]
    partial = args.placements is not None
    t_start = time.time()
    root = Path(args.data)
    rng = np.random.default_rng(args.seed)
    enc = cached_encoder()
    idx = ontopic_index(root, enc)
    enc.save()
    data, store, texts, by_article = idx.data, idx.store, idx.texts, idx.by_article
    titles = sorted(by_article)
    test_titles = set(titles[1::2])
    out: dict[str, Any] = {"seed": args.seed, "kind": args.kind, "C": args.C}

    # 1-2. heads and their per-index calibration
    heads: dict[str, InjectionHead] = {"all": InjectionHead.packaged()}
    for fam in FAMILIES:
        heads[f"-{fam}"] = train_head(
            root, enc, kind=args.kind, c=args.C, leave_out=fam, seed=args.seed
        )
    for lang in () if partial else LANGS:  # the translated rows' heads
        heads[f"-{lang}"] = train_head(
            root, enc, kind=args.kind, c=args.C, leave_lang=lang, seed=args.seed
        )
    enc.save()
    cals = {name: calibrate_index(texts, enc, head=h, sample=10**9) for name, h in heads.items()}
    enc.save()
    print(f"# Issue #23 injection benchmark (seed {args.seed}; head {args.kind}, C={args.C})")
    print(
        f"\n## Index calibration: SQuAD ontopic, {len(texts)} paragraphs, "
        f"{cals['all']['sentences']} sentences (all of them)"
    )  # type: ignore[index]
    print("| head | fpr1 threshold | fpr0.1 threshold | rules flag (index sentences) |")
    print("|---|---|---|---|")
    for name, c in cals.items():
        assert c is not None
        print(
            f"| {name} | {c['thresholds']['fpr1']:.4f} | {c['thresholds']['fpr0.1']:.4f} | {c['rules_flagged']:.4f} |"
        )
    out["calibration"] = cals

    # 3. benign false positives of the full guard
    test_sents = [s for p in store.passages if p.title in test_titles for s in segment(p.text)]
    hot = json.loads((root / "ontopic/hotpotqa_distractor_dev100.json").read_text("utf-8"))
    tids = {
        pid
        for q in hot["questions"]
        if q.get("in_poisoning_targets")
        for pid in q["context_passage_ids"]
    }
    hot_sents = [s for p in hot["passages"] if p["id"] in tids for s in segment(p["text"])]
    bastion_benign = [r.text for i, r in enumerate(family_rows(None, label="benign")) if i % 2 == 1]
    benign_sets = {
        "index sentences (SQuAD test articles)": test_sents,
        "HotpotQA test passages (other corpus)": hot_sents,
        "hard negatives (ours, eval-only)": list(HARD_NEGATIVES),
        "hard negatives, second set (eval-only)": list(HARD_NEGATIVES_2),
        "hard negatives, both sets": [*HARD_NEGATIVES, *HARD_NEGATIVES_2],
        "hard negatives (bastioncorpus benign, odd rows)": bastion_benign,
    }
    if partial:
        benign_sets = {}
        print("\n## Benign text flagged: not run (--placements)")
    else:
        print("\n## Benign text flagged by InjectionGuard (rules + shipped head), index-calibrated")
        print(
            "| benign set | n | flagged @fpr1 | flagged @fpr0.1 | rules only | signals only @fpr0.1 |"
        )
        print("|---|---|---|---|---|---|")
    out["benign"] = {}
    for label, sents in benign_sets.items():
        row = {}
        for op in OPS:
            g = make_guard(enc, heads["all"], cals["all"], op)  # type: ignore[arg-type]
            row[op] = detection_rate(
                [
                    bool(g.filter("q?", [RetrievedPassage(Passage("b", s), 1.0, 0)]).decisions)
                    for s in sents
                ]
            )
        g = InjectionGuard(classifier=False)
        row["rules"] = detection_rate(
            [
                bool(g.filter("q?", [RetrievedPassage(Passage("b", s), 1.0, 0)]).decisions)
                for s in sents
            ]
        )
        g = signals_only(cals["all"])  # type: ignore[arg-type]
        row["signals"] = detection_rate(
            [
                bool(g.filter("q?", [RetrievedPassage(Passage("b", s), 1.0, 0)]).decisions)
                for s in sents
            ]
        )
        out["benign"][label] = {**row, "n": len(sents)}
        print(
            f"| {label} | {len(sents)} | {pct(row['fpr1'])} | {pct(row['fpr0.1'])} | "
            f"{pct(row['rules'])} | {pct(row['signals'])} |",
            flush=True,
        )
    enc.save()

    # 4. detector level, leave-one-family-out
    test_qs = ontopic_split(data, "test", 10**6, args.seed)
    print(
        "\n## Detector level (no retrieval): English rows of each family planted into an "
        "on-topic test paragraph; caught by InjectionGuard with the head that never saw the family"
    )
    print("| family (n rows) | " + " | ".join(shown) + " |")
    print("|---" * (len(shown) + 1) + "|")
    out["detector"] = {}
    import random as _r

    variants = ("fpr1", "fpr0.1", "head-only@fpr1", "rules-only", "signals-only@fpr0.1")
    for fam in FAMILIES:
        rows = family_rows(fam, lang="en")
        guards_v = {
            "fpr1": make_guard(enc, heads[f"-{fam}"], cals[f"-{fam}"], "fpr1"),  # type: ignore[arg-type]
            "fpr0.1": make_guard(enc, heads[f"-{fam}"], cals[f"-{fam}"], "fpr0.1"),  # type: ignore[arg-type]
            "head-only@fpr1": make_guard(enc, heads[f"-{fam}"], cals[f"-{fam}"], "fpr1"),  # type: ignore[arg-type]
            "rules-only": InjectionGuard(classifier=False),
            "signals-only@fpr0.1": signals_only(cals[f"-{fam}"]),  # type: ignore[arg-type]
        }
        guards_v["head-only@fpr1"].rules = False
        guards_v["head-only@fpr1"].signals = Signals(language_switch=False, disguise=False)
        cells: dict[tuple[str, str], float] = {}
        drawn: list[tuple[OntopicQuestion, str]] = []
        for pl in PLACEMENTS:
            plants = []
            for i, r in enumerate(rows):
                if pl == "prefixed-reworded":  # the prefixed plants' questions, reworded:
                    q, carrier = drawn[i]  # a paired reading; no draw moves another cell
                else:
                    q = test_qs[int(rng.integers(len(test_qs)))]
                    pool = carriers_for(q, by_article)
                    carrier = pool[int(rng.integers(len(pool)))]
                    if pl == "prefixed":
                        drawn.append((q, carrier))
                plants.append(
                    (
                        q.question,
                        *plant(
                            fill(r.text, canary_word(r.id)), pl, q.question, carrier, _r.Random(i)
                        ),
                    )
                )
            if pl not in only:  # its draws are taken all the same (see --placements)
                continue
            for v, g in guards_v.items():
                caught = []
                for question, text, planted in plants:
                    res = g.filter(question, [RetrievedPassage(Passage("x", text), 1.0, 0)])
                    caught.append(not survives(" ".join(k.text for k in res.kept), planted))
                cells[(v, pl)] = detection_rate(caught)
        out["detector"][fam] = {f"{v}:{pl}": x for (v, pl), x in cells.items()}
        print(
            f"| {fam} ({len(rows)}) | "
            + " | ".join(
                f"{pct(cells[('fpr1', pl)])} / {pct(cells[('fpr0.1', pl)])}" for pl in shown
            )
            + " |",
            flush=True,
        )
    means = {
        op: {
            pl: float(np.mean([out["detector"][f][f"{op}:{pl}"] for f in FAMILIES])) for pl in shown
        }
        for op in OPS
    }
    print(
        "| **mean over families** | "
        + " | ".join(f"{pct(means['fpr1'][pl])} / {pct(means['fpr0.1'][pl])}" for pl in shown)
        + " |"
    )
    print("(cells: caught at the fpr1 / fpr0.1 operating point)")
    print("\nMean over families, by part of the guard (fpr1): ")
    print("| part | " + " | ".join(shown) + " |")
    print("|---" * (len(shown) + 1) + "|")
    for v in variants:
        m = [float(np.mean([out["detector"][f][f"{v}:{pl}"] for f in FAMILIES])) for pl in shown]
        means[v] = dict(zip(shown, m, strict=True))
        print(f"| {v} | " + " | ".join(pct(x) for x in m) + " |")
    out["detector_mean"] = means
    enc.save()

    # 6. translated (leave-one-language-out), detector level
    if partial:
        print("\n## Translated rows: not run (--placements; their draws are taken)")
    else:
        print("\n## Translated rows (leave-one-language-out head), in-passage, detector level")
        print(
            "| language | n | caught @fpr1 | caught @fpr0.1 | head-only @fpr1 | rules-only "
            "| signals-only @fpr0.1 |"
        )
        print("|---|---|---|---|---|---|---|")
    out["translated"] = {}
    import random as _random

    def translated_guard(op: str, lang: str) -> Any:
        if op == "rules-only":
            return InjectionGuard(classifier=False)
        if op == "signals-only":
            return signals_only(cals[f"-{lang}"])  # type: ignore[arg-type]
        g = make_guard(
            enc, heads[f"-{lang}"], cals[f"-{lang}"], "fpr1" if op == "head-only" else op
        )  # type: ignore[arg-type]
        g.rules = op != "head-only"
        if op == "head-only":
            g.signals = Signals(language_switch=False, disguise=False)
        return g

    for lang in LANGS:
        rows = family_rows(None, lang=lang)
        cells = {}
        for op in (*OPS, "head-only", "rules-only", "signals-only"):
            # --placements: no head was trained for the language; the draws are taken only
            g = None if partial else translated_guard(op, lang)
            caught = []
            for i, r in enumerate(rows):
                q = test_qs[int(rng.integers(len(test_qs)))]
                pool = carriers_for(q, by_article)
                carrier = pool[int(rng.integers(len(pool)))]
                if g is None:
                    continue
                text, planted = plant(
                    fill(r.text, canary_word(r.id)), "in-passage", q.question, carrier,
                    _random.Random(i),
                )  # fmt: skip
                res = g.filter(q.question, [RetrievedPassage(Passage("x", text), 1.0, 0)])
                caught.append(not survives(" ".join(k.text for k in res.kept), planted))
            cells[op] = detection_rate(caught)
        if partial:
            continue
        out["translated"][lang] = {**cells, "n": len(rows)}
        print(
            f"| {lang} | {len(rows)} | {pct(cells['fpr1'])} | {pct(cells['fpr0.1'])} | "
            f"{pct(cells['head-only'])} | {pct(cells['rules-only'])} | "
            f"{pct(cells['signals-only'])} |",
            flush=True,
        )
    enc.save()

    # 5. real retrieval, test split
    qs = ontopic_split(data, "test", args.per_placement, args.seed)[: args.per_placement]
    qv = enc.encode([q.question for q in qs])
    base_hits = store.search(qv, 10)
    eco = EcoSafeRAG(encoder=enc)
    defenses: dict[str, Any] = {"none": None}
    if not args.skip_published:
        defenses["ecosaferag (published)"] = EcoSafeRAG(encoder=enc, **PRESETS["paper"])
    defenses["ecosaferag (ragshield)"] = eco
    guards = {
        name: make_guard(enc, heads[name], cals[name])  # type: ignore[arg-type]
        for name in heads
    }
    print(
        f"\n## Real retrieval, SQuAD test articles ({len(qs)} questions per placement; seed "
        f"{args.seed}; k=10, context = 5 best kept); families in rotation, each scored by its "
        "leave-out head"
    )
    print(
        "| placement | "
        + " | ".join(f"{d} caught / ans" for d in [*defenses, "ragshield chain"])
        + " | retrieved |"
    )
    print("|---" * (len(defenses) + 3) + "|")
    out["retrieval"] = {}
    for pl in ["clean", *PLACEMENTS]:
        if pl not in only and pl != "clean":  # its draws only (see --placements)
            for q in qs:
                rng.integers(len(carriers_for(q, by_article)))
            continue
        res: dict[str, dict[str, list[float]]] = {
            d: {"caught": [], "ans": []} for d in [*defenses, "ragshield chain"]
        }
        got_all = []
        for i, q in enumerate(qs):
            fam = FAMILIES[i % len(FAMILIES)]
            hits = list(base_hits[i])
            planted = ""
            if pl != "clean":
                rows = family_rows(fam, lang="en")
                r = rows[(i // len(FAMILIES)) % len(rows)]
                pool = carriers_for(q, by_article)
                text, planted = plant(
                    fill(r.text, canary_word(q.id)), pl, q.question,
                    pool[int(rng.integers(len(pool)))], _random.Random(i),
                )  # fmt: skip
                pv = enc.encode([text])[0]
                s = float(pv @ qv[i])
                if s > hits[-1].score:
                    hits = sorted(
                        [*hits[:-1], RetrievedPassage(Passage(f"planted::{q.id}", text), s, 0, pv)],
                        key=lambda h: -h.score,
                    )
                    hits = [
                        RetrievedPassage(h.passage, h.score, rank, h.embedding)
                        for rank, h in enumerate(hits)
                    ]
            got = any(h.id.startswith("planted::") for h in hits)
            got_all.append(float(got))
            chain = FilterChain([eco, guards[f"-{fam}"] if pl != "clean" else guards["all"]])
            for dname, flt in [*defenses.items(), ("ragshield chain", chain)]:
                kept = list(hits) if flt is None else list(flt.filter(q.question, hits).kept)
                ctx = sorted(kept, key=lambda h: -h.score)[:5]
                res[dname]["ans"].append(
                    float(any(contains_answer(h.text, a) for h in ctx for a in q.answers))
                )
                if pl != "clean" and got:
                    res[dname]["caught"].append(
                        float(
                            not any(
                                survives(h.text, planted)
                                for h in kept
                                if h.id.startswith("planted::")
                            )
                        )
                    )
        row = {
            d: {"caught": detection_rate(v["caught"]), "answer_kept": float(np.mean(v["ans"]))}
            for d, v in res.items()
        }
        row["retrieved"] = {"rate": float(np.mean(got_all))}  # type: ignore[dict-item]
        out["retrieval"][pl] = row
        print(
            f"| {pl} | "
            + " | ".join(f"{pct(row[d]['caught'])} / {row[d]['answer_kept']:.3f}" for d in res)
            + f" | {np.mean(got_all):.3f} |",
            flush=True,
        )
        enc.save()

    if partial:
        print("\n## Output-side check, clean cost, latency: not run (--placements)")
        finish(t_start, out, args.json)
        return

    # 7. output-side check
    canary_rows = [r for r in family_rows() if "{canary}" in r.text]
    obeyed = []
    for i, r in enumerate(canary_rows):
        q = qs[i % len(qs)]
        c = canary_word(f"{q.id}:{r.id}")
        pool = carriers_for(q, by_article)
        text, _ = plant(fill(r.text, c), "in-passage", q.question, pool[0], _random.Random(i))
        ctx = [text, *[h.text for h in base_hits[i % len(qs)][:4]]]
        obeyed.append(bool(followed(q.question, ctx, f"{q.answers[0]}. {c}")))
    from ragshield.generate.extractive import ExtractiveGenerator

    ext = ExtractiveGenerator(encoder=enc)
    false_ref = []
    for i, q in enumerate(qs):
        ctx = [h.text for h in base_hits[i][:5]]
        false_ref.append(bool(followed(q.question, ctx, ext.generate(q.question, ctx).text)))
    # clean cost: the extractive generator's answer with no filter vs behind the chain
    clean_chain = FilterChain([eco, guards["all"]])
    changed, right_none, right_chain = [], [], []
    for i, q in enumerate(qs):
        ctx_none = [h.text for h in sorted(base_hits[i], key=lambda h: -h.score)[:5]]
        kept = clean_chain.filter(q.question, base_hits[i]).kept
        ctx_chain = [h.text for h in sorted(kept, key=lambda h: -h.score)[:5]]
        a_none = ext.generate(q.question, ctx_none).text
        a_chain = ext.generate(q.question, ctx_chain).text if ctx_chain else ""
        changed.append(a_none != a_chain)
        right_none.append(any(contains_answer(a_none, a) for a in q.answers))
        right_chain.append(any(contains_answer(a_chain, a) for a in q.answers))
    out["clean_cost"] = {
        "answers_changed": detection_rate(changed), "correct_none": detection_rate(right_none),
        "correct_chain": detection_rate(right_chain), "n": len(changed),
    }  # fmt: skip
    print(
        f"\n## Clean cost of the chain (EcoSafeRAG + InjectionGuard), extractive generator, "
        f"{len(changed)} clean test questions: answers changed {pct(detection_rate(changed))}; "
        f"answer string in the answer: none {pct(detection_rate(right_none))}, chain "
        f"{pct(detection_rate(right_chain))}"
    )
    out["output_check"] = {
        "obeying_answers_refused": detection_rate(obeyed), "n_canary": len(obeyed),
        "clean_false_refusals": detection_rate(false_ref), "n_clean": len(false_ref),
    }  # fmt: skip
    print("\n## Output-side check (injection-output)")
    print(
        f"obeying answers refused: {pct(detection_rate(obeyed))} of {len(obeyed)} canary rows "
        f"(all families and languages, planted in-passage); clean answers refused (extractive "
        f"generator, {len(false_ref)} clean test retrievals): {pct(detection_rate(false_ref))}"
    )

    # 8. latency
    import torch

    torch.set_num_threads(1)
    g = make_guard(enc, heads["all"], cals["all"])  # type: ignore[arg-type]
    g.precompute(texts)
    eco.precompute(texts)
    lat: dict[str, list[float]] = {"injection-guard": [], "ragshield chain": []}
    chain = FilterChain([eco, g])
    for i, q in enumerate(qs):
        for name, flt in (("injection-guard", g), ("ragshield chain", chain)):
            t0 = time.perf_counter()
            flt.filter(q.question, base_hits[i])
            lat[name].append((time.perf_counter() - t0) * 1000)
    out["latency_ms"] = {
        k: {"p50": float(np.percentile(v, 50)), "p95": float(np.percentile(v, 95))}
        for k, v in lat.items()
    }
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    out["latency_load_average"] = load
    print(
        f"\n## Latency, k=10, one thread, index sentences precomputed ({len(qs)} test "
        f"questions; load average {load})"
    )
    for k, v in out["latency_ms"].items():
        print(f"  {k:<16} p50 {v['p50']:6.2f} ms   p95 {v['p95']:6.2f} ms")
    enc.save()
    out["seconds"] = time.time() - t_start
    print(f"\n(total {out['seconds']:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
