"""``db start --data`` on a file or a user's folder is refused before pgserver runs initdb
there and hands the folder to its own system user (issue #27, root causes 7 and 10)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line, snapshot


@pytest.mark.parametrize(
    ("where", "needle"),
    [
        ("FILE", "is a file"),
        ("FILE/sub", "is a file"),
        ("mine", "not a PostgreSQL data folder"),
    ],
)
def test_foreign_data_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str, needle: str
) -> None:
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("my thesis")
    owner = (tmp_path / "mine").stat().st_uid, (tmp_path / "mine").stat().st_mode
    before = snapshot(tmp_path / "mine")
    fail_line(capsys, ["db", "start", "--data", tmp_path / where], needle)
    assert snapshot(tmp_path / "mine") == before
    assert ((tmp_path / "mine").stat().st_uid, (tmp_path / "mine").stat().st_mode) == owner
