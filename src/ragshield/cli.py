"""``ragshield`` command line: thin calls into the library.

User mistakes (:class:`~ragshield.errors.RagshieldError`) print one line and exit with
code 2; ``RAGSHIELD_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ragshield.cli_options import AskGeneratorOpt, DtypeOpt, EncoderActorsOpt, JsonOpt
from ragshield.errors import InputError, RagshieldError
from ragshield.eval.cli import app as eval_app

try:  # typer >= 0.20 vendors click; older releases use the click package
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc  # type: ignore[no-redef]

app = typer.Typer(
    name="ragshield",
    help="Defend a RAG pipeline against poisoning, prompt injection and extraction — offline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(eval_app, name="eval")  # poisoning, retrieval, extraction: ragshield.eval.cli

out = Console()
err = Console(stderr=True)

# Options shared across commands, so flags read the same everywhere.
FilterOpt = Annotated[
    str,
    typer.Option("--filter", "-f", help="Comma-separated defenses, e.g. ragdefender,ecosaferag."),
]
EncoderOpt = Annotated[
    str | None,
    typer.Option(
        "--encoder", help="Local sentence-transformers folder (default: packaged MiniLM)."
    ),
]


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("ragshield")
    except PackageNotFoundError:  # running from a source tree that was never installed
        from ragshield import __version__ as v
    typer.echo(f"ragshield {v}")
    raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Defend a RAG pipeline against poisoning, prompt injection and extraction — offline."""


def _progress() -> bool:
    return not (os.environ.get("RAGSHIELD_NO_PROGRESS") or os.environ.get("CI"))


@app.command()
def index(
    corpus: Annotated[Path, typer.Argument(help="Corpus file (.jsonl/.json/.txt) or folder.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Index directory to write.")],
    text_field: Annotated[
        str | None,
        typer.Option(help="Comma-separated record fields holding the text (e.g. input,output)."),
    ] = None,
    index_type: Annotated[str, typer.Option(help="flat (exact), hnsw or ivf.")] = "flat",
    encoder: EncoderOpt = None,
    store: Annotated[
        str | None,
        typer.Option(help="postgresql://… to store vectors in pgvector instead of FAISS files."),
    ] = None,
    table: Annotated[str, typer.Option(help="pgvector table name.")] = "ragshield_passages",
    ray: Annotated[
        str | None,
        typer.Option(help="Encode with Ray: 'local', 'auto' (joined cluster) or ray://HOST:PORT."),
    ] = None,
    ray_workers: EncoderActorsOpt = 2,
    max_chars: Annotated[
        int, typer.Option(help="Split longer passages into ID#c0, ID#c1 … chunks.")
    ] = 20_000,
    trusted_ids: Annotated[
        Path | None,
        typer.Option(
            "--trusted-ids",
            help="File of passage ids you vouch for, one per line: RAGDefender never removes "
            "them. A record's own fields never make it trusted.",
        ),
    ] = None,
    canaries: Annotated[
        bool,
        typer.Option(
            "--canaries/--no-canaries",
            help="Embed a keyed canary in every chunk's stored text (not in its vector), so "
            "the 'canary' defense also catches a one-chunk copy by its marker. Off by "
            "default: the markers cost answer accuracy (-2.8 points on ChatDoctor) and the "
            "'canary' output checks stop RAG-Thief and the worm without them "
            "(docs/results-extraction.md). Key: RAGSHIELD_CANARY_SECRET, else a random one.",
        ),
    ] = False,
) -> None:
    """Encode a corpus and save an index directory (FAISS, or a pointer to a pgvector table)."""
    from ragshield.corpus import read_corpus
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.errors import check_int
    from ragshield.indexing import build_index, canary_secret, read_trusted_ids, resolve_trusted
    from ragshield.limits import InputLimits
    from ragshield.store.persist import check_out_dir

    if index_type not in ("flat", "hnsw", "ivf"):
        raise InputError(f"--index-type must be flat, hnsw or ivf; got {index_type!r}")
    # a chunk longer than a defense accepts would be refused at every question (limits.py)
    check_int(max_chars, "--max-chars", "index", low=1, high=InputLimits().max_passage_chars)
    check_out_dir(out_dir, probe=True)
    fields = [f.strip() for f in text_field.split(",")] if text_field else None
    trusted = read_trusted_ids(trusted_ids) if trusted_ids is not None else []
    passages = read_corpus(corpus, text_fields=fields)
    resolve_trusted(passages, trusted)  # an unknown id fails before the encoder loads
    enc = SentenceTransformerEncoder(encoder)
    err.print(f"encoding {len(passages)} passages with {enc.name} …")
    if store is not None and not store.startswith(("postgresql://", "postgres://")):
        raise InputError(f"--store must be a postgresql:// URI; got {store!r}")
    built = build_index(
        passages,
        out_dir,
        encoder=enc,
        index_type=index_type,  # type: ignore[arg-type]
        store_uri=store,
        table=table,
        show_progress=_progress(),
        ray_address=ray,
        ray_workers=ray_workers,
        max_chars=max_chars,
        trusted_ids=trusted,
        canary_secret=canary_secret() if canaries else None,
    )
    where = f"pgvector table {table}" if store else "FAISS"
    out.print(
        f"indexed {len(built)} passages ({built.dim}-d, {index_type}, {where}) into {out_dir}"
    )


def _shown(text: str) -> str:
    """A passage as a person reads it: the index's canary markers (an output-check device,
    :mod:`ragshield.defenses.canary`) are not part of the text."""
    from ragshield.defenses.canary import strip_canaries

    return strip_canaries(text)


def _answer_payload(ans: Any) -> dict[str, Any]:
    return {
        "question": ans.question,
        "answer": ans.text,
        "passages": [
            {"id": r.id, "score": round(r.score, 4), "text": _shown(r.text)} for r in ans.passages
        ],
        "removed": [
            {"defense": fr.name, "id": d.passage_id, "unit": d.unit, "reason": d.reason}
            for fr in ans.filter_results
            for d in fr.decisions
        ],
        "prompt_tokens": ans.prompt_tokens,
        "timings_ms": {k: round(v * 1000, 2) for k, v in ans.timings.items()},
    }


ConfigFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Pipeline file (TOML: index, encoder, generator, [retrieval], [defenses]); "
        "flags override it.",
    ),
]


@app.command()
def ask(
    index_dir: Annotated[
        str | None,
        typer.Argument(
            help="Index directory from 'ragshield index' (optional with --config).",
            show_default=False,
        ),
    ] = None,
    question: Annotated[
        str | None, typer.Argument(help="The question.", show_default=False)
    ] = None,
    config: ConfigFileOpt = None,
    k: Annotated[int | None, typer.Option("--k", "-k", help="Passages to retrieve [5].")] = None,
    filter_: Annotated[
        str | None,
        typer.Option(
            "--filter",
            "-f",
            help="Comma-separated defenses, e.g. ragdefender,ecosaferag or ragfort [none].",
        ),
    ] = None,
    generator: AskGeneratorOpt = None,
    context_k: Annotated[
        int | None, typer.Option(help="Survivors (nearest first) passed to the generator.")
    ] = None,
    encoder: EncoderOpt = None,
    dtype: DtypeOpt = "float32",  # float32 keeps a --config file's generator_options
    as_json: JsonOpt = False,
) -> None:
    """Answer a question from an index, through the chosen defenses."""
    from ragshield.config import build_pipeline, load_pipeline_config
    from ragshield.errors import check_int, check_query

    if question is None:  # one positional: the question, the index comes from --config
        index_dir, question = None, index_dir
    if question is None:
        raise InputError("ask needs a question: ragshield ask [INDEX_DIR] QUESTION.")
    check_query(question)
    if context_k is not None:
        check_int(context_k, "--context-k", "ask", low=1)
    cfg = load_pipeline_config(
        config,
        index=index_dir,
        k=k,
        context_k=context_k,
        defenses=filter_,
        generator=generator,
        encoder=encoder,
    )
    if dtype != "float32" and cfg.generator not in ("", "extractive"):
        cfg = cfg.with_overrides(generator_options={"dtype": dtype})
    ans = build_pipeline(cfg).answer(question, k=cfg.k)
    payload = _answer_payload(ans)
    if as_json:
        out.print_json(json.dumps(payload))
        return
    out.print(f"[bold]Answer:[/bold] {escape(ans.text)}")
    for r in ans.passages:
        out.print(f"  \\[{r.score:.3f}] {escape(r.id)}: {escape(_shown(r.text)[:100])}")
    for d in payload["removed"]:
        out.print(
            f"  [red]removed[/red] by {escape(d['defense'])}: {escape(d['id'])} "
            f"({escape(d['reason'])})"
        )
    out.print(f"  timings (ms): {payload['timings_ms']}", markup=False)


@app.command("filter")
def filter_cmd(
    query: Annotated[str, typer.Argument(help="The user's query.")],
    passages_file: Annotated[
        Path, typer.Argument(help="JSON list of passage texts or objects with 'text'.")
    ],
    filter_: FilterOpt = "ragdefender",
    encoder: EncoderOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Filter your own retrieved passages (no index needed)."""
    from ragshield.corpus import read_corpus
    from ragshield.defenses.registry import build_chain
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.errors import check_query
    from ragshield.types import RetrievedPassage

    check_query(query, what="query")
    if passages_file.is_dir():  # a folder (even /) was read as a corpus (#27 hostile pass)
        raise InputError(f"{passages_file} is a folder; pass a JSON or JSONL file of passages")
    passages = read_corpus(passages_file)
    if not passages:
        raise InputError(f"{passages_file} holds no passage")
    enc = SentenceTransformerEncoder(encoder)
    vecs = enc.encode([query, *[p.text for p in passages]])
    sims = vecs[1:] @ vecs[0]
    retrieved = [
        RetrievedPassage(p, float(s), i, v)
        for i, (p, s, v) in enumerate(zip(passages, sims, vecs[1:], strict=True))
    ]
    res = build_chain(filter_, enc).filter(query, retrieved)
    removed = [{"id": d.passage_id, "unit": d.unit, "reason": d.reason} for d in res.decisions]
    if as_json:
        out.print_json(json.dumps({"kept": res.kept_ids, "removed": removed}))
        return
    out.print(f"kept {len(res.kept)}/{len(retrieved)}: {res.kept_ids}")
    for d in removed:
        out.print(f"  [red]removed[/red] {escape(d['id'])}: {escape(d['reason'])}")


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", help="Where to write the demo index.")] = Path(
        "demo-index"
    ),
) -> None:
    """Index the shipped demo corpus, then answer a poisoned question with and without defense."""
    from ragshield.demo import run_demo

    run_demo(out_dir, console=out)


db_app = typer.Typer(help="A local PostgreSQL + pgvector server (pgserver).", no_args_is_help=True)
app.add_typer(db_app, name="db")
DataOpt = Annotated[Path, typer.Option("--data", help="Server data directory.")]


@db_app.command("start")
def db_start(data: DataOpt = Path("pgdata")) -> None:
    """Start (or reuse) a local server; prints its URI for --store."""
    from ragshield.store import pgserver_local

    out.print(pgserver_local.start(data, persistent=True))


@db_app.command("status")
def db_status(data: DataOpt = Path("pgdata")) -> None:
    """Print the URI of the running server, or exit 1 when none runs."""
    from ragshield.store import pgserver_local

    uri = pgserver_local.status(data)
    if uri is None:
        out.print(f"no server running for {data}")
        raise typer.Exit(1)
    out.print(uri)


@db_app.command("stop")
def db_stop(data: DataOpt = Path("pgdata")) -> None:
    """Stop the local server."""
    from ragshield.store import pgserver_local

    out.print("stopped" if pgserver_local.stop(data) else f"no server running for {data}")


def _mount_optional() -> None:
    """Sub-apps owned by their own modules; each is a thin typer layer over the library."""
    import importlib

    subs: tuple[tuple[str, str, typer.Typer], ...] = (
        ("ragshield.models.cli", "models", app),
        ("ragshield.reindex.cli", "reindex", app),
    )
    for module, name, parent in subs:
        try:
            sub = importlib.import_module(module).app
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a real bug inside the sub-app must not vanish
                raise
            continue
        parent.add_typer(sub, name=name)
    from ragshield.scan.cli import scan

    app.command("scan")(scan)
    from ragshield.ingest_cli import add, quarantine_app  # issue #24: screened ingestion

    app.command("add")(add)
    app.add_typer(quarantine_app, name="quarantine")
    try:
        server_cli = importlib.import_module("ragshield.server.cli")
    except ImportError as exc:  # the [server] extra is not installed: say so when asked
        _missing_extra(app, "serve", "server", exc)
        _missing_extra(app, "keys", "server", exc)
        return
    app.command("serve")(server_cli.serve)
    app.add_typer(server_cli.keys_app, name="keys")


def _missing_extra(parent: typer.Typer, command: str, extra: str, exc: ImportError) -> None:
    """A stand-in command that names the extra to install instead of vanishing."""

    @parent.command(
        command,
        help=f'(needs the {extra} extra: pip install "ragshield[{extra}]")',
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )
    def _stub() -> None:
        raise RagshieldError(
            f"ragshield {command} needs the {extra} extra ({exc.name or exc} is not "
            f'installed): pip install "ragshield[{extra}]"'
        )


_mount_optional()


def _plain_help(typer_app: typer.Typer) -> None:
    """Help texts are plain text, not Rich markup, in every sub-app: "[retrieval]" and
    "[defenses]" were swallowed as tags ("(TOML: index, encoder, generator, , )")."""
    typer_app.rich_markup_mode = None
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _plain_help(group.typer_instance)


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (used by ``main`` and the tests)."""
    _plain_help(app)
    try:
        # with standalone_mode=False, click returns the code of typer.Exit instead of raising
        rc = app(args=argv, standalone_mode=False)
    except (OSError, UnicodeEncodeError) as exc:
        # a path the OS refuses (name too long, vanished /proc entry) or one that is not
        # text: the user's input, said in one line (benchmarks/hostile_pass.py, issue #27)
        if os.environ.get("RAGSHIELD_DEBUG"):
            raise
        err.print(f"[red]error:[/red] {escape(_os_message(exc))}", highlight=False, soft_wrap=True)
        return 2
    except RagshieldError as exc:
        if os.environ.get("RAGSHIELD_DEBUG"):
            raise
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        return 130
    except click_exc.ClickException as exc:
        exc.show()
        return 2
    except json.JSONDecodeError as exc:
        err.print(f"[red]error:[/red] malformed JSON: {escape(str(exc))}", highlight=False)
        return 2
    except ValueError as exc:  # last: InputError and JSONDecodeError are ValueErrors too
        if "null byte" not in str(exc) or os.environ.get("RAGSHIELD_DEBUG"):
            raise
        err.print("[red]error:[/red] a path holds a NUL byte; no file name can contain one")
        return 2
    return rc if isinstance(rc, int) else 0


def _os_message(exc: OSError | UnicodeEncodeError) -> str:
    if isinstance(exc, UnicodeEncodeError):
        return f"a path or argument is not valid text ({exc.reason}); rename it or pass another"
    name = str(exc.filename or "")
    shown = name[:120] + ("..." if len(name) > 120 else "")
    return f"{exc.strerror or exc}" + (f": {shown}" if shown else "")


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
