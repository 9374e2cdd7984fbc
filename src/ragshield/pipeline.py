"""corpus -> index -> retrieve -> filter -> generate -> answer, with per-stage timings.

Example::

    from ragshield import RAGPipeline, SentenceTransformerEncoder, FaissStore
    enc = SentenceTransformerEncoder()
    store = FaissStore.load("demo-index")
    rag = RAGPipeline(enc, store, filters=[], generator=None)   # extractive generator
    print(rag.answer("Who designed the Eiffel Tower?").text)
    for ans in rag.answer_many(["Who designed it?", "When was it built?"], k=10):
        print(ans.text)

:meth:`RAGPipeline.answer_many` is the one executor: ``answer`` is a batch of one, and the
evaluation harnesses and ``ragshield scan`` run their questions through it (or, for
harnesses that build their own retrieval sets, through :func:`context_order`), so the
context rule — the ``context_k`` survivors nearest the question, ties in retrieval order —
is written once, here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ragshield.defenses.base import PassageFilter
from ragshield.defenses.compose import FilterChain
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_query
from ragshield.generate.base import Generator
from ragshield.generate.extractive import ExtractiveGenerator
from ragshield.limits import InputLimits, check_k, check_query_size, use_limits
from ragshield.store.base import VectorStore
from ragshield.types import Answer, FilterResult, Generation, RetrievedPassage

#: Questions filtered, then answered in one ``generate_many`` call (a local model decodes
#: them in left-padded batches; ours: 32 = the local generator's batch width,
#: :data:`ragshield.generate.batch.DEFAULT_BATCH_SIZE`).
ANSWER_BATCH = 32


def context_order(scores: Sequence[float], context_k: int | None) -> list[int]:
    """Positions of the ``context_k`` highest ``scores``, best first (``None`` = all).

    The context rule (RAGDefender §6.1: retrieve more, filter, pass the top 5): a stable
    sort, so equal scores keep retrieval order and the result is deterministic."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    return order if context_k is None else order[:context_k]


def select_context(
    kept: Sequence[RetrievedPassage], context_k: int | None
) -> list[RetrievedPassage]:
    """The passages a generator reads: :func:`context_order` over the survivors."""
    return [kept[i] for i in context_order([r.score for r in kept], context_k)]


def generate_all(
    generator: Generator, requests: Sequence[tuple[str, list[str]]]
) -> list[Generation]:
    """Generations for ``(question, contexts)`` requests, in order: one ``generate_many``
    call when the generator batches and there is more than one request, else ``generate``
    (so a batch of one still reaches a :class:`~ragshield.generate.microbatch.
    BatchingGenerator`'s shared queue)."""
    many = getattr(generator, "generate_many", None)
    if len(requests) > 1 and callable(many):
        out: list[Generation] = many(requests)
        return out
    return [generator.generate(q, c) for q, c in requests]


class RAGPipeline:
    """A RAG system with swappable defenses.

    Parameters
    ----------
    encoder, store: must agree on dimension (checked here, not at first query).
    filters: defenses run in order after retrieval (see :class:`FilterChain`).
    generator: defaults to the extractive generator (no LLM).
    context_k: how many surviving passages, nearest to the query first, reach the generator
        (RAGDefender §6.1: retrieve more, filter, pass the top 5). ``None`` passes all.
    limits: the largest question, ``k`` and retrieval set a call accepts (default: the
        ones in force, :mod:`ragshield.limits`); beyond them a call is refused before the
        index is searched or a filter runs.
    """

    def __init__(
        self,
        encoder: Encoder,
        store: VectorStore,
        filters: Sequence[PassageFilter] = (),
        generator: Generator | None = None,
        *,
        context_k: int | None = None,
        limits: InputLimits | None = None,
    ) -> None:
        if encoder.dim != store.dim:
            raise InputError(
                f"encoder dimension ({encoder.dim}) differs from the index dimension "
                f"({store.dim}): the index was built with another encoder."
            )
        self.encoder = encoder
        self.store = store
        self.limits = limits
        self.chain = FilterChain(filters, limits=limits)
        self.generator: Generator = generator or ExtractiveGenerator(encoder)
        self.context_k = context_k

    def retrieve(self, question: str, k: int = 5) -> list[RetrievedPassage]:
        return self.retrieve_many([question], k)[0]

    def retrieve_many(self, questions: Sequence[str], k: int = 5) -> list[list[RetrievedPassage]]:
        """Top-``k`` of every question: one encoding call, one index search."""
        with use_limits(self.limits):
            for q in questions:
                check_query_size(check_query(q))
            if isinstance(k, int) and not isinstance(k, bool):  # the store checks the type
                check_k(k, "RAGPipeline.retrieve")
        if not questions:
            return []
        return self.store.search(self.encoder.encode(list(questions)), k)

    def answer(self, question: str, k: int = 5) -> Answer:
        return self.answer_many([question], k)[0]

    def answer_many(
        self,
        questions: Sequence[str],
        k: int = 5,
        *,
        retrieved: Sequence[Sequence[RetrievedPassage]] | None = None,
        generate: bool = True,
        batch_size: int = ANSWER_BATCH,
        on_answer: Callable[[int, Answer], None] | None = None,
    ) -> list[Answer]:
        """Answers in question order: retrieve all (one search), then per ``batch_size``
        questions filter each and answer the batch in one ``generate_many`` call.

        ``retrieved`` passes retrieval sets the caller already has (one search shared by
        several chains over the same index); ``generate=False`` stops after the context
        (``text`` is empty): filter-level metrics need no generator. ``on_answer(i,
        answer)`` sees each answer as soon as its batch is done (progress and per-question
        scoring on long runs)."""
        t0 = time.perf_counter()
        hits = list(retrieved) if retrieved is not None else self.retrieve_many(questions, k)
        if len(hits) != len(questions):
            raise InputError(
                f"{len(questions)} questions but {len(hits)} retrieval sets: pass one per question"
            )
        t_retrieve = (time.perf_counter() - t0) / max(len(questions), 1)
        step = max(1, batch_size)
        out: list[Answer] = []
        for start in range(0, len(questions), step):
            batch = zip(questions[start : start + step], hits[start : start + step], strict=True)
            filtered = [self._filter(q, r) for q, r in batch]
            gens: list[Generation | None] = [None] * len(filtered)
            t_generate = 0.0
            if generate:
                t1 = time.perf_counter()
                requests = [(q, [r.text for r in ctx]) for q, _, ctx, _, _ in filtered]
                gens = list(generate_all(self.generator, requests))
                t_generate = (time.perf_counter() - t1) / max(len(filtered), 1)
            for (q, r, ctx, stages, t_filter), gen in zip(filtered, gens, strict=True):
                ans = _answer(q, r, ctx, stages, gen, t_retrieve, t_filter, t_generate)
                if on_answer is not None:
                    on_answer(len(out), ans)
                out.append(ans)
        return out

    def _filter(
        self, question: str, retrieved: Sequence[RetrievedPassage]
    ) -> tuple[str, list[RetrievedPassage], list[RetrievedPassage], list[FilterResult], float]:
        t0 = time.perf_counter()
        stages = self.chain.run(question, retrieved)
        kept = list(stages[-1].kept) if stages else list(retrieved)
        seconds = time.perf_counter() - t0
        return question, list(retrieved), select_context(kept, self.context_k), stages, seconds


def _answer(
    question: str,
    retrieved: list[RetrievedPassage],
    context: list[RetrievedPassage],
    stages: list[FilterResult],
    gen: Generation | None,
    t_retrieve: float,
    t_filter: float,
    t_generate: float,
) -> Answer:
    """One :class:`Answer`; a batch's retrieval and generation time is shared equally."""
    timings: dict[str, float] = {"retrieve": t_retrieve, "filter": t_filter}
    for s in stages:
        timings[f"filter.{s.name}"] = s.seconds
    timings["generate"] = t_generate
    for key, v in (gen.timings if gen is not None else {}).items():
        timings.setdefault(f"generate.{key}", v)
    timings["total"] = t_retrieve + t_filter + t_generate
    return Answer(
        question=question,
        text=gen.text if gen is not None else "",
        passages=tuple(context),
        retrieved=tuple(retrieved),
        filter_results=tuple(stages),
        prompt_tokens=gen.prompt_tokens if gen is not None else 0,
        completion_tokens=gen.completion_tokens if gen is not None else 0,
        timings=timings,
        details=gen.details if gen is not None else {},
    )
