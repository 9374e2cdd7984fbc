"""``ragshield eval poisoning``: the knowledge-corruption harness from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ragshield.errors import InputError


def poisoning(
    dataset: Annotated[
        Path, typer.Argument(help="Folder like ../shared/data/poisoning/nq (see its README).")
    ],
    defenses: Annotated[
        str,
        typer.Option(
            help="Comma-separated chains to compare; '+' chains two, e.g. ragdefender+ecosaferag."
        ),
    ] = "none,ragdefender-paper,ragdefender,similarity-threshold",
    attacks: Annotated[
        str, typer.Option(help="poisonedrag, blind, garag, mixed, injection, suffix…")
    ] = "poisonedrag,blind,garag,mixed",
    ratios: Annotated[str, typer.Option(help="Adversarial-to-base ratios.")] = "1,2,4,6",
    seeds: Annotated[int, typer.Option(help="Number of seeds (0..N-1).")] = 10,
    limit: Annotated[
        int | None, typer.Option(help="Only the first N questions of the split.")
    ] = None,
    split: Annotated[
        str, typer.Option(help="all, dev (even ids: tuning) or test (odd ids).")
    ] = "test",
    generator: Annotated[
        str | None,
        typer.Option(
            "--generator",
            "-g",
            help="Packaged model name, local folder or openai:URL#MODEL for end-to-end ASR/ACC.",
        ),
    ] = None,
    cache_dir: Annotated[Path, typer.Option(help="Answer cache (generator runs).")] = Path(
        "runs/answer-cache"
    ),
    out: Annotated[Path, typer.Option(help="Folder for results.md, results.json, asr.png.")] = Path(
        "runs/poisoning"
    ),
) -> None:
    """Filter-level detection/ASR for every defense × attack × ratio, plus end-to-end
    ASR/accuracy when a generator is given."""
    from rich.console import Console

    from ragshield.defenses.registry import build_chain
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.poisoning import run_poisoning_eval
    from ragshield.eval.report import markdown_table, plot_asr, write_json

    if seeds < 1:
        raise InputError(f"--seeds must be >= 1; got {seeds}")
    try:
        ratio_list = [float(r) for r in ratios.split(",") if r.strip()]
    except ValueError as exc:
        raise InputError(f"--ratios must be numbers separated by commas; got {ratios!r}") from exc
    enc = SentenceTransformerEncoder()
    chains = {
        name: (None if name == "none" else build_chain(name.replace("+", ","), enc))
        for name in (d.strip() for d in defenses.split(",") if d.strip())
    }
    gen = None
    if generator:
        from ragshield.generate.cache import CachedGenerator
        from ragshield.generate.factory import make_generator

        gen = CachedGenerator(make_generator(generator, encoder=enc), cache_dir)
    console = Console(stderr=True)
    res = run_poisoning_eval(
        dataset,
        chains,
        attacks=[a.strip() for a in attacks.split(",") if a.strip()],
        ratios=ratio_list,
        seeds=range(seeds),
        encoder=enc,
        generator=gen,
        limit=limit,
        split=split,
        log=console.print,
    )
    out.mkdir(parents=True, exist_ok=True)
    table = markdown_table(res)
    (out / "results.md").write_text(table, encoding="utf-8")
    write_json(res, out / "results.json")
    plot_asr(res, out / "asr.png")
    typer.echo(table)
    typer.echo(f"wrote {out / 'results.md'}, results.json, asr.png")
