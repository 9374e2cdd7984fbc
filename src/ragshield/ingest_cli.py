"""``ragshield add`` and ``ragshield quarantine``: thin typer layers over
:mod:`ragshield.ingest`.

Example::

    ragshield add my-index new.jsonl --report add-report --format json,sarif
    ragshield quarantine list my-index
    ragshield quarantine release my-index doc-17
    ragshield quarantine delete my-index doc-18 doc-19

Exit codes: 0 = added (flagged documents quarantined); 2 = bad input, refused before any
document is encoded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from ragshield.errors import InputError

quarantine_app = typer.Typer(
    help="Documents 'ragshield add' flagged: list, release into the index, or delete.",
    no_args_is_help=True,
)
IndexArg = Annotated[Path, typer.Argument(help="Index directory (FAISS or pgvector pointer).")]
UriOpt = Annotated[
    str | None, typer.Option("--uri", help="PostgreSQL URI overriding a pgvector pointer's.")
]
ReleaseIdsArg = Annotated[list[str], typer.Argument(help="Quarantined ids to add to the index.")]
DeleteIdsArg = Annotated[list[str], typer.Argument(help="Quarantined ids to drop.")]


def add(
    index: IndexArg,
    new: Annotated[Path, typer.Argument(help="Documents to add (.jsonl/.json/.txt, folder).")],
    screen: Annotated[
        str,
        typer.Option(help="Defense chain that screens each new document ('none' = no screen)."),
    ] = "ragdefender,ecosaferag",
    k: Annotated[int, typer.Option("--k", help="Indexed neighbours per document.")] = 10,
    source: Annotated[
        str | None, typer.Option(help="Provenance 'source' recorded [the file path].")
    ] = None,
    report: Annotated[
        Path | None, typer.Option(help="Write the screening report into this folder.")
    ] = None,
    format: Annotated[
        str, typer.Option("--format", help="Report formats: json,sarif,junit.")
    ] = "json",
    uri: UriOpt = None,
) -> None:
    """Append documents to an index; screened ones go to its quarantine, never searchable."""
    from ragshield.eval.outdir import check_results_dir, claim_out_dir
    from ragshield.ingest import add_documents
    from ragshield.ingest_report import FORMATS, parse_formats, write_report

    formats = parse_formats(format)
    if report is not None and report.exists() and not report.is_dir():
        raise InputError(f"--report {report} is a file; choose a folder")
    if report is not None:  # a folder of the user's was written into (#27 hostile pass)
        try:
            check_results_dir(report, FORMATS.values())
        except InputError as exc:
            raise InputError(str(exc).replace("--out", "--report")) from None
    if not new.exists():
        raise InputError(f"documents not found: {new}")
    res = add_documents(index, new, source=source, screen=screen, k=k, uri=uri)
    out = Console()
    out.print(
        f"added {len(res.added)} passage(s) to {index}; quarantined {len(res.quarantined)}"
        f" (screen: {res.screen}, {res.timings.get('total', 0.0):.1f}s)",
        markup=False,
    )
    for q in res.quarantined:
        out.print(f"  quarantined {escape(q.id)}: {escape('; '.join(q.reasons))}")
    if report is not None:
        paths = write_report(res, claim_out_dir(report, "add", FORMATS.values()), formats)
        out.print(f"report: {', '.join(str(p) for p in paths)}", markup=False, soft_wrap=True)


@quarantine_app.command("list")
def list_(index: IndexArg) -> None:
    """The quarantined documents with the reasons they were flagged."""
    from ragshield.ingest import quarantine_list

    items = quarantine_list(index)
    out = Console()
    if not items:
        out.print(f"the quarantine of {index} is empty", markup=False)
    for q in items:
        src = q.passage.metadata.get("source", "")
        out.print(f"{q.id}\t{q.quarantined_at}\t{src}\t{'; '.join(q.reasons)}", markup=False)


@quarantine_app.command("release")
def release_(index: IndexArg, ids: ReleaseIdsArg, uri: UriOpt = None) -> None:
    """Add quarantined documents to the searchable index (your decision; not re-screened)."""
    from ragshield.ingest import release

    _say_done("released", release(index, ids, uri=uri))


@quarantine_app.command("delete")
def delete_(index: IndexArg, ids: DeleteIdsArg, uri: UriOpt = None) -> None:
    """Drop quarantined documents for good."""
    from ragshield.ingest import delete

    _say_done("deleted", delete(index, ids, uri=uri))


def _say_done(verb: str, done: list[str]) -> None:
    Console().print(f"{verb} {len(done)}: {', '.join(done)}", markup=False)
