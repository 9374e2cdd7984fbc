"""``ragshield eval retrieval``'s own parts and the scan's extraction setting
(:mod:`ragshield.eval.cli.retrieval`, :mod:`ragshield.scan.extraction`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ragshield.cli import run
from ragshield.corpus import read_corpus
from ragshield.defenses.registry import build_chains
from ragshield.demo import demo_files
from ragshield.eval.cli.retrieval import ragdefender_params
from ragshield.indexing import build_index
from ragshield.scan.extraction import extraction_attacks, run_scan_extraction
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Generation


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


class CopyGenerator:
    """Test stand-in for an LLM that repeats its context (what extraction attacks want)."""

    name = "copy"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation("\n".join(c.replace("\n", " ") for c in contexts))

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        self.batches.append(len(requests))
        return [self.generate(q, c) for q, c in requests]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def demo_store(encoder, tmp_path_factory: pytest.TempPathFactory) -> FaissStore:  # type: ignore[no-untyped-def]
    return build_index(
        read_corpus(demo_files()[0]), tmp_path_factory.mktemp("idx") / "demo", encoder=encoder
    )


def test_scan_extraction_a_copying_generator_leaks(encoder, demo_store: FaissStore) -> None:  # type: ignore[no-untyped-def]
    chains = build_chains(
        "none;distance-threshold", encoder, {"distance-threshold": {"threshold": 0.99}}
    )
    seen: list[tuple[str, str]] = []
    cells, notes = run_scan_extraction(
        demo_store,
        encoder,
        chains,
        generator=CopyGenerator(),
        max_queries=3,
        k=3,
        context_k=2,
        on_query=lambda c, a: seen.append((c, a)),
    )
    assert extraction_attacks(None)[0] == ["worm"] and any("rag-thief" in n for n in notes)
    by_chain = {c.chain: c for c in cells}
    assert set(by_chain) == {"none", "distance-threshold"}
    none, strict = by_chain["none"], by_chain["distance-threshold"]
    assert (
        none.attack == "worm"
        and 1 <= none.queries <= 3
        and len(seen) == sum(c.queries for c in cells)
    )
    assert none.crr > 0 and none.recovered >= 1 and none.chunks_reached >= 1  # it copies
    assert none.n_chunks == 30
    # a 0.99 cosine floor drops every passage the worm's queries reach: nothing leaks
    assert strict.crr == 0.0 and strict.chunks_reached == 0


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
