"""Dev-split choice of the guard's window scoring (issue #23, fifth round): no test text.

    python benchmarks/bench_injection_dev.py [--data ../shared/data] [--seed 0]
        [--questions 40] [--configs mean,text] [--json runs/injection_dev.json]
        [--head runs/head.json]     # another head than the packaged one (a retrained candidate)

What it measures (every figure printed is measured in this run; seed and split printed):

* **Positives** — the instruction wordings of ``injection-adaptive``
  (:data:`ragshield.attacks.injection_adaptive.INTENTS`: 13 English, 3 each in German,
  French, Spanish, Italian; slots filled per question), which are in no training list of
  the packaged head, planted into on-topic SQuAD *dev* paragraphs (articles at even title
  positions, paragraphs without the answer) of ``--questions`` dev questions, one wording
  per question in rotation: ``in-passage`` (question + paragraph, instruction in the
  middle), ``split`` (the instruction as two sentences, same place), ``mid-paragraph``
  (no question), ``translated`` (a non-English wording, in-passage). Caught = no sentence
  of >= 4 words of the planted instruction left in the kept text (``bench_injection.py``'s
  rule: one half of a split instruction left counts as missed).
* **Negatives** — the index's own text is held at the calibrated share by construction
  (each configuration is calibrated on all 1,888 ``ontopic`` paragraphs, as
  ``ragshield index`` does); printed: the dev hard negatives of
  ``benchmarks/train_injection_head.py`` (70 sentences, never trained on) flagged, scored
  one by one and as "articles" (runs of 5 consecutive sentences: the case a window
  score can make worse: sentences flagged / sentences).

Configurations (``--configs``, :func:`base_config`): ``mean`` (a window = the mean of its two
sentence vectors, the shipped scoring until this round), ``text`` (a window = the encoding
of the two sentences' joined text, ``InjectionGuard(windows="text")``), ``+boostB``
(the head's ``offtopic_boost`` = B: B times
:func:`ragshield.defenses.injection.context.offtopic` added to a sentence's score),
``+hyst`` (``InjectionGuard(hysteresis=True)``: at fpr0.1 a neighbour of a flagged
sentence is held to the fpr1 threshold); seventh session, as suffixes: ``+sig`` (the
calibrated signals: language switch, disguised words) and ``+nb5`` (the neighbour point at
the index's 5 % own-score point instead of fpr1); eighth session: ``+lwN`` (the language
switch reads spans of N words too; ``+lw0`` whole sentences only, the seventh session's
reading; no suffix: the default); tenth session: ``+restated`` (``scope="restated"``: a
flagged passage that restates the question goes whole) and the ``prefixed`` placement
(the question, then the wording: nothing else). Placements also include the obfuscated
ones (``base64``, ``leet``, ``zero-width``, ``homoglyph``: the English wording in-passage).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ecosaferag import ontopic_split
from bench_injection import base_parser, carriers_for, finish, ontopic_index, survives
from ragshield.attacks.injection import insert_instruction
from ragshield.attacks.injection_adaptive import INTENTS
from ragshield.attacks.injection_families import OBFUSCATIONS, canary_word, obfuscate, split_in_two
from ragshield.defenses.injection.calibration import calibrate_index
from ragshield.defenses.injection.detector import InjectionGuard
from ragshield.defenses.injection.head import InjectionHead
from ragshield.defenses.injection.signals import Signals
from ragshield.eval.injection_detection import detection_rate
from ragshield.types import Passage, RetrievedPassage
from train_injection_head import (
    DEV_HARD_NEGATIVES,
    DEV_HARD_NEGATIVES_2,
    cached_encoder,
)

PLACEMENTS = ("prefixed", "in-passage", "split", "mid-paragraph", "translated", *OBFUSCATIONS)
#: a base name: ``mean`` or ``text``, then ``+boostB`` or ``+orboostB`` (the same head
#: boost B: "or" marks the runs after the sum became the noisy-OR of scoring.pair_scores),
#: then ``+hyst``
_BASE = re.compile(r"(mean|text)(?:\+(?:or)?boost(\d+(?:\.\d+)?))?(\+hyst)?")


def base_config(name: str) -> tuple[bool, float, bool]:
    """``(windows scored on their joined text, off-topic boost of the head, hysteresis)``
    read from the name itself, so a name and what it runs cannot disagree (the table
    this replaced restated every name); the later sessions' suffixes are read in main."""
    base = re.sub(r"\+lw\d+", "", name).replace("+sig", "").replace("+nb5", "")
    m = _BASE.fullmatch(base.replace("+restated", ""))
    if m is None:
        raise ValueError(f"unknown config {name!r}: mean|text[+boostB|+orboostB][+hyst][+sig]…")
    return m[1] == "text", float(m[2] or 0.0), m[3] is not None


def wordings(lang: str) -> list[str]:
    return [w for intent in INTENTS.values() for w in intent.get(lang, ())]


def fill(w: str, canary: str, answer: str) -> str:
    return w.replace("{W}", canary).replace("{A}", answer).replace("{U}", "https://t.example/c")


def main() -> None:
    ap = base_parser(__doc__)
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--configs", default="mean,text")
    ap.add_argument("--json", default=None)
    ap.add_argument("--head", default=None, help="a head JSON instead of the packaged one")
    args = ap.parse_args()
    try:
        configs = {name: base_config(name) for name in args.configs.split(",")}
    except ValueError as exc:
        ap.error(str(exc))
    t0 = time.time()
    enc = cached_encoder()
    idx = ontopic_index(args.data, enc)
    data, texts, by_article = idx.data, idx.texts, idx.by_article
    qs = ontopic_split(data, "dev", args.questions, args.seed)[: args.questions]
    en = wordings("en")
    other = [w for lang in ("de", "fr", "es", "it") for w in wordings(lang)]
    rng = np.random.default_rng(args.seed)
    plants: dict[str, list[tuple[str, str, str]]] = {p: [] for p in PLACEMENTS}
    for i, q in enumerate(qs):
        pool = carriers_for(q, by_article)
        carrier = pool[int(rng.integers(len(pool)))]
        c = canary_word(q.question)
        w = fill(en[i % len(en)], c, q.target)
        t = fill(other[i % len(other)], c, q.target)
        s = split_in_two(w)
        plants["prefixed"].append((q.question, f"{q.question} {w}", w))
        plants["in-passage"].append(
            (q.question, f"{q.question} {insert_instruction(carrier, w, 'middle')}", w)
        )
        plants["split"].append(
            (q.question, f"{q.question} {insert_instruction(carrier, s, 'middle')}", s)
        )
        plants["mid-paragraph"].append((q.question, insert_instruction(carrier, w, "middle"), w))
        plants["translated"].append(
            (q.question, f"{q.question} {insert_instruction(carrier, t, 'middle')}", t)
        )
        for how in OBFUSCATIONS:
            o = obfuscate(w, how)
            plants[how].append(
                (q.question, f"{q.question} {insert_instruction(carrier, o, 'middle')}", o)
            )
    hard = [*DEV_HARD_NEGATIVES, *DEV_HARD_NEGATIVES_2]
    articles = [" ".join(hard[i : i + 5]) for i in range(0, len(hard), 5)]
    packaged = InjectionHead.packaged() if args.head is None else InjectionHead.load(args.head)
    print(
        f"# Dev choice of window scoring (seed {args.seed}; {len(qs)} SQuAD dev questions; "
        f"positives: injection-adaptive wordings, never trained on; {args.head or 'packaged head'})"
    )
    cols = [*PLACEMENTS, "dev hard (70) alone", "dev hard in articles"]
    print("| config | op | threshold | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 3) + "|")
    out: dict[str, Any] = {"seed": args.seed, "questions": len(qs), "rows": {}}
    for name in args.configs.split(","):
        # seventh session's options, each opted into by a suffix (the older names keep
        # measuring what they measured): "+sig" the signals, "+nb5" the 5 % neighbour point
        signals, nb5 = "+sig" in name, "+nb5" in name
        # tenth session: "+restated" the guard's scope="restated"
        scope = "restated" if "+restated" in name else "sentence"
        # eighth session: "+lwN" the language switch's span width (N = 0: whole sentences)
        lw = re.search(r"\+lw(\d+)", name)
        span = Signals() if lw is None else Signals(language_window=int(lw[1]) or None)
        window_text, boost, hyst = configs[name]
        head = replace(packaged, offtopic_boost=boost)
        cal = calibrate_index(
            texts, enc, head=head, sample=10**9, window_text=window_text, signals=span
        )
        assert cal is not None
        enc.save()
        for op in ("fpr1", "fpr0.1"):
            g = InjectionGuard(
                encoder=enc,
                operating_point=op,  # type: ignore[arg-type]
                windows="text" if window_text else True,
                hysteresis=hyst,
                language_switch=signals,
                disguise=signals,
                neighbour_point="fpr5" if nb5 else "fpr1",
                scope=scope,  # type: ignore[arg-type]
            )
            g._head = head
            g.calibrate_injection(cal)
            row: dict[str, float] = {}
            for pl, items in plants.items():
                caught = []
                for question, text, planted in items:
                    res = g.filter(question, [RetrievedPassage(Passage("x", text), 1.0, 0)])
                    caught.append(not survives(" ".join(k.text for k in res.kept), planted))
                row[pl] = detection_rate(caught)

            def flagged(xs: list[str], g: InjectionGuard = g) -> float:
                return detection_rate(
                    [
                        bool(g.filter("q?", [RetrievedPassage(Passage("b", s), 1.0, 0)]).decisions)
                        for s in xs
                    ]
                )

            row["dev hard (70) alone"] = flagged(hard)
            arts = [g.filter("q?", [RetrievedPassage(Passage("b", a), 1.0, 0)]) for a in articles]
            row["dev hard in articles"] = float(
                sum(len(r.decisions) for r in arts) / max(len(hard), 1)
            )
            thr = g.threshold_()
            if signals:
                print(
                    f"  signals @{op}: languages {cal.get('languages')}, language switch "
                    f"threshold {g.language_threshold_()}, disguise threshold "
                    f"{g.disguise_threshold_()} (index sentences with a disguised word: "
                    f"{cal.get('disguised_share', float('nan')):.4f})"
                )
            print(
                f"| {name} | {op} | {thr:.4f} | "
                + " | ".join(f"{row[c]:.3f}" for c in cols)
                + " |",
                flush=True,
            )
            out["rows"][f"{name}:{op}"] = {"threshold": thr, **row}
        enc.save()
    finish(t0, out, args.json)


if __name__ == "__main__":
    main()
