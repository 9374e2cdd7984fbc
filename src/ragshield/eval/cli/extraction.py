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
``--out`` must be a new or empty folder, or one a run wrote (:mod:`ragshield.eval.outdir`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragshield.cli_options import DtypeOpt, GeneratorOpt
from ragshield.defenses.registry import chain_labels
from ragshield.errors import InputError
from ragshield.eval.cli.options import RayOpt, RayWorkersOpt
from ragshield.eval.extraction_plan import (
    ATTACKS,
    SPECIAL_ROWS,
    ExtractionPlan,
    check_rows,
    run_plan,
)
from ragshield.eval.outdir import check_cache_dir, check_results_dir, claim_out_dir

app = typer.Typer(
    help="Knowledge-base extraction evaluation: Chunk Recovery Rate, utility and cost per "
    "defense × attack.",
    no_args_is_help=False,
)

out = Console()
err = Console(stderr=True)


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
        str,
        typer.Option(
            help="Rows to compare: ';' between rows, ',' within a filter chain; "
            f"rows beyond filter chains: {', '.join(SPECIAL_ROWS)}."
        ),
    ] = "none;distance-threshold;summarization;output-checks",
    attacks: Annotated[str, typer.Option(help="Comma-separated: rag-thief, worm.")] = (
        "rag-thief,worm"
    ),
    max_queries: Annotated[int, typer.Option(help="Query budget per attack run.")] = 100,
    max_seconds: Annotated[
        float | None, typer.Option(help="Wall-clock budget per attack run.")
    ] = None,
    questions: Annotated[int, typer.Option(help="Legitimate questions for accuracy.")] = 100,
    generator: GeneratorOpt = "extractive",  # no LLM
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
    dtype: DtypeOpt = "float32",
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
    ray: RayOpt = None,  # the defense × attack cells run on the workers
    ray_workers: RayWorkersOpt = 2,
    dry_run: Annotated[bool, typer.Option(help="Print the plan and exit.")] = False,
) -> None:
    """Run the extraction attacks against each defense and write extraction.{md,json} + plot."""
    wanted = check_rows(chain_labels(defenses))
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
        generator=generator or "extractive",
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
        f"kb={kb} limit={limit or 'all'} defenses={';'.join(wanted)} attacks={','.join(attack_names)} "
        f"max_queries={max_queries} max_seconds={max_seconds} questions={questions} "
        f"generator={generator} seed={seed} out={out_dir}"
        + (f" ray={ray} workers={ray_workers}" if ray else "")
    )
    from ragshield.eval.extraction_report import REPORT_FILES

    check_results_dir(out_dir, REPORT_FILES)  # refused before the run (and its logs), untouched
    check_cache_dir(cache_dir)
    if dry_run:
        out.print(f"dry run: {summary}", highlight=False)
        return
    claim_out_dir(out_dir, "extraction", REPORT_FILES)
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
