"""``ragshield add``: what the ingestion screen quarantines, and what it costs.

Run: python benchmarks/bench_ingest.py [--data ../shared/data] [--screens ragdefender,...]

Two measurements, each with a 95 % Wilson interval (nothing is tuned here; both use the
test side of the data):

* clean on-topic additions (false quarantines): the SQuAD test articles (odd-numbered,
  ``ontopic/``) indexed without every 10th paragraph, then those held-out paragraphs
  added in one batch — genuine new pages on topics the index already covers;
* planted misinformation (caught): the NQ target golden passages indexed, then the five
  PoisonedRAG passages (``question.`` + text, as its attack code injects them) of every
  target added in one batch.

Time per document includes encoding and the atomic rewrite of the index folder.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from ragshield.eval.intervals import wilson
from ragshield.types import Passage


def _run(
    index: Path, base: list[Passage], new: list[Passage], screen: str, encoder: object
) -> tuple[int, float]:
    from ragshield.indexing import build_index
    from ragshield.ingest import add_documents

    if not index.exists():  # built once, copied per screen: add_documents rewrites it
        build_index(base, index.with_suffix(".base"), encoder=encoder)  # type: ignore[arg-type]
    shutil.rmtree(index, ignore_errors=True)
    shutil.copytree(index.with_suffix(".base"), index)
    t0 = time.perf_counter()
    report = add_documents(index, new, screen=screen, source="bench", encoder=encoder)
    return len(report.quarantined), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--screens", default="ragdefender;ragdefender,ecosaferag")
    ap.add_argument("--targets", type=int, default=20, help="NQ targets whose passages are added")
    ap.add_argument("--articles", type=int, default=6, help="SQuAD test articles indexed")
    args = ap.parse_args()
    from ragshield.eval.datasets import load_poisoning
    from ragshield.eval.ontopic import load_ontopic

    data = Path(args.data)
    squad = load_ontopic(data / "ontopic" / "squad_v1.1_dev_43articles.json")
    test_topics = sorted(
        {pid.rsplit("_p", 1)[0] for q in squad.split("test") for pid in q.gold_ids}
    )
    test_topics = test_topics[: args.articles]
    paras = [p for p in squad.passages if p.id.rsplit("_p", 1)[0] in test_topics]
    held = paras[::10]
    base = [p for i, p in enumerate(paras) if i % 10]
    cases = load_poisoning(data / "poisoning" / "nq")
    gold = [Passage(f"gold-{c.id}", c.golden) for c in cases]
    adv = [Passage(f"adv-{c.id}-{i}", f"{c.question}. {t}")
           for c in cases[: args.targets] for i, t in enumerate(c.adversarial["poisonedrag"])]  # fmt: skip
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    print(f"SQuAD test articles ({len(test_topics)}, alphabetical first): {len(base)} indexed, {len(held)} clean paragraphs added; "
          f"NQ: {len(gold)} golden indexed, {len(adv)} PoisonedRAG passages added "
          f"({args.targets} targets x 5); Wilson 95% intervals\n")  # fmt: skip
    print("| screen | clean quarantined | PoisonedRAG quarantined | s/doc (clean, poison) |")
    print("|---|---|---|---|")
    for screen in args.screens.split(";"):
        fp, t_clean = _run(tmp / "squad", base, held, screen, encoder)
        tp, t_adv = _run(tmp / "nq", gold, adv, screen, encoder)
        lo, hi = wilson(fp, len(held))
        lo2, hi2 = wilson(tp, len(adv))
        print(f"| {screen} | {fp}/{len(held)} = {fp / len(held):.3f} [{lo:.3f}-{hi:.3f}] | "
              f"{tp}/{len(adv)} = {tp / len(adv):.3f} [{lo2:.3f}-{hi2:.3f}] | "
              f"{t_clean / len(held):.2f}, {t_adv / len(adv):.2f} |", flush=True)  # fmt: skip
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
