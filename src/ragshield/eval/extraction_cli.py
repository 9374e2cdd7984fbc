"""``ragshield eval extraction``: RAG-Thief and the worm against each defense → CRR table.

A thin typer layer over :func:`ragshield.eval.extraction.run_extraction_eval`; errors are
:class:`~ragshield.errors.RagshieldError` so the top-level handler prints one line (exit 2).

Example::

    ragshield eval extraction --kb chatdoctor --limit 1000 --max-queries 100 --out runs/extraction
    ragshield eval extraction --generator qwen2.5-0.5b --max-new-tokens 192 --max-queries 8
    ragshield eval extraction --ray local --ray-workers 2    # defense × attack cells on Ray

With ``--ray`` the independent (defense × attack) cells run on Ray workers
(:func:`ragshield.eval.parallel.run_extraction_ray`); the driver encodes and clusters the
knowledge base once and ships it, so workers need the models but not the data folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.store.base import VectorStore

if TYPE_CHECKING:
    import numpy as np

    from ragshield.eval.extraction import ExtractionReport, KnowledgeBase

app = typer.Typer(
    help="Knowledge-base extraction evaluation: Chunk Recovery Rate, utility and cost per "
    "defense × attack.",
    no_args_is_help=False,
)

out = Console()
err = Console(stderr=True)

DEFENSES = (
    "none",
    "distance-threshold",
    "summarization",
    "ragfort-inter",
    "ragfort-intra",
    "ragfort",
)
ATTACKS = ("rag-thief", "worm")


def _names(spec: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise InputError(f"unknown {what} {bad or spec!r}; choose from {', '.join(allowed)}.")
    return names


@app.callback(invoke_without_command=True)
def extraction(
    kb: Annotated[
        str, typer.Option(help="'chatdoctor', 'wikipedia' or a JSON file in the ChatDoctor schema.")
    ] = "chatdoctor",
    data_dir: Annotated[Path, typer.Option(help="The shared evaluation data folder.")] = Path(
        "../shared/data"
    ),
    limit: Annotated[
        int | None, typer.Option(help="Seeded subset of this many chunks (0 = all).")
    ] = 1000,
    defenses: Annotated[
        str, typer.Option(help=f"Comma-separated, from: {', '.join(DEFENSES)}.")
    ] = "none,distance-threshold,summarization",
    attacks: Annotated[str, typer.Option(help="Comma-separated: rag-thief, worm.")] = (
        "rag-thief,worm"
    ),
    max_queries: Annotated[int, typer.Option(help="Query budget per attack run.")] = 100,
    max_seconds: Annotated[
        float | None, typer.Option(help="Wall-clock budget per attack run.")
    ] = None,
    questions: Annotated[int, typer.Option(help="Legitimate questions for accuracy.")] = 100,
    generator: Annotated[
        str,
        typer.Option(help="'extractive' (no LLM) or a generator spec, e.g. 'qwen2.5-0.5b'."),
    ] = "extractive",
    max_new_tokens: Annotated[
        int, typer.Option(help="LLM answer length (a leaked context needs room).")
    ] = 192,
    prompt_style: Annotated[
        str,
        typer.Option(
            help="LLM prompt: 'ragfort' (RAGFort §5 plain Context/Question/Answer) or "
            "'poisonedrag' (adds the \"say I don't know\" instruction, which alone makes small "
            "models refuse to repeat their context)."
        ),
    ] = "ragfort",
    dtype: Annotated[
        str, typer.Option(help="LLM weights: float32, bfloat16 or auto (bf16 on AMX CPUs).")
    ] = "float32",
    threshold: Annotated[
        float, typer.Option(help="Distance-threshold baseline: minimum query cosine.")
    ] = 0.5,
    summary_sentences: Annotated[
        int, typer.Option(help="Summarisation baseline: sentences kept per chunk.")
    ] = 2,
    worm_iterations: Annotated[
        int, typer.Option(help="Worm collision-search iterations per round.")
    ] = 10,
    ragfort_index: Annotated[
        Path | None,
        typer.Option(
            help="A RAGFort re-indexed store folder (for the ragfort-inter/ragfort rows)."
        ),
    ] = None,
    cascade_draft: Annotated[
        str | None, typer.Option(help="Cascade draft model (ragfort-intra/ragfort rows).")
    ] = None,
    cascade_reference: Annotated[str | None, typer.Option(help="Cascade reference model.")] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="Reuse knowledge-base vectors across runs.")
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder.")] = Path(
        "runs/extraction"
    ),
    seed: Annotated[int, typer.Option(help="Subset, question sample and attack RNG seed.")] = 0,
    ray: Annotated[
        str | None,
        typer.Option(
            help="Run the defense × attack cells on Ray: 'local', 'auto' (joined cluster) "
            "or ray://HOST:PORT."
        ),
    ] = None,
    ray_workers: Annotated[int, typer.Option(help="Ray workers when --ray is set.")] = 2,
    dry_run: Annotated[bool, typer.Option(help="Print the plan and exit.")] = False,
) -> None:
    """Run the extraction attacks against each defense and write extraction.{md,json} + plot."""
    wanted = _names(defenses, DEFENSES, "defense")
    attack_names = _names(attacks, ATTACKS, "attack")
    if ("ragfort-inter" in wanted or "ragfort" in wanted) and ragfort_index is None:
        raise InputError("the ragfort-inter/ragfort rows need --ragfort-index DIR.")
    if ("ragfort-intra" in wanted or "ragfort" in wanted) and not (
        cascade_draft and cascade_reference
    ):
        raise InputError(
            "the ragfort-intra/ragfort rows need --cascade-draft and --cascade-reference."
        )
    plan = ExtractionPlan(
        kb=kb,
        data_dir=str(data_dir),
        limit=limit or None,
        defenses=tuple(wanted),
        attacks=tuple(attack_names),
        max_queries=max_queries,
        max_seconds=max_seconds,
        questions=questions,
        generator=generator,
        max_new_tokens=max_new_tokens,
        prompt_style=prompt_style,
        dtype=dtype,
        threshold=threshold,
        summary_sentences=summary_sentences,
        worm_iterations=worm_iterations,
        ragfort_index=str(ragfort_index) if ragfort_index else None,
        cascade_draft=cascade_draft,
        cascade_reference=cascade_reference,
        seed=seed,
    )
    summary = (
        f"kb={kb} limit={limit or 'all'} defenses={','.join(wanted)} attacks={','.join(attack_names)} "
        f"max_queries={max_queries} max_seconds={max_seconds} questions={questions} "
        f"generator={generator} seed={seed} out={out_dir}"
        + (f" ray={ray} workers={ray_workers}" if ray else "")
    )
    if dry_run:
        out.print(f"dry run: {summary}", highlight=False)
        return
    out.print(summary, highlight=False)
    if ray:
        from ragshield.eval.parallel import run_extraction_ray

        report = run_extraction_ray(
            plan,
            address=ray,
            workers=ray_workers,
            cache_dir=cache_dir,
            log_dir=out_dir / "logs",
            progress=_say,
        )
    else:
        report = run_plan(plan, cache_dir=cache_dir, log_dir=out_dir / "logs", progress=_say)
    paths = report.save(out_dir)
    out.print(report.to_markdown(), highlight=False)
    out.print(f"wrote {', '.join(str(p) for p in paths.values())}", highlight=False)


def _say(msg: str) -> None:
    err.print(msg, highlight=False)


@dataclass(frozen=True)
class ExtractionPlan:
    """One extraction run by names and numbers (the CLI's options), so a Ray worker can
    rebuild exactly the defenses, generator and attacks the driver would have built."""

    kb: str = "chatdoctor"
    data_dir: str = "../shared/data"
    limit: int | None = 1000
    defenses: tuple[str, ...] = ("none", "distance-threshold", "summarization")
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
    from ragshield.eval import extraction as ex

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
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval import extraction as ex
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
        vectors = ex.encode_cached(knowledge.texts, encoder, cache_dir)
    rows = ex.standard_defenses(
        knowledge,
        encoder,
        gen,
        vectors=vectors,
        threshold=plan.threshold,
        summary_sentences=plan.summary_sentences,
    )
    wanted = plan.defenses
    configs = [r for r in rows if r.name in wanted]
    if any(n.startswith("ragfort") for n in wanted):
        reindexed = _load_reindexed(Path(plan.ragfort_index)) if plan.ragfort_index else None
        configs += ex.ragfort_defenses(
            rows[0],
            reindexed_store=reindexed[0] if reindexed else None,
            query_encoder=reindexed[1] if reindexed else None,
            cascade=build_cascade(plan.cascade_draft, plan.cascade_reference, options)
            if plan.cascade_draft and plan.cascade_reference
            else None,
        )
        configs = [c for c in configs if c.name in wanted]
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
    from ragshield.reindex import load_reindexed

    store, query_encoder = load_reindexed(path)
    return store, query_encoder


def build_cascade(
    draft: str, reference: str, llm_options: dict[str, Any], *, seed: int = 0
) -> Generator:
    """Draft and reference load with the run's LLM options; the cascade renders the same
    prompt style and answer length as the other rows."""
    from ragshield.generate.cascade import CascadeGenerator
    from ragshield.generate.factory import make_generator

    cascade: Generator = CascadeGenerator(
        make_generator(draft, **llm_options),
        make_generator(reference, **llm_options),
        max_new_tokens=llm_options.get("max_new_tokens", 192),
        prompt_style=llm_options.get("prompt_style", "poisonedrag"),
        seed=seed,
    )
    return cascade
