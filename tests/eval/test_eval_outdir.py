"""Report folders (:mod:`ragshield.eval.outdir`): which ones a harness may write into."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragshield.errors import InputError
from ragshield.eval.outdir import MARKER, check_results_dir, claim_out_dir

OWN = {"results.md", "results.json"}


@pytest.mark.parametrize(
    ("entries", "ok"),
    [
        ([], True),  # empty
        (["results.md"], False),  # only the marker counts (issue #27, root cause 3)
        ([MARKER, "anything.txt"], True),  # marked by ragshield
        (["results.md", "thesis.tex"], False),
        ([MARKER, "results.md/"], True),  # own name, even as a folder (extraction's logs/)
        ([".hidden"], False),
    ],
)
def test_which_folders_are_ours(tmp_path: Path, entries: list[str], ok: bool) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for e in entries:
        (out / e.rstrip("/")).mkdir() if e.endswith("/") else (out / e).write_text("x")
    before = sorted(p.name for p in out.iterdir())
    if ok:
        assert claim_out_dir(out, "test", OWN) == out
        assert (out / MARKER).is_file()
    else:
        with pytest.raises(InputError, match="did not write"):
            claim_out_dir(out, "test", OWN)
        assert sorted(p.name for p in out.iterdir()) == before


def test_new_folder_is_created_only_on_claim(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert check_results_dir(out, OWN) == out and not out.exists()
    claim_out_dir(out, "test", OWN)
    assert [p.name for p in out.iterdir()] == [MARKER]
    assert "ragshield eval test" in (out / MARKER).read_text()


def test_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "results.md"
    f.write_text("mine")
    with pytest.raises(InputError, match="is a file"):
        claim_out_dir(f, "test", OWN)
    assert f.read_text() == "mine"


def test_many_foreign_entries_are_shortened(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    with pytest.raises(InputError, match=r"\(f0, f1, f2, \.\.\.\)"):
        check_results_dir(tmp_path, OWN)
