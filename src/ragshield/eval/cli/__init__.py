"""``ragshield eval``: the evaluation harnesses' commands, one typer app.

``poisoning`` (synthetic retrieval sets, :mod:`ragshield.eval.poisoning`), ``retrieval``
(a real index with attacks planted into a copy, :mod:`ragshield.eval.real_retrieval`) and
``extraction`` (RAG-Thief and the worm, :mod:`ragshield.eval.extraction`) each live in a
module of their own here; :mod:`~ragshield.eval.cli.options` holds the option types they
share (``--ray``, ``--ray-workers``) so a flag reads the same in each.

Why a package and not one module: each command is a thin layer with many options (the
three together are ~480 lines); one file each keeps a command readable top to bottom and
keeps each one's history (``git log --follow``) when its harness changes.
"""

from __future__ import annotations

import typer

from ragshield.eval.cli import extraction, poisoning, retrieval

app = typer.Typer(help="Run an evaluation harness.", no_args_is_help=True)
app.command("poisoning")(poisoning.poisoning)
app.command("retrieval")(retrieval.retrieval)
app.add_typer(extraction.app, name="extraction")
