"""Clean traffic on an FAQ-style knowledge base: what the poisoning filters cost when every
passage is a question with its answer.

Usage::

    python benchmarks/bench_faq_clean.py                    # test split, 1,000 chunks, 300 questions
    python benchmarks/bench_faq_clean.py --split dev

Why: the on-topic corpora (SQuAD, HotpotQA) are encyclopedias, where a passage restating
the user's question is PoisonedRAG's retrieval trick. In an FAQ, a support base or a
patient-question archive, the gold entry *is* a restated question. Data: ChatDoctor's
GenMedGPT-5k (``../shared/data/extraction/chatdoctor5k.json``, Apache-2.0; one record = one
chunk, patient message + doctor answer, as the extraction benchmark loads it). No filter was
ever tuned on it; the Q&A calibration (``IndexProfile.question_share``, ``common_words``)
was diagnosed on the **dev** split and this script reports **test** by default.

Splits (seeded, disjoint): dev = the 1,000-record subset drawn with seed 1; test = 1,000
records drawn with seed 7 from the records not in dev. Users ask each sampled chunk's own
question two ways: verbatim (the FAQ's question) and its first sentence only. Every chunk
is indexed with the packaged MiniLM (exact search), the index is profiled as ``ragshield
index`` profiles it, each chain is calibrated from that profile, k = 10 and the 5 survivors
nearest the question are the context. Columns: benign passages removed, gold chunk in the
context, sets in which anything was removed. No attack is planted: every removal is a cost.

RAGDefender's ``derivative`` stage reads the index-side novelty of every chunk
(:mod:`ragshield.store.calibration_novelty`), computed here over the indexed chunks as
``ragshield index`` stores it (``--no-novelty``: none, an index built before the table; the
stage is off on a Q&A index either way). ``--params JSON`` overrides RAGDefender's
parameters in every chain (a dev study: ``--split dev --params '{"coverage_min_group": 4}'``);
``--reasons`` prints, per chain, why the benign chunks were removed (the stage's reason,
counted).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DEFENSES = "none;ragdefender-paper;ragdefender-authors;ragdefender;ragdefender,ecosaferag"


def first_sentence(text: str) -> str:
    """The question's first sentence (two when the first is a greeting of <= 20 chars)."""
    parts = re.split(r"(?<=[.?!])\s+", text.strip())
    return parts[0] if len(parts[0]) > 20 else " ".join(parts[:2])


def split_records(n: int, split: str, size: int) -> np.ndarray:
    dev = np.sort(np.random.default_rng(1).choice(n, size=size, replace=False))
    if split == "dev":
        return dev
    rest = np.setdiff1d(np.arange(n), dev)
    return np.sort(np.random.default_rng(7).choice(rest, size=size, replace=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=("dev", "test"), default="test")
    ap.add_argument("--chunks", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--defenses", default=DEFENSES)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--context", type=int, default=5)
    ap.add_argument("--params", default="{}", help="RAGDefender overrides, a JSON object")
    ap.add_argument(
        "--no-novelty",
        dest="novelty",
        action="store_false",
        help="no index-side novelty table (an index built before it)",
    )
    ap.add_argument("--reasons", action="store_true", help="count the benign removals' reasons")
    args = ap.parse_args()
    path = SHARED / "extraction" / "chatdoctor5k.json"
    if not path.is_file():
        sys.exit(f"skipped: {path} is absent (the shared evaluation data)")

    import json
    from collections import Counter

    try:
        overrides = json.loads(args.params)
        if not isinstance(overrides, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        print(f"error: --params must be a JSON object ({exc})", file=sys.stderr)
        sys.exit(2)

    from ragshield.defenses.calibration import profile_index
    from ragshield.defenses.ragdefender import RAGDefender
    from ragshield.defenses.registry import build_chains
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.pipeline import select_context
    from ragshield.store.calibration_novelty import passage_novelty
    from ragshield.types import Passage, RetrievedPassage

    t0 = time.perf_counter()
    records = json.loads(path.read_text(encoding="utf-8"))
    passages, questions = [], []
    for i in split_records(len(records), args.split, args.chunks):
        q, a = records[int(i)]["input"].strip(), records[int(i)]["output"].strip()
        passages.append(Passage(f"cd{int(i)}", f"{q}\n{a}"))
        questions.append(q)
    enc = SentenceTransformerEncoder()
    vectors = enc.encode([p.text for p in passages])
    profile = profile_index([p.text for p in passages], vectors, enc)
    chains = build_chains(args.defenses, enc, profile=profile)
    novelty = None if not args.novelty else passage_novelty(
        [p.id for p in passages], [p.text for p in passages], vectors
    )  # fmt: skip
    for chain in chains.values():
        for part in getattr(chain, "filters", []):
            if isinstance(part, RAGDefender):
                for key, value in overrides.items():
                    setattr(part, key, value)
                part.use_novelty(novelty)
    picks = np.random.default_rng(0).choice(len(passages), size=args.questions, replace=False)
    share = profile.get("question_share") if profile else None
    print(f"# FAQ clean traffic: ChatDoctor, {args.split} split, {len(passages)} chunks, "
          f"{args.questions} questions (seed 0), k = {args.k}, context {args.context}\n\n"
          f"index profile: question_share {share}, "
          f"{len(profile.get('common_words', ())) if profile else 0} common words, "
          f"novelty table {'off' if novelty is None else 'on'}, RAGDefender overrides "
          f"{overrides or 'none'}\n")  # fmt: skip
    for form in ("verbatim", "first sentence"):
        texts = [
            questions[i] if form == "verbatim" else first_sentence(questions[i]) for i in picks
        ]
        qv = enc.encode(texts)
        rows = {label: [0, 0, 0, 0] for label in chains}
        why: dict[str, Counter[str]] = {label: Counter() for label in chains}
        for qi, i in enumerate(picks):
            score = vectors @ qv[qi]
            top = np.argsort(-score)[: args.k]
            ret = [RetrievedPassage(passages[j], float(score[j]), r, vectors[j])
                   for r, j in enumerate(top)]  # fmt: skip
            gold = passages[i].id
            benign = [r.id for r in ret if r.id != gold]
            for label, chain in chains.items():
                results = [] if chain is None else chain.run(texts[qi], ret)
                kept = ret if chain is None else list(results[-1].kept)
                for res in results:
                    why[label].update(d.reason.split("(")[0].strip()
                                      for d in res.decisions if d.passage_id != gold)  # fmt: skip
                ids = {r.id for r in kept}
                row = rows[label]
                row[0] += sum(b not in ids for b in benign)
                row[1] += len(benign)
                row[2] += any(r.id == gold for r in select_context(kept, args.context))
                row[3] += len(kept) < len(ret)
        print(f"## questions: {form}\n\n| chain | benign removed | gold in context | "
              "sets with a removal |\n|---|---|---|---|")  # fmt: skip
        for label, (removed, total, gold_in, touched) in rows.items():
            n = len(picks)
            print(f"| {label} | {removed / total:.3f} | {gold_in / n:.3f} | {touched / n:.3f} |")
        print()
        if args.reasons:
            for label, counts in why.items():
                if counts:
                    print(f"{label}: " + "; ".join(f"{n} x {r}" for r, n in counts.most_common(8)))
            print()
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
