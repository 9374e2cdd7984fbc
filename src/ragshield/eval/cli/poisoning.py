"""``ragshield eval poisoning``: the knowledge-corruption harness from the command line.

Example::

    ragshield eval poisoning ../shared/data/poisoning/nq --seeds 3 --limit 40
    ragshield eval poisoning ../shared/data/poisoning/nq --ray local --ray-workers 2

``--ray`` splits the questions over Ray workers
(:func:`ragshield.eval.parallel.run_poisoning_ray`); the table is the in-process one.
``--out`` must be a new or empty folder, or one this command wrote
(:mod:`ragshield.eval.outdir`): a user's ``results.md`` is never replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ragshield.cli_options import GeneratorOpt
from ragshield.errors import InputError
from ragshield.eval.cli.options import DefensesOpt, RayOpt, RayWorkersOpt, SplitOpt

if TYPE_CHECKING:
    from ragshield.eval.poisoning import PoisoningResults

#: What ``--out`` receives (a folder holding only these is taken as an earlier run's).
OUTPUT_FILES = frozenset({"results.md", "results.json", "asr.png"})


def poisoning(
    dataset: Annotated[
        Path, typer.Argument(help="Folder like ../shared/data/poisoning/nq (see its README).")
    ],
    defenses: DefensesOpt = "none;ragdefender-paper;ragdefender;similarity-threshold",
    attacks: Annotated[
        str, typer.Option(help="poisonedrag, blind, garag, mixed, injection, suffix…")
    ] = "poisonedrag,blind,garag,mixed",
    ratios: Annotated[str, typer.Option(help="Adversarial-to-base ratios.")] = "1,2,4,6",
    seeds: Annotated[int, typer.Option(help="Number of seeds (0..N-1).")] = 10,
    limit: Annotated[
        int | None, typer.Option(help="Only the first N questions of the split.")
    ] = None,
    split: SplitOpt = "test",
    generator: GeneratorOpt = None,  # end-to-end ASR/accuracy; None: filter level only
    cache_dir: Annotated[Path, typer.Option(help="Answer cache (generator runs).")] = Path(
        "runs/answer-cache"
    ),
    out: Annotated[Path, typer.Option(help="Folder for results.md, results.json, asr.png.")] = Path(
        "runs/poisoning"
    ),
    ray: RayOpt = None,  # the questions are spread over the workers
    ray_workers: RayWorkersOpt = 2,
) -> None:
    """Filter-level detection/ASR for every defense × attack × ratio, plus end-to-end
    ASR/accuracy when a generator is given."""
    from rich.console import Console

    from ragshield.defenses.registry import chain_labels
    from ragshield.eval.outdir import check_cache_dir, check_results_dir, claim_out_dir
    from ragshield.eval.report import markdown_table, write_json

    if seeds < 1:
        raise InputError(f"--seeds must be >= 1; got {seeds}")
    try:
        ratio_list = [float(r) for r in ratios.split(",") if r.strip()]
    except ValueError as exc:
        raise InputError(f"--ratios must be numbers separated by commas; got {ratios!r}") from exc
    check_results_dir(out, OUTPUT_FILES)  # before the run: refused in seconds, not after hours
    check_cache_dir(cache_dir)
    console = Console(stderr=True)
    attack_list = [a.strip() for a in attacks.split(",") if a.strip()]
    names = chain_labels(defenses)  # refused here, before any model loads
    if ray:
        from ragshield.eval.parallel import PoisoningPlan, run_poisoning_ray

        plan = PoisoningPlan(
            str(dataset),
            {n: None if n == "none" else n for n in names},
            attacks=tuple(attack_list),
            ratios=tuple(ratio_list),
            seeds=tuple(range(seeds)),
            split=split,
            limit=limit,
            generator=generator,
            cache_dir=str(cache_dir) if generator else None,
        )
        res = run_poisoning_ray(plan, address=ray, workers=ray_workers, log=console.print)
    else:
        res = _run_in_process(
            dataset,
            names,
            attack_list,
            ratio_list,
            seeds,
            limit,
            split,
            generator,
            cache_dir,
            console.print,
        )
    out = claim_out_dir(out, "poisoning", OUTPUT_FILES)
    table = markdown_table(res)
    (out / "results.md").write_text(table, encoding="utf-8")
    write_json(res, out / "results.json")
    plotted = plot_or_note(res, out / "asr.png")
    typer.echo(table)
    typer.echo(f"wrote {out / 'results.md'}, results.json" + (", asr.png" if plotted else ""))


def plot_or_note(res: PoisoningResults, path: Path) -> bool:
    """Draw the ASR plot; without matplotlib (an optional extra: the tables are the
    result, the plot only shows them) say so in one line instead of failing after the
    tables were computed."""
    from ragshield.eval.report import plot_asr

    try:
        plot_asr(res, path)
    except ImportError as exc:
        if "matplotlib" not in (exc.name or str(exc)):
            raise
        typer.echo(
            f'note: {path.name} not drawn: matplotlib is not installed (pip install "ragshield[plots]")',
            err=True,
        )
        return False
    return True


def _run_in_process(
    dataset: Path,
    names: list[str],
    attacks: list[str],
    ratios: list[float],
    seeds: int,
    limit: int | None,
    split: str,
    generator: str | None,
    cache_dir: Path,
    log: Callable[[str], None],
) -> PoisoningResults:
    from ragshield.defenses.registry import build_chains
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.poisoning import run_poisoning_eval

    enc = SentenceTransformerEncoder()
    chains = build_chains(names, enc)
    gen = None
    if generator:
        from ragshield.generate.cache import CachedGenerator
        from ragshield.generate.factory import make_generator

        gen = CachedGenerator(make_generator(generator, encoder=enc), cache_dir)
    return run_poisoning_eval(
        dataset,
        chains,
        attacks=attacks,
        ratios=ratios,
        seeds=range(seeds),
        encoder=enc,
        generator=gen,
        limit=limit,
        split=split,
        log=log,
    )
