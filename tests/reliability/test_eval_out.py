"""``eval`` report folders: only the marker makes a folder ragshield's, and an unwritable
--out is refused before the run (issue #27, root causes 3 and 10).

``ragshield eval retrieval ... --out mine`` replaced ``mine/results.md`` when the folder
held only files named like ragshield's; ``--out /proc/x`` and ``--out FILE/sub`` failed with
a traceback after the whole run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line, snapshot

from ragshield.errors import InputError
from ragshield.eval.outdir import MARKER, check_results_dir, claim_out_dir


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"passages": [], "questions": []}))
    return data


@pytest.mark.parametrize(
    "names", [["results.md"], ["results.md", "results.json"], ["results.json"]]
)
def test_user_folder_with_our_file_names_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], names: list[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    for n in names:
        (mine / n).write_text("my thesis notes")
    data = _data(tmp_path)
    before = snapshot(mine)
    line = fail_line(capsys, ["eval", "retrieval", data, "--out", mine], "did not write", MARKER)
    assert "nothing was written" in line
    assert snapshot(mine) == before


@pytest.mark.parametrize("where", ["/proc/ragshield-x", "FILE/sub", "FILE/a/b"])
def test_unwritable_out_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    (tmp_path / "FILE").write_text("x")
    out = where if where.startswith("/") else str(tmp_path / where)
    fail_line(capsys, ["eval", "retrieval", _data(tmp_path), "--out", out], "--out")
    assert (tmp_path / "FILE").read_text() == "x"


def test_marked_folder_is_ours(tmp_path: Path) -> None:
    out = tmp_path / "run"
    claim_out_dir(out, "retrieval", {"results.md"})
    (out / "results.md").write_text("old")
    assert claim_out_dir(out, "retrieval", {"results.md"}) == out


def test_check_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    check_results_dir(out)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="is a file"):
        (tmp_path / "f").write_text("x")
        check_results_dir(tmp_path / "f")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--cache-dir", "FILE"], "--cache-dir"),
        (["--cache-dir", "FILE/sub"], "--cache-dir"),
        (["--cache-dir", "/proc/ragshield-x"], "--cache-dir"),
        (["--context-k", "0"], "--context-k"),
        (["--k", "0"], "--k"),
    ],
)
def test_bad_options_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    (tmp_path / "FILE").write_text("x")
    extra = [str(tmp_path / e) if e.startswith("FILE") else e for e in extra]
    out = tmp_path / "out"
    fail_line(capsys, ["eval", "retrieval", _data(tmp_path), "--out", out, *extra], needle)
    assert not out.exists()
    assert (tmp_path / "FILE").read_text() == "x"
