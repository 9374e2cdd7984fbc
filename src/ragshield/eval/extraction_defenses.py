"""The extraction table's rows: what each defense configuration of a deployed RAG system is.

Why a module of its own: a row is built once (store, query encoder, filters, generator)
and then both the utility questions and every attack run through it; building the rows —
undefended, the re-ranking and summarisation baselines, RAGFort's ablation, the canary — is
one idea, apart from running them (:mod:`ragshield.eval.extraction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragshield.defenses.base import PassageFilter
from ragshield.defenses.extraction_baselines import SummarizingGenerator
from ragshield.defenses.registry import build_chain
from ragshield.embed.base import Encoder
from ragshield.eval.extraction_data import KnowledgeBase, build_store
from ragshield.generate.base import Generator
from ragshield.generate.extractive import ExtractiveGenerator
from ragshield.pipeline import RAGPipeline
from ragshield.store.base import VectorStore

__all__ = ["DefenseConfig", "canary_defense", "ragfort_defenses", "standard_defenses"]


@dataclass
class DefenseConfig:
    """One row group of the table: everything a deployed RAG system is made of.

    ``encoder`` is the *query* encoder (RAGFort keeps it; its re-index changes the store).
    """

    name: str
    store: VectorStore
    encoder: Encoder
    filters: Sequence[PassageFilter] = ()
    generator: Generator | None = None
    top_k: int = 5  # RAGFort §5.1: top-5 retrieval
    context_k: int | None = None

    def pipeline(self) -> RAGPipeline:
        """Assembled by :func:`ragshield.config.build_pipeline`, like every pipeline."""
        from ragshield.config import PipelineConfig, RetrievalConfig, build_pipeline

        return build_pipeline(
            PipelineConfig(retrieval=RetrievalConfig(k=self.top_k, context_k=self.context_k)),
            encoder=self.encoder,
            store=self.store,
            generator=self.generator,
            filters=self.filters,
        )


def standard_defenses(
    kb: KnowledgeBase,
    encoder: Encoder,
    generator: Generator | None = None,
    *,
    vectors: np.ndarray | None = None,
    threshold: float = 0.5,
    summary_sentences: int = 2,
) -> list[DefenseConfig]:
    """Undefended, distance-threshold re-ranking and summarisation on one shared store."""
    vecs = vectors if vectors is not None else encoder.encode(kb.texts)
    store = build_store(kb, vecs, encoder.name)
    gen = generator or ExtractiveGenerator(encoder)
    return [
        DefenseConfig("none", store, encoder, (), gen),
        DefenseConfig(
            "distance-threshold",
            store,
            encoder,
            tuple(
                build_chain(
                    "distance-threshold", encoder, {"distance-threshold": {"threshold": threshold}}
                ).filters
            ),
            gen,
        ),
        DefenseConfig(
            "summarization",
            store,
            encoder,
            (),
            SummarizingGenerator(gen, encoder, max_sentences=summary_sentences),
        ),
    ]


def ragfort_defenses(
    base: DefenseConfig,
    *,
    reindexed_store: VectorStore | None = None,
    query_encoder: Encoder | None = None,
    cascade: Generator | None = None,
) -> list[DefenseConfig]:
    """RAGFort's ablation rows from pre-built parts: inter-only (re-indexed store, e.g.
    ``ragshield.reindex.load_reindexed(dir)``, with its query encoder — the base one unless
    the re-index is symmetric), intra-only (``CascadeGenerator`` on the original store) and
    both. Rows whose part is missing are left out."""
    rows: list[DefenseConfig] = []
    qenc = query_encoder or base.encoder
    if reindexed_store is not None:
        rows.append(
            DefenseConfig("ragfort-inter", reindexed_store, qenc, base.filters, base.generator)
        )
    if cascade is not None:
        rows.append(DefenseConfig("ragfort-intra", base.store, base.encoder, base.filters, cascade))
    if reindexed_store is not None and cascade is not None:
        rows.append(DefenseConfig("ragfort", reindexed_store, qenc, base.filters, cascade))
    return rows


def canary_defense(
    kb: KnowledgeBase,
    base: DefenseConfig,
    vectors: np.ndarray,
    *,
    secret: str = "bench-extraction",
    name: str = "canary",
    placement: str | None = "sentence",  # the `canary` row of Sessions 1-3 (its answer cache)
    **guard: Any,
) -> DefenseConfig:
    """The ``canary`` row: the same chunks with their canaries embedded (same vectors: the
    index is built from the plain texts) and the output check around the base generator.
    ``secret``: a fixed one, so reruns reuse the answer cache; ``guard`` goes to
    :class:`~ragshield.defenses.canary.CanaryGuard`; ``placement``: where each marker goes
    (:data:`~ragshield.defenses.canary.PLACEMENTS`), or ``None``: no marker at all — the
    output checks alone on the undefended store (the ``output-checks`` row), whose prompts
    are then byte for byte the undefended row's."""
    from ragshield.defenses.canary import CanaryGuard, embed_canaries

    if placement is None:
        store = base.store
    else:
        marked = KnowledgeBase(
            kb.name, tuple(embed_canaries(kb.passages, secret, placement)), kb.questions
        )
        store = build_store(marked, vectors, base.encoder.name)
    gen = base.generator or ExtractiveGenerator(base.encoder)
    return DefenseConfig(
        name,
        store,
        base.encoder,
        base.filters,
        CanaryGuard(gen, **({"encoder": base.encoder} | guard)),  # encoder: for the recovery check
        base.top_k,
    )
