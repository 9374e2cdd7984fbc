"""``models list`` says where each model's weights come from and how they are checked
(issue #27, minor list: the part-package names looked like typosquats to a user)."""

from __future__ import annotations

import json

import pytest

from ragshield.cli import run
from ragshield.models.registry import MODELS


def test_list_names_upstream_and_checksum(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["models", "list"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for m in MODELS.values():
        assert f"{m.name}: {m.upstream}" in text
        assert m.sha256[:16] in text
    assert "repackaged by a third party" in text


def test_list_json_has_provenance(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["models", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(
        r["upstream"] and len(r["sha256"]) == 64 and r["distributions"] for r in rows
    )
