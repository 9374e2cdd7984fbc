"""``ragshield eval retrieval``: defenses on a real index, with attacks planted into a copy.

Example::

    ragshield eval retrieval ../shared/data/ontopic/hotpotqa_distractor_dev100.json \\
        --poisoning-dir ../shared/data/poisoning/hotpotqa --split test --k 10
    ragshield eval retrieval ../shared/data/ontopic/squad_v1.1_dev_43articles.json \\
        --split test --per-topic 6 --settings clean,poisonedrag-1,mixed-4x

A thin layer over :func:`ragshield.eval.real_retrieval.run_real_eval`; the split rule is
documented in :mod:`ragshield.eval.ontopic` and printed with every table. ``--out`` must be
a new or empty folder, or one this command wrote (:mod:`ragshield.eval.outdir`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ragshield.cli_options import ContextKOpt, GeneratorOpt, RetrievedKOpt
from ragshield.errors import InputError
from ragshield.eval.cli.options import DefensesOpt, SplitOpt
from ragshield.eval.outdir import check_cache_dir, check_results_dir, claim_out_dir

DEFAULT_DEFENSES = "none;ragdefender-paper;ragdefender;ecosaferag;ragdefender,ecosaferag"


def ragdefender_params(mode: str) -> dict[str, dict[str, str]]:
    """Every RAGDefender variant runs the dataset's mode (multi-hop for HotpotQA)."""
    from ragshield.defenses.registry import available

    return {n: {"mode": mode} for n in available("filter") if n.startswith("ragdefender")}


OUTPUT_FILES = frozenset({"results.md", "results.json"})


def retrieval(
    data: Annotated[Path, typer.Argument(help="An ontopic JSON file (../shared/data/ontopic/).")],
    poisoning_dir: Annotated[
        Path | None, typer.Option(help="Shared poisoning folder whose attack texts to plant.")
    ] = None,
    split: SplitOpt = "test",
    per_topic: Annotated[int | None, typer.Option(help="At most N questions per topic.")] = None,
    settings: Annotated[
        str, typer.Option(help="Comma-separated settings or groups (adaptive, ...), or all.")
    ] = "clean,poisonedrag-1,poisonedrag,mixed-2x,mixed-4x",
    defenses: DefensesOpt = DEFAULT_DEFENSES,
    k: RetrievedKOpt = 10,
    context_k: ContextKOpt = 5,
    seed: Annotated[int, typer.Option()] = 0,
    generator: GeneratorOpt = None,  # end-to-end ASR; None: retrieval metrics only
    out: Annotated[
        Path | None, typer.Option(help="Write results.md and results.json here.")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Reuse encoded vectors.")] = None,
) -> None:
    """Index a corpus, plant attacks into a copy, retrieve for real, score each defense."""
    from ragshield.attacks.settings import expand
    from ragshield.defenses.registry import build_chains, chain_labels
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.adaptive_eval import run_settings
    from ragshield.eval.ontopic import load_ontopic

    chain_labels(defenses)  # a mistyped chain is refused before the corpus is encoded
    wanted = [s for s in expand(settings.split(",")) if s != "extraction"]
    if out is not None:
        check_results_dir(out, OUTPUT_FILES)  # before the run: refused in seconds, not after it
    check_cache_dir(cache_dir)
    if k < 1 or not 1 <= context_k <= k:  # --context-k 0 was silently no context (#27)
        raise InputError(f"--k must be >= 1 and --context-k in [1, --k]. Got {k}, {context_k}.")
    ds = load_ontopic(data, poisoning_dir=poisoning_dir, per_topic=per_topic, seed=seed)
    cases = ds.split(split)  # type: ignore[arg-type]
    if not cases:  # before the encoder loads or --cache-dir gains a file (#27 hostile pass)
        raise InputError(f"no questions to evaluate in {data} (split {split!r})")
    enc = SentenceTransformerEncoder()
    mode = "multi_hop" if ds.name == "hotpotqa" else "single_hop"
    chains = build_chains(defenses, enc, ragdefender_params(mode))
    gen = None
    if generator:
        from ragshield.generate.factory import make_generator

        gen = make_generator(generator, enc)
    res = run_settings(
        ds,
        cases,
        chains,
        wanted,
        encoder=enc,
        k=k,
        context_k=context_k,
        seed=seed,
        split=split,
        generator=gen,
        cache_dir=cache_dir,
    )
    table = res.to_markdown()
    typer.echo(table)
    if out is not None:
        out = claim_out_dir(out, "retrieval", OUTPUT_FILES)
        (out / "results.md").write_text(table + "\n", encoding="utf-8")
        (out / "results.json").write_text(json.dumps(res.to_dict(), indent=2), encoding="utf-8")
