"""corpus -> index -> retrieve -> filter -> generate -> answer, with per-stage timings.

Example::

    from ragshield import RAGPipeline, SentenceTransformerEncoder, FaissStore
    enc = SentenceTransformerEncoder()
    store = FaissStore.load("demo-index")
    rag = RAGPipeline(enc, store, filters=[], generator=None)   # extractive generator
    print(rag.answer("Who designed the Eiffel Tower?").text)
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ragshield.defenses.base import PassageFilter
from ragshield.defenses.compose import FilterChain
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_query
from ragshield.generate.base import Generator
from ragshield.generate.extractive import ExtractiveGenerator
from ragshield.store.base import VectorStore
from ragshield.types import Answer, RetrievedPassage


class RAGPipeline:
    """A RAG system with swappable defenses.

    Parameters
    ----------
    encoder, store: must agree on dimension (checked here, not at first query).
    filters: defenses run in order after retrieval (see :class:`FilterChain`).
    generator: defaults to the extractive generator (no LLM).
    context_k: how many surviving passages, nearest to the query first, reach the generator
        (RAGDefender §6.1: retrieve more, filter, pass the top 5). ``None`` passes all.
    """

    def __init__(
        self,
        encoder: Encoder,
        store: VectorStore,
        filters: Sequence[PassageFilter] = (),
        generator: Generator | None = None,
        *,
        context_k: int | None = None,
    ) -> None:
        if encoder.dim != store.dim:
            raise InputError(
                f"encoder dimension ({encoder.dim}) differs from the index dimension "
                f"({store.dim}): the index was built with another encoder."
            )
        self.encoder = encoder
        self.store = store
        self.chain = FilterChain(filters)
        self.generator: Generator = generator or ExtractiveGenerator(encoder)
        self.context_k = context_k

    def retrieve(self, question: str, k: int = 5) -> list[RetrievedPassage]:
        check_query(question)
        qv = self.encoder.encode([question])
        return self.store.search(qv, k)[0]

    def answer(self, question: str, k: int = 5) -> Answer:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        retrieved = self.retrieve(question, k)
        timings["retrieve"] = time.perf_counter() - t0

        t1 = time.perf_counter()
        stages = self.chain.run(question, retrieved)
        kept = list(stages[-1].kept) if stages else retrieved
        timings["filter"] = time.perf_counter() - t1
        for s in stages:
            timings[f"filter.{s.name}"] = s.seconds

        context = sorted(kept, key=lambda r: -r.score)
        if self.context_k is not None:
            context = context[: self.context_k]

        t2 = time.perf_counter()
        gen = self.generator.generate(question, [r.text for r in context])
        timings["generate"] = time.perf_counter() - t2
        for key, v in gen.timings.items():
            timings.setdefault(f"generate.{key}", v)
        timings["total"] = time.perf_counter() - t0
        return Answer(
            question=question,
            text=gen.text,
            passages=tuple(context),
            retrieved=tuple(retrieved),
            filter_results=tuple(stages),
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
            timings=timings,
            details=gen.details,
        )
