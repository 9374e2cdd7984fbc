"""An extraction evaluation by names and numbers (:class:`ExtractionPlan`) and the runner
that builds and runs it — in-process for ``ragshield eval extraction``, or one (defense ×
attack) cell at a time on a Ray worker (:mod:`ragshield.eval.parallel`). A library module, so
the command line and the Ray path both import it and not each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.store.base import VectorStore

if TYPE_CHECKING:
    import numpy as np

    from ragshield.eval.extraction import ExtractionReport
    from ragshield.eval.extraction_data import KnowledgeBase

#: Rows that are not a chain of post-retrieval filters: no defense, the summarisation
#: baseline (it wraps the generator), RAGFort's ablation rows (re-index / cascade) and the
#: canary guard — ``output-checks`` on the unmarked index (the recommended extraction chain:
#: ``ragshield index``'s default, no marker in any prompt) and ``canary-head`` on an index
#: built with ``--canaries``. Any other row is a filter chain in the registry's grammar
#: (``distance-threshold,ragdefender``).
SPECIAL_ROWS = (
    "none",
    "summarization",
    "ragfort-inter",
    "ragfort-intra",
    "ragfort",
    "output-checks",
    "canary-head",
)
#: which canary rows carry markers, and where (``None``: no marker at all)
CANARY_ROWS: dict[str, str | None] = {"output-checks": None, "canary-head": "head"}
ATTACKS = ("rag-thief", "worm")


def check_rows(labels: Sequence[str]) -> list[str]:
    """``labels`` (from :func:`ragshield.defenses.registry.chain_labels`) if each is a
    special row or a chain of registered post-retrieval filters; else one clear error."""
    from ragshield.defenses import registry

    for label in labels:
        if label in SPECIAL_ROWS:
            continue
        p = registry.plan(label)  # unknown names raise here, with the available ones
        if p.index is not None or p.wrappers:
            raise InputError(
                f"defense {label!r}: an extraction row is one of {', '.join(SPECIAL_ROWS)} or "
                f"a chain of post-retrieval filters ({', '.join(registry.available('filter'))})."
            )
    return list(labels)


@dataclass(frozen=True)
class ExtractionPlan:
    """One extraction run by names and numbers (the CLI's options), so a Ray worker can
    rebuild exactly the defenses, generator and attacks the driver would have built."""

    kb: str = "chatdoctor"
    data_dir: str = "../shared/data"
    limit: int | None = 1000
    defenses: tuple[str, ...] = ("none", "distance-threshold", "summarization", "output-checks")
    attacks: tuple[str, ...] = ATTACKS
    max_queries: int = 100
    max_seconds: float | None = None
    questions: int = 100
    generator: str = "extractive"
    max_new_tokens: int = 192
    prompt_style: str = "ragfort"
    dtype: str = "float32"
    threshold: float = 0.5
    summary_sentences: int = 2
    worm_iterations: int = 10
    ragfort_index: str | None = None
    cascade_draft: str | None = None
    cascade_reference: str | None = None
    seed: int = 0


def load_plan_knowledge(plan: ExtractionPlan) -> KnowledgeBase:
    """The knowledge base (or its seeded subset) the plan names."""
    from ragshield.eval import extraction_data as ex

    return ex.load_knowledge_base(plan.kb, data_dir=plan.data_dir, limit=plan.limit, seed=plan.seed)


def run_plan(
    plan: ExtractionPlan,
    *,
    knowledge: KnowledgeBase | None = None,
    vectors: np.ndarray | None = None,
    topic_labels: np.ndarray | None = None,
    cache_dir: Path | None = None,
    log_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExtractionReport:
    """Build what ``plan`` names and run it: the whole table in-process, or one cell of
    it on a Ray worker (which receives the driver's knowledge base, vectors and topics)."""
    from ragshield.defenses.registry import build_chains
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval import extraction as ex
    from ragshield.eval import extraction_defenses as exd
    from ragshield.eval.extraction_data import encode_cached
    from ragshield.generate.factory import make_generator

    encoder = SentenceTransformerEncoder()
    if knowledge is None:
        knowledge = load_plan_knowledge(plan)
    options: dict[str, Any] = (
        {}
        if plan.generator == "extractive"
        else {
            "max_new_tokens": plan.max_new_tokens,
            "stop_at_newline": False,
            "prompt_style": plan.prompt_style,
            "dtype": plan.dtype,
        }
    )
    gen = make_generator(plan.generator, encoder, **options)
    if vectors is None:
        vectors = encode_cached(knowledge.texts, encoder, cache_dir)
    rows = exd.standard_defenses(
        knowledge,
        encoder,
        gen,
        vectors=vectors,
        threshold=plan.threshold,
        summary_sentences=plan.summary_sentences,
    )
    wanted = plan.defenses
    built = {r.name: r for r in rows if r.name in SPECIAL_ROWS}
    chains = (
        build_chains(
            [w for w in wanted if w not in SPECIAL_ROWS],
            encoder,
            {"distance-threshold": {"threshold": plan.threshold}},
        )
        if any(w not in SPECIAL_ROWS for w in wanted)
        else {}
    )
    for label, chain in chains.items():
        filters = tuple(chain.filters) if chain is not None else ()
        built[label] = exd.DefenseConfig(label, rows[0].store, encoder, filters, rows[0].generator)
    if any(n.startswith("ragfort") for n in wanted):
        reindexed = _load_reindexed(Path(plan.ragfort_index)) if plan.ragfort_index else None
        configs = exd.ragfort_defenses(
            rows[0],
            reindexed_store=reindexed[0] if reindexed else None,
            query_encoder=reindexed[1] if reindexed else None,
            cascade=build_cascade(plan.cascade_draft, plan.cascade_reference, options)
            if plan.cascade_draft and plan.cascade_reference
            else None,
        )
        built.update((c.name, c) for c in configs)
    for name, placement in CANARY_ROWS.items():
        if name in wanted:
            built[name] = exd.canary_defense(
                knowledge, rows[0], vectors, name=name, placement=placement
            )
    configs = [built[w] for w in wanted if w in built]  # the table in the order asked
    factories = ex.attack_factories(
        plan.attacks,
        encoder=encoder,
        max_queries=plan.max_queries,
        max_seconds=plan.max_seconds,
        seed=plan.seed,
        worm_iterations=plan.worm_iterations,
    )
    return ex.run_extraction_eval(
        knowledge,
        configs,
        factories,
        encoder,
        max_queries=plan.max_queries,
        max_seconds=plan.max_seconds,
        n_questions=plan.questions,
        kb_vectors=vectors,
        topic_labels=topic_labels,
        log_dir=log_dir,
        seed=plan.seed,
        progress=progress,
    )


def _load_reindexed(path: Path) -> tuple[VectorStore, Encoder]:
    """The registry's ``ragfort-inter`` entry: the store and the query encoder the
    re-index recorded (as ``ragshield ask`` and the service open it)."""
    from ragshield.defenses import registry

    return registry.open_transformed_index("ragfort-inter", path, encoder=None, uri=None)


def build_cascade(
    draft: str, reference: str, llm_options: dict[str, Any], *, seed: int = 0
) -> Generator:
    """Draft and reference load with the run's LLM options; the cascade renders the same
    prompt style and answer length as the other rows (the registry's ``ragfort-intra``)."""
    from ragshield.defenses.ragfort import build_cascade as ragfort_cascade

    return ragfort_cascade(
        draft,
        reference,
        llm_options,
        max_new_tokens=llm_options.get("max_new_tokens", 192),
        seed=seed,
    )
