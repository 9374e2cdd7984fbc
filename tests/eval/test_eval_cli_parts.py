"""The ``ragshield eval`` commands' own parts (:mod:`ragshield.eval.cli`): the dataset's
mode for every RAGDefender variant, a bad chain refused before any work, shared options."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragshield.cli import run
from ragshield.eval.cli.retrieval import ragdefender_params


def test_ragdefender_variants_get_the_datasets_mode() -> None:
    params = ragdefender_params("multi_hop")
    assert params["ragdefender"] == params["ragdefender-paper"] == {"mode": "multi_hop"}
    assert "ecosaferag" not in params


@pytest.mark.parametrize(
    ("spec", "message"),
    [("ragdefender+ecosaferag", "join a chain's defenses with ','"), ("none,x", "stands alone")],
)
def test_eval_retrieval_refuses_a_bad_chain_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    missing = tmp_path / "no-such-data.json"  # never read: the chain is checked first
    assert run(["eval", "retrieval", str(missing), "--defenses", spec]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["poisoning", "extraction"])
def test_eval_commands_share_the_ray_options(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from typing import get_args

    from ragshield.eval.cli.options import RayOpt

    help_text = get_args(RayOpt)[1].help
    assert run(["eval", command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert " ".join(help_text.split()[:4]) in out and "--ray-workers" in out
