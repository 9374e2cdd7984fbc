"""Adaptive attacks on real retrieval: the adaptive table and the filter-aware budget curve.

Usage (one command prints both tables for both corpora)::

    nice -n 10 python benchmarks/bench_filter_aware.py
    python benchmarks/bench_filter_aware.py --datasets hotpotqa --budgets 10,50 --limit 10
    python benchmarks/bench_filter_aware.py --sections curve --defenses "none;ragdefender"

What it measures (issue #28; metrics of :mod:`ragshield.eval.real_retrieval`): every
passage of an on-topic corpus (``../shared/data/ontopic/``) in an exact FAISS index
(packaged MiniLM), the chains calibrated from that index as ``ragshield index`` + ``ask``
deploy them, k = 10 retrieved, the 5 survivors nearest the question = the context.

* ``adaptive`` — every adaptive setting of :mod:`ragshield.attacks.settings` (rewritten /
  moved / absent question prefix, answer spreading, near-duplicate of the gold passage,
  meta-epistemic framing) next to the published PoisonedRAG shape, planted into a copy;
  cell = attack reaches the context / adversarial majority of the context.
  ``--paraphrase MODEL`` adds the opt-in ``prefix-llm`` row (the LLM rewrites the question;
  replies cached under the ragshield cache).
* ``curve`` — the filter-aware attacker (:mod:`ragshield.attacks.filter_aware`) searches
  against each chain with a budget of black-box calls per target; one search per (target,
  chain) with the largest budget gives every smaller budget as a checkpoint (the attacker
  plants the survivors of the best set found within that many calls). Cell = reaches /
  majority after 10 / 50 / 200 calls; ``calls`` = mean calls actually spent (the search
  stops when all 5 passages survive).
  ``--generator MODEL`` (e.g. ``qwen2.5-0.5b``) answers each question from the context the
  chain keeps with the survivors planted, and the cell gains the end-to-end ASR: the answer
  contains the attacker's target answer (a target with no survivor: the clean context,
  the no-attack baseline's test) — the same test as ``bench_real_retrieval.py
  --generator``, whose answer cache it shares. The ``adaptive`` section takes it too.
  ``--through-ingest batch,single`` adds a row per chain where the attacker must enter
  through ``ragshield add`` (:class:`~ragshield.attacks.filter_aware.IngestOracle`): each
  call adds its set through the shipped ingestion screen (calibrated from the index, as
  ``add`` builds it) — as one batch, or one passage per batch (the attacker adapted to the
  layer) — and only the accepted passages are planted; ``quarantined / submitted`` counts
  the candidate passages the calls added and the screen flagged.
* ``ingest-clean`` — that screen's clean cost on the same corpus: the gold passages of the
  split's questions taken out of an index copy and added back, as one batch and one at a
  time; share quarantined with a Wilson 95 % interval.
* ``diagnose`` — why the survivors survive (RAGDefender chains only): the search at the
  largest budget, then each target's surviving set planted once more and every survivor's
  stage scores read from the filter's details — question echo, question coverage, the
  index-side novelty, its 2nd retrieved neighbour (the planted-group density) and its
  closest paraphrase — beside the stage bars, per family and per target.

Splits (the attacker has no parameter fitted on any split; ``--split dev`` runs the same
sections on the tuning split, HotpotQA non-targets / SQuAD even articles, with template
bodies):
HotpotQA test = the 44 shared poisoning targets (published PoisonedRAG bodies and blind
texts; gold = the first gold passage); SQuAD test = the odd articles, ``--squad-per-topic``
questions per article (a seeded sample, to keep the run modest on a shared machine), with
ragshield's template bodies (labelled). Chains: none, the paper's algorithm
(``ragdefender-paper``), the authors' ``ragdefender`` package when installed
(``pip install --no-deps ragdefender pandas``; its embedding calls are served from the same
MiniLM vectors, so its decisions are unchanged), ragshield's ``ragdefender`` and the
recommended chain ``ragdefender,ecosaferag``.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))

SHARED = Path(os.environ.get("RAGSHIELD_SHARED_DATA", "")) if os.environ.get(
    "RAGSHIELD_SHARED_DATA"
) else Path(__file__).resolve().parents[1].parent / "shared" / "data"  # fmt: skip
DATASETS = {
    "hotpotqa": ("ontopic/hotpotqa_distractor_dev100.json", "poisoning/hotpotqa"),
    "squad": ("ontopic/squad_v1.1_dev_43articles.json", None),
}
DEFENSES = "none;ragdefender-paper;authors;ragdefender;ragdefender,ecosaferag"
SECTIONS = ("adaptive", "curve", "diagnose", "ingest-clean")


def _shared() -> Path:
    for cand in (SHARED, Path("/work/shared/data")):
        if cand.is_dir():
            return cand
    sys.exit(f"skipped: {SHARED} is absent (the shared evaluation data)")


def chains_for(spec: str, enc: Any, mode: str) -> dict[str, Any]:
    from bench_real_retrieval import _with_authors
    from ragshield.defenses.registry import build_chains
    from ragshield.eval.cli.retrieval import ragdefender_params

    plain = ";".join(c for c in spec.split(";") if c != "authors")
    chains: dict[str, Any] = dict(build_chains(plain, enc, ragdefender_params(mode)))
    if "authors" in spec.split(";"):
        chains = _with_authors(chains, enc, mode)
    return chains


def cell(m: dict[str, float]) -> str:
    """reaches / majority, then the end-to-end ASR when a generator answered."""
    asr = f" / ASR {m['asr']:.2f}" if "asr" in m else ""
    return f"{m['attack_reaches']:.2f} / {m['adv_majority']:.2f}{asr}"


def adaptive_table(data: Any, cases: list, chains: dict, enc: Any, store: Any, seed: int,
                   k: int, paraphrase: str | None = None, split: str = "test",
                   generator: Any = None) -> tuple[str, dict]:  # fmt: skip
    from ragshield.attacks.settings import SETTINGS
    from ragshield.eval.real_retrieval import run_real_eval

    settings = ["clean", "poisonedrag"] + [
        n for n, s in SETTINGS.items() if s.group == "adaptive" and s.shape == "adaptive"
        and not s.opt_in
    ]  # fmt: skip
    if paraphrase:  # opt-in: the packaged LLM paraphrases each question (cached replies)
        from ragshield.attacks.writer import TextWriter
        from ragshield.eval.adaptive_eval import paraphrase_texts

        cases = paraphrase_texts(cases, TextWriter(paraphrase))
        settings.append("prefix-llm")
    res = run_real_eval(data, cases, chains, settings, encoder=enc, k=k, seed=seed,
                        split=split, base_store=store, generator=generator)  # fmt: skip
    names = list(chains)
    lines = ["| setting | planted/q (texts) | " + " | ".join(names) + " |",
             "|---" * (len(names) + 2) + "|"]  # fmt: skip
    for s in settings:
        r0 = res.get(names[0], s)
        if s == "clean":
            vals = [f"gold kept {res.get(n, s).metrics['gold_kept']:.2f}, benign removed "
                    f"{res.get(n, s).metrics['benign_removed']:.3f}" for n in names]  # fmt: skip
        else:
            vals = [cell(dict(res.get(n, s).metrics)) for n in names]
        lines.append(f"| {s} | {r0.m_planted:.1f} ({r0.sources}) | " + " | ".join(vals) + " |")
    return "\n".join(lines), res.to_dict()


def curve_table(data: Any, cases: list, chains: dict, enc: Any, store: Any, seed: int, k: int,
                budgets: list[int], novelty: bool = True, split: str = "test",
                ingest: tuple[str, ...] = (), generator: Any = None) -> tuple[str, dict]:  # fmt: skip
    """One row per chain; with ``ingest`` modes (``batch`` / ``single``) also one row per
    chain and mode where the attacker enters through ``ragshield add``'s screen. With a
    ``generator`` each budget's planted context is answered (end-to-end ASR)."""
    from ragshield.attacks.filter_aware import IngestOracle, shipped_screen
    from ragshield.eval.adaptive_eval import search_cases
    from ragshield.eval.real_retrieval import index_novelty, run_real_eval
    from ragshield.store.profile import profile_vectors

    # the index's novelty table as `ragshield index` stores it; each call's candidates and
    # the planted survivors join it as `ragshield add` would add them
    table = index_novelty(store, novelty)
    screen = shipped_screen(enc, profile_vectors(store.vectors)) if ingest else None
    verdicts: dict = {}  # screen verdicts per batch: the same whatever the query-time chain

    text_of = {p.id: p.text for p in data.passages}
    golden = {c.id: text_of[c.gold_ids[0]] for c in cases if c.gold_ids[0] in text_of}
    head = " | ".join(f"{b} calls" for b in budgets)
    extra = " quarantined / submitted |" if ingest else ""
    lines = [f"| chain | {head} | calls spent (mean) |{extra} search s |",
             "|---" * (len(budgets) + 3 + bool(ingest)) + "|"]  # fmt: skip
    out: dict[str, Any] = {}
    for mode in ("", *ingest):  # every chain's row without the layer first, then with it
        for name, chain in chains.items():
            oracle = None if not mode else IngestOracle(
                store, enc, chain, screen, k=k, novelty=table, one_per_batch=mode == "single",
                verdicts=verdicts,
            )  # fmt: skip
            row = name + (f" + ingest ({INGEST_MODES[mode]})" if mode else "")
            t0 = time.perf_counter()
            spent: list[int] = []
            found = search_cases(
                cases, store, enc, chain, budget=max(budgets), golden_text=golden, k=k,
                seed=seed, checkpoints=budgets,
                on_case=lambda _c, f, spent=spent: spent.append(f.calls), novelty=table,
                oracle=oracle,
            )  # fmt: skip
            secs = time.perf_counter() - t0
            vals = []
            out[row] = {"calls_mean": sum(spent) / len(spent), "search_s": secs}
            for b in budgets:
                planted = found[b] if oracle is None else _admitted(found[b], oracle)
                res = run_real_eval(data, planted, {name: chain}, [f"filter-aware:{b}"],
                                    encoder=enc, k=k, seed=seed, split=split, base_store=store,
                                    calibrate_index=False, novelty=table,
                                    generator=generator)  # fmt: skip
                m = dict(res.rows[0].metrics)
                out[row][str(b)] = m | {"m_planted": res.rows[0].m_planted}
                vals.append(cell(m))
            q = ""
            if oracle is not None:
                out[row] |= {"submitted": oracle.submitted, "quarantined": oracle.quarantined}
                q = f" {oracle.quarantined}/{oracle.submitted} |"
            elif ingest:
                q = " - |"
            line = (f"| {row} | " + " | ".join(vals) +
                    f" | {sum(spent) / len(spent):.1f} |{q} {secs:.0f} |")  # fmt: skip
            lines.append(line)
            print(f"  curve: {row} done ({secs:.0f} s): {line}", file=sys.stderr, flush=True)
    return "\n".join(lines), out


#: --through-ingest modes: the attacker's set added as one batch, or one passage per batch
INGEST_MODES = {"batch": "one batch", "single": "one per batch"}


def _admitted(cases: list, oracle: Any) -> list:
    """``cases`` with only the searched passages the ingestion screen accepts (each target's
    set added as the oracle adds it); the search planted only sets it saw accepted, so this
    drops nothing unless the screen is not deterministic — counted on stderr if it does."""
    import dataclasses

    from ragshield.eval.plant import SEARCHED_KEY

    out, dropped = [], 0
    for c in cases:
        texts = list(c.attack_texts.get(SEARCHED_KEY, ()))
        ok = oracle.accepted(texts) if texts else []
        kept = tuple(t for t, a in zip(texts, ok, strict=True) if a)
        dropped += len(texts) - len(kept)
        out.append(dataclasses.replace(c, attack_texts={**c.attack_texts, SEARCHED_KEY: kept}))
    if dropped:
        print(f"  ingest: {dropped} searched passages quarantined when re-added", file=sys.stderr)
    return out


def ingest_clean_table(data: Any, cases: list, store: Any, enc: Any) -> tuple[str, dict]:
    """The ingestion screen's clean cost on the same corpus: the gold passages of ``cases``
    taken out of an index copy and added back through the screen (built and calibrated
    from that copy as ``ragshield add`` does), as one batch and one passage per batch."""
    import numpy as np

    from ragshield.attacks.filter_aware import shipped_screen
    from ragshield.eval.intervals import wilson
    from ragshield.ingest import screen_documents
    from ragshield.store.faiss_store import FaissStore
    from ragshield.store.profile import profile_vectors

    gold = {g for c in cases for g in c.gold_ids}
    rows = [i for i, p in enumerate(store.passages) if p.id not in gold]
    back = [i for i, p in enumerate(store.passages) if p.id in gold]
    vecs = np.asarray(store.vectors, dtype=np.float32)
    copy = FaissStore(store.dim)
    copy.add([store.passages[i] for i in rows], vecs[rows])
    screen = shipped_screen(enc, profile_vectors(copy.vectors))
    docs, dvec = [store.passages[i] for i in back], vecs[back]
    lines = ["| added as | genuine passages quarantined | reasons (passages) | s/doc |",
             "|---|---|---|---|"]  # fmt: skip
    out: dict[str, Any] = {"index": len(copy), "added": len(docs)}
    for mode in INGEST_MODES:
        t0 = time.perf_counter()
        if mode == "batch":
            found = screen_documents(copy, enc, docs, dvec, screen)
        else:
            found = [screen_documents(copy, enc, [d], dvec[i : i + 1], screen)[0]
                     for i, d in enumerate(docs)]  # fmt: skip
        secs = time.perf_counter() - t0
        n = sum(s.flagged for s in found)
        lo, hi = wilson(n, len(found))
        why = Counter(r for s in found for r in s.reasons)
        top = "; ".join(f"{r} ({v})" for r, v in why.most_common(3))
        lines.append(f"| {INGEST_MODES[mode]} | {n}/{len(found)} = {n / len(found):.3f} "
                     f"[{lo:.3f}-{hi:.3f}] | {top or '-'} | {secs / len(found):.2f} |")  # fmt: skip
        out[mode] = {"quarantined": n, "reasons": dict(why), "s": secs}
    return "\n".join(lines), out


def _quantiles(xs: list[float]) -> str:
    v = sorted(xs)
    return f"{v[0]:.2f} / {v[len(v) // 2]:.2f} / {v[-1]:.2f}" if v else "-"


def _survivor_rows(rd: Any, oracle: Any, case: Any, found: Any, b: int, table: Any) -> list[dict]:
    """Each passage of the top-k with ``found.survivors[b]`` planted: its family (None for
    a genuine one) and the stage scores RAGDefender's details hold for it."""
    import hashlib

    import numpy as np

    from ragshield.defenses.ragdefender.evidence import trigram_cosine_matrix
    from ragshield.defenses.ragdefender.groups import knn_group_members
    from ragshield.defenses.ragdefender.math import cosine_matrix
    from ragshield.store.calibration_novelty import use_index_novelty

    texts = [t.text for t in found.survivors[b]]
    fam = {t.text: t.family for t in found.survivors[b]}
    retrieved = oracle.retrieve(case.question, texts)
    ids = ["fa::" + hashlib.sha1(t.encode("utf-8")).hexdigest()[:16] for t in texts]
    nov = table.with_added(ids, texts, oracle._vectors(texts)) if table is not None else {}
    use_index_novelty(rd, nov or None)
    d = rd.filter(case.question, retrieved).details
    sim = cosine_matrix(np.stack([r.embedding for r in retrieved]))
    lex = trigram_cosine_matrix([r.text for r in retrieved])
    kth = knn_group_members(sim, lex, rd.group_bars(), rd.knn.group_lexical).kth
    rows = []
    for i, r in enumerate(retrieved):
        para = [float(sim[i, j]) for j in range(len(retrieved)) if j != i and lex[i, j] < 0.6]
        n = nov.get(r.passage.id)
        rows.append({"family": fam.get(r.text), "echo": (d["echo"] or [0.0] * len(retrieved))[i],
                     "coverage": (d["coverage"] or [0.0] * len(retrieved))[i],
                     "novelty": None if n is None else n.share, "second": float(kth[i, 0]),
                     "paraphrase": max(para, default=0.0)})  # fmt: skip
    return rows


def diagnose_table(cases: list, chains: dict, enc: Any, store: Any, seed: int, k: int,
                   budgets: list[int], novelty: bool = True) -> tuple[str, dict]:  # fmt: skip
    """Why the filter-aware survivors survive: per family, each stage's score against its
    bar; per target, the set sizes at each budget and the families at the largest."""
    from ragshield.attacks.filter_aware import ChainOracle
    from ragshield.eval.adaptive_eval import search_cases
    from ragshield.eval.real_retrieval import index_novelty

    table = index_novelty(store, novelty)
    text_of = {p.id: p.text for p in store.passages}
    golden = {c.id: text_of.get(c.gold_ids[0], "") for c in cases if c.gold_ids}
    b = max(budgets)
    out: list[str] = []
    dump: dict[str, Any] = {}
    for name, chain in chains.items():
        rd = next((f for f in getattr(chain, "filters", [chain]) if hasattr(f, "group_bars")), None)
        if rd is None:
            continue
        oracle = ChainOracle(store, enc, chain, k=k, novelty=table)
        per: list[dict] = []
        sizes: list[dict] = []

        def seen(case: Any, found: Any, per: list = per, sizes: list = sizes, rd: Any = rd,
                 oracle: Any = oracle) -> None:  # fmt: skip
            sizes.append({"case": case.id, **{str(m): len(found.survivors[m]) for m in budgets},
                          "families": sorted({t.family for t in found.survivors[b]})})  # fmt: skip
            if found.survivors[b]:
                per.extend(_survivor_rows(rd, oracle, case, found, b, table))

        search_cases(cases, store, enc, chain, budget=b, golden_text=golden, k=k, seed=seed,
                     checkpoints=budgets, on_case=seen, novelty=table)  # fmt: skip
        bars = rd.group_bars()
        out += [f"#### {name}: every survivor at {b} calls, its stage scores (min / median / max)\n",
                "| family | survivors | echo (bars 0.75 pair+consensus, 0.9 lone) | coverage "
                "(bar 85) | novelty (bar <= 0.2) | 2nd-NN cosine (bar "
                f"{bars[0]:.3f}) | closest paraphrase (bar 0.85) |",
                "|---|---|---|---|---|---|---|"]  # fmt: skip
        fams = sorted({r["family"] for r in per if r["family"]},
                      key=lambda f: -sum(r["family"] == f for r in per))  # fmt: skip
        for f in [*fams, None]:
            rs = [r for r in per if r["family"] == f]
            cells = [_quantiles([float(r[key]) for r in rs if r[key] is not None])
                     for key in ("echo", "coverage", "novelty", "second", "paraphrase")]  # fmt: skip
            label = f or "*genuine passages of those sets*"
            out.append(f"| {label} | {len(rs)} | " + " | ".join(cells) + " |")
        reach = " / ".join(f"{sum(s[str(m)] > 0 for s in sizes) / len(sizes):.2f}" for m in budgets)
        hist = {m: [sum(s[str(m)] == n for s in sizes) for n in range(6)] for m in budgets}
        out += ["", f"reach at {'/'.join(map(str, budgets))} calls: {reach}; targets by surviving "
                "set size 0-5: " + "; ".join(f"{m} calls {hist[m]}" for m in budgets), ""]  # fmt: skip
        dump[name] = {"targets": sizes, "survivors": per}
    return "\n".join(out), dump


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="hotpotqa,squad")
    ap.add_argument("--sections", default="adaptive,curve")
    ap.add_argument("--defenses", default=DEFENSES)
    ap.add_argument("--budgets", default="10,50,200")
    ap.add_argument("--split", choices=("dev", "test"), default="test",
                    help="dev: the tuning split (HotpotQA non-targets, SQuAD even articles)")  # fmt: skip
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--squad-per-topic",
        type=int,
        default=2,
        help="SQuAD test questions per odd article (seeded sample)",
    )
    ap.add_argument("--limit", type=int, default=None, help="first N test questions")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/ragshield/bench"))
    ap.add_argument("--writer", default=None,
                    help="e.g. qwen2.5-0.5b: questions without published texts get LLM-written "
                         "ones, the search's bodies (bench_written)")  # fmt: skip
    ap.add_argument("--json", default=None, help="also write every measured row here")
    ap.add_argument("--no-novelty", dest="novelty", action="store_false",
                    help="hand the chains no index-side novelty table (an old index)")  # fmt: skip
    ap.add_argument("--through-ingest", default="",
                    help="curve: also search through `ragshield add`'s screen; modes 'batch' "
                    "(the set added as one batch) and/or 'single' (one passage per batch)")  # fmt: skip
    ap.add_argument("--generator", default=None,
                    help="e.g. qwen2.5-0.5b: answer each context, add the end-to-end ASR")  # fmt: skip
    ap.add_argument(
        "--paraphrase",
        default=None,
        help="add the prefix-llm row: e.g. qwen2.5-0.5b paraphrases each question",
    )
    args = ap.parse_args()
    shared = _shared()
    budgets = sorted({int(b) for b in args.budgets.split(",")})
    sections = set(args.sections.split(","))
    ingest = tuple(m for m in args.through_ingest.split(",") if m)
    if set(ingest) - set(INGEST_MODES) or set(sections) - set(SECTIONS):
        print(f"error: --through-ingest takes {','.join(INGEST_MODES)}; --sections takes "
              f"{','.join(SECTIONS)}", file=sys.stderr)  # fmt: skip
        sys.exit(2)

    from bench_real_retrieval import bench_generator
    from bench_written import llm_written
    from ragshield.defenses.calibration import calibrate
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.ontopic import load_ontopic
    from ragshield.eval.real_retrieval import build_base_store
    from ragshield.store.profile import profile_vectors

    enc = SentenceTransformerEncoder()
    gen = bench_generator(args.generator, enc, args.cache_dir)
    dump: dict[str, Any] = {"seed": args.seed, "k": args.k, "context_k": 5, "budgets": budgets,
                            "generator": args.generator, "writer": args.writer}  # fmt: skip
    for name in args.datasets.split(","):
        rel, pois = DATASETS[name]
        per_topic = args.squad_per_topic if name == "squad" else None
        data = load_ontopic(shared / rel, poisoning_dir=shared / pois if pois else None,
                            per_topic=per_topic, seed=args.seed)  # fmt: skip
        cases = llm_written(data, data.split(args.split)[: args.limit], enc, args.writer, args.seed)
        mode = "multi_hop" if name == "hotpotqa" else "single_hop"
        chains = chains_for(args.defenses, enc, mode)
        store = build_base_store(data, enc, args.cache_dir)
        profile = profile_vectors(store.vectors)  # as `ragshield index` records it
        for chain in chains.values():
            calibrate(chain, profile)
        sample = f", {per_topic} per article (seeded sample)" if per_topic else ""
        print(f"## {name}: {args.split} split, {len(cases)} questions{sample}; index "
              f"{len(store)} passages; k={args.k}, context 5, seed {args.seed}; attack texts "
              f"written by {args.writer or 'nobody (published, else templates)'}\n", flush=True)  # fmt: skip
        dump[name] = {"n_questions": len(cases), "index_size": len(store)}
        if "adaptive" in sections:
            t0 = time.perf_counter()
            table, rows = adaptive_table(
                data, cases, chains, enc, store, args.seed, args.k, args.paraphrase, args.split,
                gen,
            )  # fmt: skip
            print("### adaptive settings (attack reaches / adversarial majority)\n")
            print(table + f"\n\n({time.perf_counter() - t0:.0f} s)\n", flush=True)
            dump[name]["adaptive"] = rows
        if "ingest-clean" in sections:
            t0, c0 = time.perf_counter(), time.process_time()
            table, rows = ingest_clean_table(data, cases, store, enc)
            print(f"### the ingestion screen's clean cost: the gold passages of these "
                  f"{len(cases)} questions ({rows['added']}) re-added to an index of the other "
                  f"{rows['index']}\n")  # fmt: skip
            print(table + f"\n\n(wall {time.perf_counter() - t0:.0f} s, CPU "
                  f"{time.process_time() - c0:.0f} s)\n", flush=True)  # fmt: skip
            dump[name]["ingest-clean"] = rows
        if "curve" in sections:
            table, rows = curve_table(data, cases, chains, enc, store, args.seed, args.k, budgets,
                                      args.novelty, args.split, ingest, gen)  # fmt: skip
            print("### filter-aware attacker: reaches / majority against budget "
                  "(black-box calls per target)\n")  # fmt: skip
            print(table + "\n", flush=True)
            dump[name]["curve"] = rows
        if "diagnose" in sections:
            table, rows = diagnose_table(cases, chains, enc, store, args.seed, args.k, budgets,
                                         args.novelty)  # fmt: skip
            print("### why the filter-aware survivors survive\n")
            print(table + "\n", flush=True)
            dump[name]["diagnose"] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=2, default=float), encoding="utf-8")


if __name__ == "__main__":
    main()
