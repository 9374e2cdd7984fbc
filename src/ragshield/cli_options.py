"""Option types more than one ``ragshield`` command group declares, written once so the flag
and its help read the same in each (the huggingface_hub CLI's habit; see
:mod:`ragshield.eval.cli.options` for the ``eval`` commands' own)."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
