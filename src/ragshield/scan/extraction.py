"""The ``extraction`` setting of ``ragshield scan``: how much of the index leaks.

Example::

    from ragshield.scan.extraction import run_scan_extraction

    cells, notes = run_scan_extraction(store, encoder, chains, max_queries=10)
    print([(c.chain, c.attack, c.crr) for c in cells])

Why: poisoning is one threat to a RAG index, theft of its content another. This runs the
black-box extraction attackers of :mod:`ragshield.attacks.extraction` (RAG-Thief, the worm)
through a real :class:`~ragshield.pipeline.RAGPipeline` per defense chain, built on the
scanned in-memory copy, and scores everything the attacker saw with the Chunk Recovery
Rate against the index's own chunks (:class:`~ragshield.eval.crr.ChunkRecoveryScorer`,
RAGFort §5.1's rule), one judge encoder (the index's) for every chain.

The budget is small on purpose (``max_queries`` per attack and chain, 10 by default): a
scan estimates, it does not run the papers' 1,000 rounds. RAG-Thief runs only when an
attacker LLM is given (its reflection writes the follow-up queries); otherwise the worm
alone runs and a note says so. The sessions run side by side in threads and in step: a
round's answers, every session's queries of that round (RAG-Thief's ten at once), go to
the generator in one ``generate_many`` call
(:class:`~ragshield.generate.microbatch.RoundBatchingGenerator`), so a local model decodes
them together and the answer cache computes a (query, context) that several chains pass
alike once. Each session's own decisions are those of a run alone (a round's queries are
all written before its answers are read); ``seconds`` is its wall time among the others.
With the extractive generator (no ``--generator``) no single answer can reproduce a chunk,
and at a small budget even an LLM may recover nothing undefended: the cells then say "not
measured: …" (:func:`mark_unmeasured`) rather than a CRR of 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ragshield.attacks.extraction.base import ExtractionAttack
from ragshield.defenses.base import PassageFilter
from ragshield.embed.base import Encoder
from ragshield.generate.base import Generator
from ragshield.generate.microbatch import BatchingGenerator, RoundBatchingGenerator
from ragshield.store.faiss_store import FaissStore

#: Extraction queries per attack and chain (``--extraction-queries``); ours, see above.
DEFAULT_EXTRACTION_QUERIES = 10
SETTING = "extraction"


@dataclass(frozen=True)
class ExtractionCell:
    """One attack against one chain: CRR and what it cost.

    ``curve`` is the CRR after every query (the CRR-vs-budget curve). ``not_measured``
    says why the CRR means nothing here (the generator cannot copy a chunk, or the budget
    recovers nothing even undefended); the tables print it instead of a 0.0000 that reads
    like "this index cannot be extracted".
    """

    chain: str
    attack: str
    crr: float
    recovered: int
    n_chunks: int
    queries: int
    chunks_reached: int
    seconds: float
    stop_reason: str
    curve: tuple[float, ...] = ()
    not_measured: str = ""

    @property
    def crr_text(self) -> str:
        """The CRR cell of a table: the figure, or ``not measured: <why>``."""
        return f"not measured: {self.not_measured}" if self.not_measured else f"{self.crr:.4f}"

    @property
    def curve_text(self) -> str:
        """The curve at a quarter, half, three quarters and all of the budget."""
        if self.not_measured or not self.curve:
            return "-"
        n = len(self.curve)
        marks = sorted({max(1, round(n * f)) for f in (0.25, 0.5, 0.75, 1.0)})
        return " · ".join(f"{b}: {self.curve[b - 1]:.3f}" for b in marks)


NO_COPY = "this generator cannot copy a chunk (extractive: one context sentence per answer)"


def mark_unmeasured(
    cells: list[ExtractionCell], *, can_copy: bool, undefended: str = "none"
) -> list[ExtractionCell]:
    """Cells whose CRR is no measurement, marked with the reason (see :class:`ExtractionCell`):
    every cell when the generator cannot copy; every cell of an attack whose undefended run
    (chain ``undefended``, else the best chain) recovered nothing at this budget."""
    from dataclasses import replace

    if not can_copy:
        return [replace(c, not_measured=NO_COPY) for c in cells]
    out = []
    for c in cells:
        same = [x for x in cells if x.attack == c.attack]
        base = [x for x in same if x.chain == undefended] or same
        if max(x.recovered for x in base) == 0:
            why = (
                f"budget too small to recover anything undefended ({c.queries} queries "
                f"recovered 0 of {c.n_chunks} chunks); raise --extraction-queries"
            )
            out.append(replace(c, not_measured=why))
        else:
            out.append(c)
    return out


def extraction_attacks(attacker: Generator | None) -> tuple[list[str], list[str]]:
    """The attacks to run and the notes explaining what was left out."""
    if attacker is None:
        return ["worm"], [
            "rag-thief skipped: it needs an attacker LLM (--writer llm or --generator)"
        ]
    return ["rag-thief", "worm"], []


def run_scan_extraction(
    store: FaissStore,
    encoder: Encoder,
    chains: Mapping[str, PassageFilter | None],
    *,
    generator: Generator | None = None,
    attacker: Generator | None = None,
    max_queries: int = DEFAULT_EXTRACTION_QUERIES,
    k: int = 10,
    context_k: int = 5,
    seed: int = 0,
    on_query: Callable[[str, str], None] | None = None,
) -> tuple[list[ExtractionCell], list[str]]:
    """Every extraction attack against every chain on ``store`` (see the module docstring);
    ``generator`` answers in the pipeline (``None`` = extractive), ``attacker`` writes
    RAG-Thief's queries. ``on_query(chain, attack)`` sees every query (progress bars)."""
    from ragshield.config import PipelineConfig, RetrievalConfig, build_pipeline
    from ragshield.eval.crr import ChunkRecoveryScorer
    from ragshield.eval.extraction import attack_factory
    from ragshield.generate.extractive import ExtractiveGenerator
    from ragshield.pipeline import RAGPipeline
    from ragshield.types import Answer

    names, notes = extraction_attacks(attacker)
    gen = generator or ExtractiveGenerator(encoder)
    if generator is None:
        notes.append(
            "answers by the extractive generator (one context sentence): CRR stays near zero; "
            "pass --generator for an LLM that can copy its context"
        )
    texts = [p.text for p in store.passages]
    titled = any(p.title for p in store.passages)  # the index embedded "title. text"
    scorer = ChunkRecoveryScorer(encoder).fit(texts, None if titled else store.vectors)
    labels = [(c, name) for c in chains for name in names]
    rounds = None
    if callable(getattr(gen, "generate_many", None)):  # a round's answers: one call
        gen = rounds = RoundBatchingGenerator(gen, labels)
    if attacker is not None and callable(getattr(attacker, "generate_many", None)):
        attacker = BatchingGenerator(attacker)  # RAG-Thief's reflections, sessions apart
    sessions = []
    for chain_name, chain in chains.items():
        rag = build_pipeline(
            PipelineConfig(retrieval=RetrievalConfig(k=k, context_k=context_k)),
            encoder=encoder,
            store=store,
            generator=gen,
            filters=[chain] if chain else [],
        )
        sessions += [(chain_name, name, rag) for name in names]

    def run(chain_name: str, name: str, rag: RAGPipeline) -> ExtractionCell:
        attack = attack_factory(
            name,
            encoder=encoder,
            max_queries=max_queries,
            attacker_generator=attacker,
            seed=seed,
        )()
        reached: set[str] = set()

        def ask(q: str) -> Answer:
            if rounds is None:
                ans = rag.answer(q, k=k)
            else:
                with rounds.asking((chain_name, name)):
                    ans = rag.answer(q, k=k)
            reached.update(p.id for p in ans.passages)
            if on_query is not None:
                on_query(chain_name, name)
            return ans

        t0 = time.perf_counter()
        try:  # a round's queries side by side (RAG-Thief: 10; the worm asks one per round)
            if isinstance(attack, ExtractionAttack):
                width = getattr(attack, "queries_per_round", 1)
                outputs = list(attack.run(ask, concurrency=width))
            else:
                outputs = list(attack.run(ask))
        finally:
            if rounds is not None:
                rounds.finish((chain_name, name))
        res = scorer.score(outputs)
        return ExtractionCell(
            chain_name,
            name,
            float(res.crr),
            int(res.n_recovered),
            int(res.n_chunks),
            len(outputs),
            len(reached),
            time.perf_counter() - t0,
            str(getattr(attack, "stop_reason_", "")),
            tuple(float(x) for x in res.curve()),
        )

    # Each (chain, attack) session waits on its round's answers; run side by side, a round
    # of all of them is one generate_many call (RoundBatchingGenerator).
    with ThreadPoolExecutor(max_workers=max(1, len(sessions))) as pool:
        cells = list(pool.map(lambda s: run(*s), sessions))
    return mark_unmeasured(cells, can_copy=generator is not None), notes
