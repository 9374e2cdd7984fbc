"""``scan`` refuses bad options and outputs before --out exists or a model loads (issue
#27, root cause 10 and the minor list).

``scan --out /proc/x`` and ``--out FILE/sub`` were tracebacks; ``--out IDX/scan`` wrote into
the index folder; ``--context-k 0`` and ``--generate 10**12`` were silently coerced; an
unknown ``--fail-on`` metric was refused only after the whole scan; 19 refusals left a
marker-only folder behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line, snapshot


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "meta.json").write_text(json.dumps({"format_version": 1, "store": "faiss", "dim": 4}))
    q = tmp_path / "q.jsonl"
    q.write_text('{"question": "Who designed the Eiffel Tower?"}\n')
    (tmp_path / "FILE").write_text("mine")
    return idx, q


CASES: dict[str, tuple[list[str], str, str]] = {
    # name: (extra argv, --out relative to tmp_path ("" = default), needle)
    "out in /proc": ([], "/proc/ragshield-x", "--out"),
    "out under a file": ([], "FILE/sub", "is a file"),
    "out is the index": ([], "idx", "index folder"),
    "out inside the index": ([], "idx/scan", "inside the index folder"),
    "out is a file": ([], "FILE", "is a file"),
    "context-k 0": (["--context-k", "0"], "out", "--context-k"),
    "k 0": (["--k", "0"], "out", "--k"),
    "context-k > k": (["--k", "3", "--context-k", "5"], "out", "--context-k"),
    "generate 10**12": (["--generate", str(10**12)], "out", "--generate"),
    "fail-on unknown metric": (["--fail-on", "nosuch>0.1"], "out", "unknown metric"),
    "fail-on asr without generator": (["--fail-on", "asr>0.1"], "out", "asr needs --generator"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_before_out_and_models(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    setup: tuple[Path, Path],
    case: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx, q = setup
    extra, out, needle = CASES[case]
    target = out if out.startswith("/") else str(tmp_path / out)
    if "--generate" not in extra:
        extra = ["--questions", str(q), *extra]

    def no_models(*_a: object, **_k: object) -> None:
        raise AssertionError("a model was loaded before the refusal")

    monkeypatch.setattr("ragshield.scan.run.open_scan_store", no_models)
    before = snapshot(tmp_path / "idx")
    fail_line(capsys, ["scan", idx, "--writer", "template", "--out", target, *extra], needle)
    assert snapshot(tmp_path / "idx") == before
    assert (tmp_path / "FILE").read_text() == "mine"
    assert not (tmp_path / "out").exists()
