"""Option types shared by the ``ragshield eval`` commands, so a flag reads the same in each
(the huggingface_hub CLI's habit); each command's docstring says what it spreads over Ray."""

from __future__ import annotations

from typing import Annotated

import typer

RayOpt = Annotated[
    str | None,
    typer.Option(help="Run on Ray: 'local', 'auto' (joined cluster) or ray://HOST:PORT."),
]
RayWorkersOpt = Annotated[int, typer.Option(help="Ray workers when --ray is set.")]
DefensesOpt = Annotated[
    str,
    typer.Option(
        help="Chains to compare: ';' between chains, ',' within one, 'none' alone is no "
        "defense, e.g. 'none;ragdefender,ecosaferag'."
    ),
]
# `eval poisoning` and `eval retrieval`: the project's one split rule (tune on dev, report
# on test), each dataset's cut named so the help says which questions a figure comes from
SplitOpt = Annotated[
    str,
    typer.Option(
        help="dev (tune here), test (report here) or all: even/odd questions of a poisoning "
        "set, even/odd SQuAD articles, HotpotQA non-targets/targets."
    ),
]
