"""ingest_cli: ``ragshield add`` refuses bad input before any document is read or encoded,
and the quarantine commands are the three the docs name."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragshield.errors import InputError
from ragshield.ingest_cli import add, quarantine_app


@pytest.mark.parametrize(
    ("make", "message"),
    [
        ("report-file", r"--report .* is a file; choose a folder"),
        ("missing-documents", "documents not found"),
        ("bad-format", r"unknown format\(s\) pdf"),
    ],
)
def test_add_refuses_before_work(tmp_path: Path, make: str, message: str) -> None:
    new = tmp_path / "new.jsonl"
    new.write_text('{"id": "d1", "text": "x"}\n', encoding="utf-8")
    kwargs: dict[str, object] = {}
    if make == "report-file":
        report = tmp_path / "report.txt"
        report.write_text("mine", encoding="utf-8")
        kwargs["report"] = report
    elif make == "missing-documents":
        new = tmp_path / "missing.jsonl"
    else:
        kwargs["format"] = "json,pdf"
    with pytest.raises(InputError, match=message):
        add(tmp_path / "no-index", new, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "no-index").exists()  # nothing written
    if make == "report-file":
        assert (tmp_path / "report.txt").read_text(encoding="utf-8") == "mine"


def test_quarantine_commands() -> None:
    names = [c.name for c in quarantine_app.registered_commands]
    assert names == ["list", "release", "delete"]
