"""Adapter overhead: µs each framework adapter adds per call over calling the filter directly.

    python benchmarks/bench_integrations.py [--defense ragdefender similarity-threshold]
                                            [--questions 20] [--repeats 30] [--data ...]

Setting: the NQ knowledge-corruption set (``poisoning/nq``); per question the RAGDefender
retrieved set of k=10 — the golden passage, the 4 nearest *other* golden passages by MiniLM
similarity, and the 5 PoisonedRAG passages — encoded once, before timing (precomputed
embeddings). Every call then hands the same passages and vectors to:

* ``direct``      — ``FilterChain.filter(query, retrieved)`` on prebuilt RetrievedPassages;
* ``shield``      — the framework-neutral core (:class:`Shield.run`) on texts + vectors;
* ``langchain``   — ``RagshieldCompressor.compress_documents`` (vectors in metadata);
* ``llamaindex``  — ``RagshieldNodePostprocessor.postprocess_nodes`` (node + query vectors);
* ``haystack``    — ``RagshieldDocumentFilter.run`` (document + query vectors).

LangChain passes no query vector to a compressor, so its adapter encodes the query: the
encoder's text cache answers that after the first call of a question, and the cost of a cache
miss (one MiniLM forward pass) is printed separately. The methods run interleaved per
question, ``--repeats`` times each after 3 untimed warm-up calls; a method's figure is the
median over questions of its per-question median, and the overhead is the median over
questions of (method − direct) per-question medians. No sampling: questions are the first
``--questions`` in file order. One table per ``--defense``: the adapters' work does not depend
on the defense, and the cheap ``similarity-threshold`` filter gives the least noisy estimate of
it on a shared CPU, where a 4 ms filter call jitters by more than the overhead itself.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import os
import platform
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import numpy as np

from ragshield.defenses.registry import build_chain
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.eval.datasets import load_poisoning
from ragshield.integrations import Shield
from ragshield.types import Passage, RetrievedPassage

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def build_sets(
    data: Path, n_questions: int, encoder: SentenceTransformerEncoder
) -> list[tuple[str, list[str], np.ndarray, np.ndarray]]:
    """(question, 10 texts, their vectors, query vector) per question."""
    cases = load_poisoning(data / "poisoning" / "nq")
    goldens = encoder.encode([c.golden for c in cases])
    sets = []
    for ci, case in enumerate(cases[:n_questions]):
        sims = goldens @ goldens[ci]
        sims[ci] = -np.inf
        benign = [cases[j].golden for j in np.argsort(-sims)[:4]]
        texts = [case.golden, *benign, *case.adversarial["poisonedrag"]]
        sets.append(
            (case.question, texts, encoder.encode(texts), encoder.encode([case.question])[0])
        )
    return sets


def callers(
    defense: str,
    encoder: SentenceTransformerEncoder,
    question: str,
    texts: list[str],
    vecs: np.ndarray,
    qv: np.ndarray,
) -> dict[str, Callable[[], object]]:
    """One zero-argument call per method, all on the same inputs (built outside timing)."""
    name = encoder.name
    chain = build_chain(defense, encoder)
    items = [
        RetrievedPassage(Passage(str(i), t), float(vecs[i] @ qv), i, vecs[i])
        for i, t in enumerate(texts)
    ]
    shield = Shield(chain, encoder=encoder, embeddings_model_name=name)
    vec_list = list(vecs)
    calls: dict[str, Callable[[], object]] = {
        "direct": lambda: chain.filter(question, items),
        "shield": lambda: shield.run(question, texts, vec_list, query_vector=qv),
    }
    try:
        from langchain_core.documents import Document as LCDocument

        from ragshield.integrations.langchain import RagshieldCompressor

        lc = RagshieldCompressor(
            chain, encoder=encoder, embeddings_model_name=name, embedding_key="embedding"
        )
        lc_docs = [
            LCDocument(page_content=t, id=str(i), metadata={"embedding": vecs[i].tolist()})
            for i, t in enumerate(texts)
        ]
        calls["langchain"] = lambda: lc.compress_documents(lc_docs, question)
    except ImportError:
        pass
    try:
        from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

        from ragshield.integrations.llamaindex import RagshieldNodePostprocessor

        li = RagshieldNodePostprocessor(chain, encoder=encoder, embeddings_model_name=name)
        nodes = [
            NodeWithScore(
                node=TextNode(text=t, id_=str(i), embedding=vecs[i].tolist()),
                score=float(vecs[i] @ qv),
            )
            for i, t in enumerate(texts)
        ]
        bundle = QueryBundle(question, embedding=qv.tolist())
        calls["llamaindex"] = lambda: li.postprocess_nodes(nodes, bundle)
    except ImportError:
        pass
    try:
        from haystack import Document as HSDocument

        from ragshield.integrations.haystack import RagshieldDocumentFilter

        hs = RagshieldDocumentFilter(chain, encoder, embeddings_model_name=name)
        hs_docs = [
            HSDocument(content=t, id=str(i), embedding=vecs[i].tolist(), score=float(vecs[i] @ qv))
            for i, t in enumerate(texts)
        ]
        q_list = qv.tolist()
        calls["haystack"] = lambda: hs.run(question, hs_docs, query_embedding=q_list)
    except ImportError:
        pass
    return calls


def measure(
    defense: str,
    encoder: SentenceTransformerEncoder,
    sets: list[tuple[str, list[str], np.ndarray, np.ndarray]],
    repeats: int,
) -> dict[str, list[float]]:
    """Per method, the median µs of each question's timed calls (methods interleaved)."""
    per_method: dict[str, list[float]] = {}
    for question, texts, vecs, qv in sets:
        calls = callers(defense, encoder, question, texts, vecs, qv)
        for call in calls.values():
            for _ in range(3):
                call()
        samples: dict[str, list[int]] = {m: [] for m in calls}
        for _ in range(repeats):
            for method, call in calls.items():
                t0 = time.perf_counter_ns()
                call()
                samples[method].append(time.perf_counter_ns() - t0)
        for method, ns in samples.items():
            per_method.setdefault(method, []).append(float(np.median(ns)) / 1000.0)
    return per_method


def report(per_method: dict[str, list[float]]) -> None:
    direct = np.array(per_method["direct"])
    print(f"{'method':<12} {'median µs/call':>15} {'overhead µs':>12} {'overhead p90 µs':>16}")
    for method, us in per_method.items():
        diff = np.array(us) - direct
        over = "—" if method == "direct" else f"{np.median(diff):.0f}"
        p90 = "—" if method == "direct" else f"{np.percentile(diff, 90):.0f}"
        print(f"{method:<12} {np.median(us):>15.0f} {over:>12} {p90:>16}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--defense",
        nargs="+",
        default=["ragdefender", "similarity-threshold"],
        help="registry names or chains; one table each",
    )
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    encoder = SentenceTransformerEncoder()
    encoder.warm_up()
    sets = build_sets(args.data, args.questions, encoder)
    print(
        f"# bench_integrations — {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, {args.threads} torch thread(s), Python "
        f"{platform.python_version()}"
    )
    print(
        f"# data: {args.data / 'poisoning' / 'nq'} — first {len(sets)} questions; k=10 "
        "(golden + 4 nearest other goldens + 5 PoisonedRAG), precomputed MiniLM vectors; "
        f"{args.repeats} timed calls per method and question"
    )
    print(
        "# versions: "
        + ", ".join(
            f"{d} {_version(d)}"
            for d in ("ragshield", "langchain-core", "llama-index-core", "haystack-ai")
        )
    )
    for defense in args.defense:
        print(f"\n## defense: {defense}")
        report(measure(defense, encoder, sets, args.repeats))

    encoder.clear_cache()  # the cost LangChain pays on a query it has not seen
    t0 = time.perf_counter()
    for question, *_ in sets:
        encoder.encode([question])
    miss_ms = (time.perf_counter() - t0) * 1000 / len(sets)
    print(f"\nquery encode on a cache miss (LangChain path, no query vector): {miss_ms:.1f} ms")


if __name__ == "__main__":
    main()
