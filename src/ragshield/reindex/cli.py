"""``ragshield reindex INDEX_DIR --out NEW_DIR``: RAGFort's contrastive re-index.

A thin layer over :func:`ragshield.reindex.build.reindex`; user mistakes raise
:class:`~ragshield.errors.RagshieldError`, which the top-level CLI prints as one line.
The command is the app's callback, so mounting the app as ``reindex`` gives
``ragshield reindex INDEX_DIR ...`` with no sub-command name.

Example::

    ragshield reindex kb-index --out kb-index-ragfort --epochs 1 --seed 0
    ragshield reindex kb-index --out kb-index-ragfort --dry-run     # clusters only
    ragshield reindex kb-index --out kb-index-ragfort --ray local --ray-workers 2
    ragshield reindex kb-index --out kb-index-ragfort --ray auto    # a `ray start` cluster
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragshield.cli_options import EncoderActorsOpt, JsonOpt

# A callback with arguments and no sub-commands: interspersed args let options follow
# INDEX_DIR (click groups stop parsing options at the first positional otherwise).
app = typer.Typer(
    help="RAGFort inter-class protection: HDBSCAN topics + SupCon fine-tuning -> new index.",
    no_args_is_help=True,
    subcommand_metavar="",
    context_settings={"allow_interspersed_args": True},
)
out = Console()


@app.callback(invoke_without_command=True)
def reindex_command(
    index_dir: Annotated[Path, typer.Argument(help="A saved ragshield FAISS index folder.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the new index.")],
    symmetric: Annotated[
        bool,
        typer.Option(
            "--symmetric/--asymmetric",
            help="Embed queries with the trained encoder too (default: the base encoder, "
            "as in the paper).",
        ),
    ] = False,
    epochs: Annotated[float, typer.Option(help="Training epochs (fractions allowed).")] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed for batches, split and init.")] = 0,
    batch_size: Annotated[int, typer.Option(help="SupCon batch size.")] = 64,
    temperature: Annotated[float, typer.Option(help="SupCon temperature τ.")] = 0.1,
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 2e-5,
    min_cluster_size: Annotated[int, typer.Option(help="HDBSCAN min_cluster_size.")] = 5,
    min_samples: Annotated[int, typer.Option(help="HDBSCAN min_samples.")] = 2,
    selection: Annotated[
        str, typer.Option(help="HDBSCAN cluster_selection_method: leaf or eom.")
    ] = "leaf",
    noise: Annotated[
        str, typer.Option(help="HDBSCAN noise policy: nearest, singleton or drop.")
    ] = "nearest",
    encoder: Annotated[
        str | None, typer.Option(help="Base encoder (default: the one the index records).")
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Cap on training steps.")] = None,
    threads: Annotated[int | None, typer.Option(help="torch threads for training.")] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            help="Re-encode the chunks on Ray: 'local', 'auto' (joined cluster) or "
            "ray://HOST:PORT. Clustering and training stay in this process."
        ),
    ] = None,
    ray_workers: EncoderActorsOpt = 2,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Cluster and report; do not train or write.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Cluster the chunks, fine-tune the encoder with SupCon, write a re-index at --out."""
    from ragshield.reindex.build import plan_labels, reindex

    if dry_run:
        store, labels = plan_labels(
            index_dir,
            min_cluster_size=min_cluster_size,
            min_samples=min_samples,
            cluster_selection_method=selection,  # type: ignore[arg-type]
        )
        summary = {
            "index": str(index_dir),
            "chunks": len(store),
            "clusters": int(labels.max() + 1) if (labels >= 0).any() else 0,
            "noise_share": round(float((labels < 0).mean()), 4),
            "would_write": str(out_dir),
        }
        out.print(
            json.dumps(summary)
            if as_json
            else f"{summary['chunks']} chunks, {summary['clusters']} HDBSCAN topics, "
            f"{summary['noise_share']:.1%} noise; would write {out_dir}"
        )
        return
    result = reindex(
        index_dir,
        out_dir,
        symmetric=symmetric,
        encoder=encoder,
        min_cluster_size=min_cluster_size,
        min_samples=min_samples,
        cluster_selection_method=selection,  # type: ignore[arg-type]
        noise=noise,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        temperature=temperature,
        seed=seed,
        max_steps=max_steps,
        num_threads=threads,
        overwrite=force,
        show_progress=not as_json,
        ray_address=ray,
        ray_workers=ray_workers,
    )
    if as_json:
        out.print(json.dumps(result.spec, indent=2))
        return
    tr = result.train
    out.print(
        f"wrote {result.out_dir}: {result.n_chunks} chunks, {result.n_clusters} topics "
        f"({result.noise_share:.1%} noise), queries use "
        f"{'the trained' if result.symmetric else 'the base'} encoder"
    )
    if tr is not None:
        val = (
            f"{tr.initial_val_loss:.3f} -> {tr.best_val_loss:.3f}"
            if (tr.initial_val_loss is not None and tr.best_val_loss is not None)
            else "n/a"
        )
        out.print(
            f"trained {tr.steps} steps in {tr.seconds:.0f} s (best step {tr.best_step}, "
            f"val SupCon {val}{', stopped early' if tr.stopped_early else ''})"
        )
