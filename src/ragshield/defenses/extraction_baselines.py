"""The two extraction defenses RAGFort compares against (Zeng et al. 2024a, "The Good and the Bad").

* :class:`DistanceThresholdFilter` — *inter-class* protection: only chunks close enough to the
  query reach the generator, so a query steered into one topic cannot pull in loosely
  related chunks from neighbouring ones (RAGFort §5.1 "Re-ranking Protection").
* :class:`SummarizingGenerator` — *intra-class* protection: each retrieved chunk is replaced by
  a query-focused summary before generation, so a verbatim copy of the whole chunk is never
  in the prompt (RAGFort §5.1 "Summarization Protection"). Zeng et al. summarise with an LLM;
  here the summary is extractive (the chunk's sentences most similar to the query, in their
  original order), which needs no model call and is deterministic.

Example::

    from ragshield.defenses.extraction_baselines import (
        DistanceThresholdFilter, SummarizingGenerator)
    rag = RAGPipeline(enc, store, filters=[DistanceThresholdFilter(enc, threshold=0.5)],
                      generator=SummarizingGenerator(my_llm, encoder=enc))
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import ClassVar, Literal

import numpy as np

from ragshield.defenses.base import check_retrieved, passage_vectors
from ragshield.defenses.params import Constraint, Interval, Options, ParamsMixin, ParamTable
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_int, check_query
from ragshield.generate.base import Generator
from ragshield.text import split_sentences, words
from ragshield.types import Decision, FilterResult, Generation, RetrievedPassage

Metric = Literal["cosine", "l2"]
_METRICS = Options("cosine", "l2")
# cosine similarity of unit vectors is in [-1, 1]; their Euclidean distance in [0, 2]
_THRESHOLD_RANGE = {"cosine": Interval(Real, -1.0, 1.0), "l2": Interval(Real, 0.0, 2.0)}


class DistanceThresholdFilter(ParamsMixin):
    """Drop retrieved chunks that are too far from the query.

    With ``metric="cosine"`` a chunk is kept when its cosine similarity to the query is at
    least ``threshold``; with ``metric="l2"`` when the Euclidean distance between the unit
    vectors (``sqrt(2 - 2 cos)``, the distance Zeng et al. threshold) is at most
    ``threshold``. The query is encoded with ``encoder``; passage vectors are the retriever's.

    Every removal carries ``suspicion = 1 - cosine`` (higher = looser match = more likely an
    extraction probe reaching into another topic) plus the cosine and the distance.
    """

    name = "distance-threshold"
    _parameter_constraints: ClassVar[ParamTable] = {
        "threshold": [Interval(Real, -1.0, 2.0)],  # narrowed by metric in _constraints
        "metric": [_METRICS],
    }

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        # Zeng et al. 2024a sweep the threshold and fix no value; 0.5 cosine is a mid-range
        # start — tune it on a dev split (benchmarks/bench_extraction.py does).
        threshold: float = 0.5,
        metric: Metric = "cosine",
    ) -> None:
        self.encoder = encoder
        self.threshold = threshold
        self.metric = metric

    def _constraints(self) -> Mapping[str, Sequence[Constraint]]:
        """The threshold's range depends on the metric, so the metric is checked first."""
        if not _METRICS.accepts(self.metric):
            return {"metric": [_METRICS]}
        return {"metric": [_METRICS], "threshold": [_THRESHOLD_RANGE[self.metric]]}

    def _check_setup(self) -> None:
        if self.encoder is None:
            raise InputError(
                "DistanceThresholdFilter needs an encoder to embed the query: pass encoder=..."
            )

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        self._validate_params()
        check_query(query)
        items = check_retrieved(retrieved, "DistanceThresholdFilter", self.encoder)
        if not items:
            return FilterResult(self.name, (), (), details={"threshold": self.threshold})
        assert self.encoder is not None
        qv = self.encoder.encode([query])[0]
        pv = passage_vectors(items, self.encoder, "DistanceThresholdFilter")
        cos = np.clip(pv @ qv, -1.0, 1.0)
        dist = np.sqrt(np.maximum(0.0, 2.0 - 2.0 * cos))
        keep = cos >= self.threshold if self.metric == "cosine" else dist <= self.threshold
        decisions = tuple(
            Decision(
                index=int(i),
                passage_id=items[i].id,
                reason=(
                    f"query {self.metric} {'similarity' if self.metric == 'cosine' else 'distance'}"
                    f" {cos[i] if self.metric == 'cosine' else dist[i]:.3f} is beyond the "
                    f"threshold {self.threshold}"
                ),
                scores={
                    "suspicion": float(1.0 - cos[i]),
                    "cosine": float(cos[i]),
                    "l2": float(dist[i]),
                },
            )
            for i in np.flatnonzero(~keep)
        )
        return FilterResult(
            name=self.name,
            kept=tuple(r for r, k in zip(items, keep, strict=True) if k),
            removed=tuple(r for r, k in zip(items, keep, strict=True) if not k),
            decisions=decisions,
            details={
                "threshold": self.threshold,
                "metric": self.metric,
                "cosine": [float(c) for c in cos],
            },
        )


class SummarizingGenerator:
    """A :class:`~ragshield.generate.base.Generator` that summarises each context first.

    Each context is cut into sentences and only the ``max_sentences`` most similar to the
    question survive, in their original order (cosine of sentence embeddings with an
    encoder; shared content words without one). The inner generator then answers from the
    summaries. ``Generation.details["summaries"]`` records what it saw.

    Parameters
    ----------
    inner: the generator that writes the answer (an LLM, the cascade, the extractive one).
    encoder: sentence scorer; ``None`` = word overlap.
    max_sentences: sentences kept per context.
    """

    def __init__(
        self,
        inner: Generator,
        encoder: Encoder | None = None,
        *,
        # Zeng et al. 2024a summarise "relevant to the query" without a length; two sentences
        # keep roughly a third of a HealthCareMagic/ChatDoctor record.
        max_sentences: int = 2,
    ) -> None:
        self.inner = inner
        self.encoder = encoder
        self.max_sentences = max_sentences
        self.name = f"summarize+{inner.name}"

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def summarize(self, question: str, context: str) -> str:
        """The ``max_sentences`` sentences of ``context`` closest to ``question``."""
        check_int(self.max_sentences, "max_sentences", "SummarizingGenerator", low=1)
        sentences = split_sentences(context)
        if len(sentences) <= self.max_sentences:
            return " ".join(sentences)
        if self.encoder is not None:
            vecs = self.encoder.encode([question, *sentences])
            scores = vecs[1:] @ vecs[0]
        else:
            q = set(words(question))
            scores = np.array([len(q & set(words(s))) for s in sentences], dtype=float)
        # stable: ties keep the earlier sentence
        top = np.sort(np.argsort(-scores, kind="stable")[: self.max_sentences])
        return " ".join(sentences[i] for i in top)

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        t0 = time.perf_counter()
        if isinstance(contexts, str):
            raise InputError("generate expects a list of contexts, got a bare string.")
        summaries = [self.summarize(question, c) for c in contexts]
        t_sum = time.perf_counter() - t0
        gen = self.inner.generate(question, summaries)
        timings = {**gen.timings, "summarize": t_sum}
        return Generation(
            text=gen.text,
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
            timings=timings,
            details={**gen.details, "summaries": summaries},
        )
