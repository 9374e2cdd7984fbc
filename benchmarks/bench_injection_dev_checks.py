"""Dev-split checks of the sixth session's changes (issue #23): no test text.

    python benchmarks/bench_injection_dev_checks.py --section normalize
    python benchmarks/bench_injection_dev_checks.py --section keep-passages --hits-cache runs/hits
    python benchmarks/bench_injection_dev_checks.py --section trim --split dev --questions 150

What it measures (every figure printed is measured in this run; seed 0):

* ``normalize`` — the English wordings of ``injection-adaptive``
  (:data:`ragshield.attacks.injection_adaptive.INTENTS`, slots filled; in no training list)
  obfuscated as ``bench_injection.py`` does (:func:`ragshield.attacks.injection_families.
  obfuscate`: leet / zero-width / homoglyph): the share of their words
  :func:`~ragshield.defenses.injection.text.normalize` restores, and of sentences restored
  exactly; then how many benign dev sentences (SQuAD articles at even title positions,
  HotpotQA dev passages) step 6 (:func:`~ragshield.defenses.injection.text.fold_leet_words`)
  changes — a false fold is a benign sentence read as something else.
* ``keep-passages`` — EcoSafeRAG's ``keep_passages`` on the poisoning benchmark's *dev*
  retrievals (HotpotQA non-targets, SQuAD even articles; k = 10, context 5; the retrieved
  sets ``bench_adaptive_poisoning.py --hits-cache`` left, built if absent): for the clean
  set, why EcoSafeRAG removed each benign passage (the reasons of its decisions) with the
  option off; then the chain ``ragdefender,ecosaferag`` with it off and on, every setting:
  benign passages removed and attack reaching the context.
* ``trim`` (eighth session) — EcoSafeRAG's ``trim`` (what θ removes) on real retrieval:
  ``--questions`` SQuAD questions of ``--split`` (``bench_ecosaferag.py``'s article split
  and question draw, seed 0), real top-10 from the 1,888-paragraph FAISS index. Clean:
  answer kept (an answer string in the 5 best-scored kept passages; no filter first),
  sentences removed (EcoSafeRAG's own count) and passages handed on changed, per
  question. Planted (one passage per question, caught = retrieved and no instruction
  sentence left in the context): ``bench_ecosaferag.py``'s four plants, ``inpassage``
  (a paragraph of the article without the answer carrying one of the harness's
  instructions, no question) and ``gold-edit`` (the gold paragraph itself rewritten with
  it, as the scan's ``injection-hijack`` does).
* ``prefixed`` (tenth session) — why the question-prefixed placement is caught less than
  in-passage, and the guard's ``scope="restated"``: every English ``bastioncorpus`` row
  planted with ``prefixed`` / ``in-passage`` / ``mid-paragraph`` / ``split`` into *dev*
  questions and dev carriers (``bench_injection.py``'s planting and "caught" rule), each
  family scored by a head retrained without it, calibrated on the 1,888 paragraphs; the
  misses of the prefixed placement printed sentence by sentence (own scores, windows,
  rules). Benign cost of the scope: ``--questions`` dev questions' real top-10 with the
  question written in front of each passage (the worst case of an FAQ corpus: every
  retrieved passage restates the question), sentences removed per passage; and the dev
  hard negatives (``train_injection_head.py``, 70) each after a dev question.
* ``reworded`` (lead, stop 37) — the restated scope against an attacker who has read it:
  the question each planted passage carries is edited (``attacks.rewrite``: words dropped,
  synonyms, reordered, statement form, typos; one per plant in turn), for the prefixed and
  split placements; verbatim test vs letter-level coverage vs coverage + embedding echo
  (``--bars``) vs coverage + the restating stretch cut off before scoring (``--spans``:
  ``restated_span`` bars, eleventh session; ``--leads``: the words before the stretch in
  its sentence cut with it, second round; ``--skip-base``: those rows only). Benign cost: dev questions' genuine top-10
  *as retrieved* (passages touched, sentences removed, passages holding an answer removed
  whole, passages in which a restating stretch is found), and the dev hard negatives each
  after a reworded dev question.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import contextlib
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
_WORDS = re.compile(r"[\w@$]+")


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def section_normalize() -> None:
    from ragshield.attacks.injection_adaptive import INTENTS
    from ragshield.attacks.injection_families import obfuscate
    from ragshield.defenses.injection import text as T
    from ragshield.defenses.injection.scoring import segment

    fill = {"{W}": "ZX-4F2A9C", "{A}": "Paris", "{U}": "https://t.example/c?q="}
    texts = []
    for by_lang in INTENTS.values():
        for w in by_lang.get("en", ()):
            for slot, value in fill.items():
                w = w.replace(slot, value)
            texts.append(w)
    print(f"## normalize on {len(texts)} English dev wordings (injection-adaptive)\n")
    print("| obfuscation | words restored | sentences restored exactly |\n|---|---|---|")
    for how in ("leet", "zero-width", "homoglyph"):
        ok = total = exact = 0
        for t in texts:
            a, b = _words(t), _words(T.normalize(obfuscate(t, how)))
            good = sum(x == y for x, y in zip(a, b, strict=False)) if len(a) == len(b) else 0
            ok, total, exact = ok + good, total + len(a), exact + (good == len(a))
        print(f"| {how} | {ok / total:.3f} | {exact / len(texts):.3f} |")
    squad = json.loads((DATA / "ontopic/squad_v1.1_dev_43articles.json").read_text("utf-8"))
    titles = sorted({p["title"] for p in squad["passages"]})
    dev = set(titles[0::2])
    hotpot = json.loads((DATA / "ontopic/hotpotqa_distractor_dev100.json").read_text("utf-8"))
    sets = {
        "SQuAD dev articles (even titles)": [
            s for p in squad["passages"] if p["title"] in dev for s in segment(p["text"])
        ],
        "HotpotQA dev passages": [s for p in hotpot["passages"] for s in segment(p["text"])],
    }
    print("\n| benign dev set | sentences | changed by step 6 | examples |\n|---|---|---|---|")
    for name, sentences in sets.items():
        changed = []
        for s in sentences:
            before = T.normalize(s)
            # step 6 off: what steps 1-5 alone make of the sentence
            t = T.unicodedata.normalize("NFKC", s)
            t = "".join(c for c in t if T.unicodedata.category(c) != "Cf")
            t = T.fold_confusables(t) if not t.isascii() else t
            t = T._SPACED.sub(lambda m: m.group(0).replace(" ", ""), T._join_spaced_words(t))
            t = T._LEET_SHORT.sub(T._unleet, T._LEET_WORD.sub(T._unleet, t))
            if before != t:
                changed.append(f"{t[:60]!r} -> {before[:60]!r}")
        ex = "; ".join(changed[:3]) or "–"
        print(f"| {name} | {len(sentences)} | {len(changed)} | {ex} |")


def section_keep_passages(args: argparse.Namespace) -> None:
    import bench_adaptive_poisoning as bap
    from ragshield.defenses.ecosaferag import EcoSafeRAG
    from ragshield.defenses.registry import build_chains
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.cli.retrieval import ragdefender_params

    enc = SentenceTransformerEncoder()
    ns = argparse.Namespace(
        k=10, seed=0, limit=None, hits_cache=args.hits_cache, cache_dir=args.cache_dir
    )
    spec = "ragdefender,ecosaferag"
    for name in args.datasets.split(","):
        b = bap.Bench(name, "dev", enc, ns)
        hits, _, _, _ = b.hits("clean")
        eco = bap.calibrated(b, EcoSafeRAG(enc, keep_passages=False))
        reasons: Counter[tuple[str, ...]] = Counter()
        n = 0
        for case, retrieved in zip(b.cases, hits, strict=True):
            n += len(retrieved)
            res = eco.filter(case.question, retrieved)
            for rid in res.removed_ids:
                reasons[
                    tuple(sorted({d.reason for d in res.decisions if d.passage_id == rid}))
                ] += 1
        census = ", ".join(f"{'+'.join(k)}: {v}" for k, v in reasons.most_common()) or "none"
        print(f"\n## {name} dev (n={len(b.cases)}, {n} retrieved passages), clean set, "
              f"EcoSafeRAG with keep_passages=False removed: {census}\n")  # fmt: skip
        chains: dict[bool, Any] = {}
        for keep in (False, True):
            chain = build_chains(spec, enc, ragdefender_params(b.mode))[spec]
            for f in chain.filters:
                if isinstance(f, EcoSafeRAG):
                    f.keep_passages = keep
            chains[keep] = bap.calibrated(b, chain)
        print("| setting | benign removed, off -> on | gold kept | attack reaches |")
        print("|---|---|---|---|")
        for s in (*bap.PUBLISHED, *bap.ADAPTIVE):
            m = {keep: b.run(d, s) for keep, d in chains.items()}

            def cell(key: str, m: dict[bool, dict[str, float]] = m) -> str:
                return f"{m[False][key]:.3f} -> {m[True][key]:.3f}"

            print(f"| {s} | {cell('benign_removed')} | {cell('gold_kept')} | "
                  f"{cell('attack_reaches')} |", flush=True)  # fmt: skip
        b.save_hits()


def section_trim(args: argparse.Namespace) -> None:
    import numpy as np

    from bench_ecosaferag import (
        CACHE_DIR,
        ONTOPIC,
        DiskCachedEncoder,
        ontopic_split,
        ontopic_store,
        plant_text,
    )
    from ragshield.attacks.injection import (
        INJECTION_TEMPLATES,
        POSITIONS,
        fill_template,
        insert_instruction,
        instruction_survives,
    )
    from ragshield.defenses.ecosaferag import EcoSafeRAG
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.injection import OWN_KINDS
    from ragshield.store.faiss_store import FaissStore
    from ragshield.text import contains_answer
    from ragshield.types import Passage

    data = json.loads((DATA / ONTOPIC).read_text(encoding="utf-8"))
    gold_of = {q["id"]: q["gold_passage_ids"][0] for q in data["questions"]}
    enc = DiskCachedEncoder(SentenceTransformerEncoder(), CACHE_DIR / "minilm_vectors.npz")
    store = ontopic_store(data, enc)
    qs = ontopic_split(data, args.split, 300, 0)[: args.questions]
    qv = enc.encode([q.question for q in qs])
    by_article: dict[str, list[str]] = {}
    for p in store.passages:
        by_article.setdefault(p.title, []).append(p.text)
    pos = {p.id: i for i, p in enumerate(store.passages)}
    templates = [t for k in OWN_KINDS for t in INJECTION_TEMPLATES[k]]
    plants = ("prefixed", "prefixed-hijack", "offtopic", "suffix", "inpassage", "gold-edit")

    def plant(i: int, kind: str) -> tuple[str, list[str], str | None]:
        q = qs[i]
        if kind not in ("inpassage", "gold-edit"):
            text, instrs = plant_text(q, kind, 0, i, by_article.get(q.article, ()))
            return text, instrs, None
        rng = np.random.default_rng([0, i, 13])
        instr = fill_template(templates[int(rng.integers(len(templates)))], q.question, q.target)
        where = POSITIONS[int(rng.integers(len(POSITIONS)))]
        if kind == "inpassage":
            pool = [
                t
                for t in by_article[q.article]
                if not any(contains_answer(t, a) for a in q.answers)
            ]
            carrier = pool[int(rng.integers(len(pool)))]
            return insert_instruction(carrier, instr, where), [instr], None
        gid = gold_of[q.id]
        return insert_instruction(store.passages[pos[gid]].text, instr, where), [instr], gid

    def searched(i: int, kind: str) -> tuple[Any, str, list[str], str | None]:
        text, instrs, gid = plant(i, kind)
        ps, vs = list(store.passages), np.array(store.vectors, copy=True)
        out = FaissStore(store.dim, encoder_name=store.encoder_name)
        if gid is not None:  # an edit of the gold paragraph, re-encoded in place
            j = pos[gid]
            ps[j] = Passage(gid, text, ps[j].title)
            vs[j] = enc.encode([text])[0]
            out.add(ps, vs)
            return out, gid, instrs, gid
        out.add(ps, vs)
        out.add([Passage(f"planted::{qs[i].id}", text)], enc.encode([text]))
        return out, f"planted::{qs[i].id}", instrs, None

    print(f"# EcoSafeRAG trim, SQuAD {args.split} ({len(qs)} questions, real top-10, seed 0)")
    print("| trim | answer kept | sentences removed | passages changed / question | "
          + " | ".join(plants) + " |")  # fmt: skip
    print("|---" * (4 + len(plants)) + "|")
    for spec in ["none-filter", *args.trims.split(",")]:
        flt = None
        if spec != "none-filter":
            mode, _, t = spec.partition(":")
            flt = EcoSafeRAG(encoder=enc, trim=mode, **({"offtopic_min": float(t)} if t else {}))
        ans, removed, changed = [], [], []
        for i, q in enumerate(qs):
            hits = store.search(qv[i : i + 1], 10)[0]
            res = None if flt is None else flt.filter(q.question, hits)
            kept = list(hits) if res is None else list(res.kept)
            ctx = sorted(kept, key=lambda r: -r.score)[:5]
            ans.append(any(contains_answer(r.text, a) for r in ctx for a in q.answers))
            if res is not None:
                d = res.details
                removed.append(1.0 - d["n_kept_sentences"] / max(d["n_sentences"], 1))
                text_of = {r.id: r.text for r in res.kept}
                changed.append(sum(text_of.get(h.id) != h.text for h in hits))
        cells = []
        for kind in plants if flt is not None else ():
            caught = []
            for i, q in enumerate(qs):
                s, pid, instrs, gid = searched(i, kind)
                hits = s.search(qv[i : i + 1], 10)[0]
                if not any(r.id == pid for r in hits):
                    continue  # not retrieved: nothing to catch
                res = flt.filter(q.question, hits)
                ctx = sorted(res.kept, key=lambda r: -r.score)[:5]
                left = any(
                    any(instruction_survives(r.text, x) for x in instrs)
                    or (gid is None and contains_answer(r.text, q.target))
                    for r in ctx
                    if r.id == pid
                )
                caught.append(not left)
            cells.append(f"{np.mean(caught):.3f} (n={len(caught)})")
        na = "n/a"
        print(
            f"| {spec} | {np.mean(ans):.3f} | {np.mean(removed) if removed else 0.0:.3f} | "
            f"{np.mean(changed) if changed else 0.0:.2f} | "
            + " | ".join(cells or [na] * len(plants))
            + " |",
            flush=True,
        )
    enc.save()


def _lofo_setup() -> tuple[Any, Any, list[Any], dict[str, Any], dict[str, Any]]:
    """The dev reading both placement sections share: the encoder, the 1,888-paragraph
    index, the dev questions, one head per family trained without it and its calibration."""
    from bench_ecosaferag import ontopic_split
    from bench_injection import ontopic_index
    from ragshield.attacks.injection_families import FAMILIES
    from ragshield.defenses.injection.calibration import calibrate_index
    from train_injection_head import cached_encoder, train_head

    enc = cached_encoder()
    idx = ontopic_index(DATA, enc)
    qs = ontopic_split(idx.data, "dev", 10**6, 0)
    heads = {f: train_head(DATA, enc, kind="lr", c=3.0, leave_out=f, seed=0) for f in FAMILIES}
    cals = {f: calibrate_index(idx.texts, enc, head=h, sample=10**9) for f, h in heads.items()}
    enc.save()
    return enc, idx, qs, heads, cals


def _family_row(fam: str, n: int, label: str, cells: list[float]) -> None:
    print(f"| {fam} ({n}) | {label} | " + " | ".join(f"{c:.3f}" for c in cells) + " |", flush=True)


def _mean_rows(
    means: dict[tuple[str, str], list[float]], labels: list[str], placements: tuple[str, ...]
) -> None:
    import numpy as np

    for label in labels:
        cells = " | ".join(f"{np.mean(means[(label, pl)]):.3f}" for pl in placements)
        print(f"| **mean** | {label} | {cells} |")


def _benign_top10(idx: Any, enc: Any, qs: list[Any], n: int) -> tuple[Any, Any, list[Any], Any]:
    """The packaged head, its calibration on the index, the first ``n`` dev questions and
    their real top-10 (the benign-cost reading of the prefixed / reworded sections)."""
    from ragshield.defenses.injection.calibration import calibrate_index
    from ragshield.defenses.injection.head import InjectionHead

    head = InjectionHead.packaged()
    cal = calibrate_index(idx.texts, enc, head=head, sample=10**9)
    assert cal is not None
    some = qs[:n]
    return head, cal, some, idx.store.search(enc.encode([q.question for q in some]), 10)


def section_prefixed(args: argparse.Namespace) -> None:
    import random
    from dataclasses import replace

    import numpy as np

    from bench_injection import carriers_for, make_guard, survives
    from ragshield.attacks.injection_families import FAMILIES, canary_word, family_rows, fill, plant
    from ragshield.eval.injection_detection import detection_rate
    from ragshield.types import Passage, RetrievedPassage
    from train_injection_head import DEV_HARD_NEGATIVES, DEV_HARD_NEGATIVES_2

    enc, idx, qs, heads, cals = _lofo_setup()
    scopes = ("sentence", "restated")
    placements = ("prefixed", "in-passage", "mid-paragraph", "split")
    rng = np.random.default_rng(0)
    print(
        "# Prefixed vs in-passage on dev (seed 0; bastioncorpus English rows; LOFO heads; fpr0.1)"
    )
    print("| family (n) | scope | " + " | ".join(placements) + " |")
    print("|---" * (len(placements) + 2) + "|")
    means: dict[tuple[str, str], list[float]] = {}
    for fam in FAMILIES:
        rows = family_rows(fam, lang="en")
        plants = {pl: [] for pl in placements}  # type: dict[str, list[tuple[str, str, str]]]
        for pl in placements:
            for i, r in enumerate(rows):
                q = qs[int(rng.integers(len(qs)))]
                pool = carriers_for(q, idx.by_article)
                carrier = pool[int(rng.integers(len(pool)))]
                text, planted = plant(
                    fill(r.text, canary_word(r.id)), pl, q.question, carrier, random.Random(i)
                )
                plants[pl].append((q.question, text, planted))
        for scope in scopes:
            g = make_guard(enc, heads[fam], cals[fam], "fpr0.1")  # type: ignore[arg-type]
            g.scope = scope  # type: ignore[assignment]
            cells = []
            for pl in placements:
                caught = []
                for question, text, planted in plants[pl]:
                    res = g.filter(question, [RetrievedPassage(Passage("x", text), 1.0, 0)])
                    ok = not survives(" ".join(k.text for k in res.kept), planted)
                    caught.append(ok)
                    if not ok and pl == "prefixed" and scope == "sentence":
                        sc = g.score_texts([text])[0]
                        print(f"  missed: threshold {g.threshold_():.3f}, low {g.low_threshold_()}")
                        for j, sent in enumerate(sc.sentences):
                            print(
                                f"    own {sc.own[j]:.3f} rules {list(sc.rules[j])} | {sent[:100]}"
                            )
                        print(f"    windows {np.round(sc.pair, 3).tolist()}")
                cells.append(detection_rate(caught))
                means.setdefault((scope, pl), []).append(cells[-1])
            _family_row(fam, len(rows), scope, cells)
    _mean_rows(means, list(scopes), placements)
    # benign cost: every retrieved passage restates the question (the FAQ worst case)
    head, cal, some, hits = _benign_top10(idx, enc, qs, args.questions)
    hard = [*DEV_HARD_NEGATIVES, *DEV_HARD_NEGATIVES_2]
    print(
        f"\n# Benign cost (packaged head, fpr0.1): {len(some)} dev questions' top-10, each "
        "passage after its question; dev hard negatives (70) after a dev question"
    )
    print(
        "| scope | passages touched | sentences removed | hard negatives: passages touched "
        "| hard negatives: sentences removed |"
    )
    print("|---|---|---|---|---|")
    for scope in scopes:
        g = make_guard(enc, head, cal, "fpr0.1")
        g.scope = scope  # type: ignore[assignment]
        touched = removed = total = 0
        for q, h in zip(some, hits, strict=True):
            passages = [
                RetrievedPassage(replace(r.passage, text=f"{q.question} {r.text}"), r.score, r.rank)
                for r in h
            ]
            res = g.filter(q.question, passages)
            total += sum(len(sc.sentences) for sc in g.score_texts([p.text for p in passages]))
            touched += len({d.index for d in res.decisions})
            removed += sum(d.unit == "sentence" for d in res.decisions)
        hard_touched = hard_removed = hard_total = 0
        for i, sent in enumerate(hard):
            q = qs[i % len(qs)].question
            res = g.filter(q, [RetrievedPassage(Passage("h", f"{q} {sent}"), 1.0, 0)])
            hard_total += len(g.score_texts([f"{q} {sent}"])[0].sentences)
            hard_touched += bool(res.decisions)
            hard_removed += sum(d.unit == "sentence" for d in res.decisions)
        print(
            f"| {scope} | {touched / (10 * len(some)):.4f} | {removed / max(total, 1):.4f} "
            f"({removed} of {total}) | {hard_touched / len(hard):.3f} | "
            f"{hard_removed / max(hard_total, 1):.3f} ({hard_removed} of {hard_total}) |",
            flush=True,
        )
    enc.save()


@contextlib.contextmanager
def _span_lead(lead: int) -> Iterator[None]:
    """The guard's ``restating_span`` with ``lead`` words of sentence lead taken along, so
    one run compares the shipped lead with others (``0``: the first round's stretch)."""
    from ragshield.defenses.injection import context, detector

    with mock.patch.object(detector, "restating_span", partial(context.restating_span, lead=lead)):
        yield


def section_reworded(args: argparse.Namespace) -> None:
    """The restated scope against an attacker who has read it: the question his passage
    carries reworded (``attacks.rewrite``: words dropped or replaced, reordered, a
    statement, typos; one per plant in turn), the verbatim test against the echo bar and the restating stretch cut off."""
    import random

    import numpy as np

    from bench_injection import carriers_for, make_guard, survives
    from ragshield.attacks.injection_families import FAMILIES, canary_word, family_rows, fill, plant
    from ragshield.attacks.rewrite import REWRITES
    from ragshield.defenses.injection.context import restating_span
    from ragshield.eval.injection_detection import detection_rate
    from ragshield.text import contains_answer
    from ragshield.types import Passage, RetrievedPassage
    from train_injection_head import DEV_HARD_NEGATIVES, DEV_HARD_NEGATIVES_2

    enc, idx, qs, heads, cals = _lofo_setup()
    bars = [float(b) for b in args.bars.split(",") if b]
    spans = [float(b) for b in args.spans.split(",") if b]
    leads = [int(n) for n in args.leads.split(",") if n]
    # (label, scope, restated_coverage, restated_echo, restated_span, lead)
    base: list[tuple[str, str, float | None, float | None, float | None, int]] = [
        ("sentence", "sentence", None, None, None, 0),
        ("verbatim", "restated", None, None, None, 0),
        ("coverage 85 (stop 37)", "restated", 85.0, None, None, 0),
    ]
    scopes = [
        *(row for row in base if not args.skip_base),
        *((f"coverage 85 + echo {b:.2f}", "restated", 85.0, b, None, 0) for b in bars),
        *(
            (f"coverage 85 + span {b:.2f}, lead {n}, cut", "restated", 85.0, None, b, n)
            for b in spans
            for n in leads
        ),
    ]
    kinds = sorted(REWRITES)
    placements = ("prefixed", "prefixed-reworded", "split", "split-reworded")
    rng = np.random.default_rng(0)
    print("# The restated scope vs a reworded question (dev, seed 0, English bastioncorpus rows,")
    print("# LOFO heads, fpr0.1; rewrites in turn: " + ", ".join(kinds) + ")")
    print("| family (n) | scope | " + " | ".join(placements) + " |")
    print("|---" * (len(placements) + 2) + "|")
    means: dict[tuple[str, str], list[float]] = {}
    for fam in FAMILIES:
        rows = family_rows(fam, lang="en")
        plants: dict[str, list[tuple[str, str, str]]] = {pl: [] for pl in placements}
        for i, r in enumerate(rows):
            q = qs[int(rng.integers(len(qs)))]
            pool = carriers_for(q, idx.by_article)
            carrier = pool[int(rng.integers(len(pool)))]
            reworded = REWRITES[kinds[i % len(kinds)]](q.question, random.Random(i))
            for pl in placements:
                base = pl.removesuffix("-reworded")
                carried = reworded if pl.endswith("-reworded") else q.question
                text, planted = plant(
                    fill(r.text, canary_word(r.id)), base, carried, carrier, random.Random(i)
                )
                plants[pl].append((q.question, text, planted))
        for label, scope, cov, bar, span, lead in scopes:
            g = make_guard(enc, heads[fam], cals[fam], "fpr0.1")  # type: ignore[arg-type]
            g.scope, g.restated_coverage, g.restated_echo = scope, cov, bar  # type: ignore[assignment]
            g.restated_span = span
            cells = []
            with _span_lead(lead):
                for pl in placements:
                    caught = [
                        not survives(
                            " ".join(
                                k.text
                                for k in g.filter(
                                    question, [RetrievedPassage(Passage("x", text), 1.0, 0)]
                                ).kept
                            ),
                            planted,
                        )
                        for question, text, planted in plants[pl]
                    ]
                    cells.append(detection_rate(caught))
                    means.setdefault((label, pl), []).append(cells[-1])
            _family_row(fam, len(rows), label, cells)
    _mean_rows(means, [label for label, *_ in scopes], placements)
    # benign cost: dev questions' genuine top-10 as retrieved (no prefix: the real case)
    head, cal, some, hits = _benign_top10(idx, enc, qs, args.questions)
    hard = [*DEV_HARD_NEGATIVES, *DEV_HARD_NEGATIVES_2]
    print(
        f"\n# Benign cost (packaged head, fpr0.1): {len(some)} dev questions' top-10 as "
        f"retrieved; dev hard negatives ({len(hard)}) each after a dev question reworded "
        "(attacks.rewrite in turn)"
    )
    print(
        "| scope | passages touched | sentences removed | passages with an answer removed "
        "whole | restating stretch found (passages) | hard negatives touched |"
    )
    print("|---|---|---|---|---|---|")
    for label, scope, cov, bar, span, lead in scopes:
        g = make_guard(enc, head, cal, "fpr0.1")
        g.scope, g.restated_coverage, g.restated_echo = scope, cov, bar  # type: ignore[assignment]
        g.restated_span = span
        touched = removed = total = gold_gone = found = 0
        for q, h in zip(some, hits, strict=True):
            with _span_lead(lead):
                res = g.filter(q.question, list(h))
            total += sum(len(sc.sentences) for sc in g.score_texts([r.text for r in h]))
            touched += len({d.index for d in res.decisions})
            removed += sum(d.unit == "sentence" for d in res.decisions)
            gold_gone += sum(
                any(contains_answer(r.text, a) for a in q.answers) for r in res.removed
            )
            if span is not None:
                found += sum(restating_span(r.text, q.question, span) is not None for r in h)
        hard_touched = 0
        for i, sent in enumerate(hard):
            q = qs[i % len(qs)].question
            carried = REWRITES[kinds[i % len(kinds)]](q, random.Random(i))
            with _span_lead(lead):
                res = g.filter(q, [RetrievedPassage(Passage("h", f"{carried} {sent}"), 1.0, 0)])
            hard_touched += bool(res.decisions)
        print(
            f"| {label} | {touched / (10 * len(some)):.4f} | {removed / max(total, 1):.4f} "
            f"({removed} of {total}) | {gold_gone} | "
            f"{'n/a' if span is None else f'{found / (10 * len(some)):.4f}'} | "
            f"{hard_touched / len(hard):.3f} |",
            flush=True,
        )
    enc.save()


def main() -> None:
    global DATA
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--section",
        choices=("normalize", "keep-passages", "trim", "prefixed", "reworded"),
        required=True,
    )
    ap.add_argument("--split", choices=("dev", "test"), default="dev")  # trim
    ap.add_argument("--questions", type=int, default=150)  # trim
    ap.add_argument("--trims", default="all,offtopic:0.3,offtopic:0.2,none")  # trim
    ap.add_argument("--bars", default="0.7,0.75,0.8,0.85")  # reworded: echo bars tried
    ap.add_argument("--spans", default="0.5,0.6,0.7")  # reworded: restated_span bars tried
    ap.add_argument("--leads", default="0,3")  # reworded: restating_span leads tried per bar
    ap.add_argument(
        "--skip-base", action="store_true", help="reworded: only the echo and span rows"
    )
    ap.add_argument("--datasets", default="hotpotqa,squad")
    ap.add_argument("--hits-cache", default=None)
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/ragshield/bench"))
    ap.add_argument("--data", default=str(DATA), help="the shared data directory")
    args = ap.parse_args()
    DATA = Path(args.data)
    if args.section == "normalize":
        section_normalize()
    elif args.section == "trim":
        section_trim(args)
    elif args.section == "prefixed":
        section_prefixed(args)
    elif args.section == "reworded":
        section_reworded(args)
    else:
        section_keep_passages(args)


if __name__ == "__main__":
    main()
