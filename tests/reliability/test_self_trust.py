"""Issue #27, root cause 1: a corpus record must not be able to whitelist itself.

Every top-level record field becomes passage metadata; RAGDefender used to keep any passage
whose metadata said ``trusted: true``, so an attacker who could add a record (PoisonedRAG's
threat model) added the field and the demo's defended answer went back to "Sydney". Trust
now comes only from the operator (``ragshield index --trusted-ids FILE``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragshield.cli import run
from ragshield.demo import demo_files


def _poisoned_corpus(tmp_path: Path) -> Path:
    corpus, attack_path = demo_files()
    attack = json.loads(attack_path.read_text(encoding="utf-8"))
    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines += [
        json.dumps({"_id": f"attack-{i}", "text": t, "trusted": True})
        for i, t in enumerate(attack["adv_texts"])
    ]
    out = tmp_path / "poisoned.jsonl"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


@pytest.mark.slow
def test_self_trusted_records_are_still_filtered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = tmp_path / "idx"
    assert run(["index", str(_poisoned_corpus(tmp_path)), "--out", str(idx)]) == 0
    capsys.readouterr()
    q = "What is the capital of Australia?"
    assert run(["ask", str(idx), q, "--filter", "ragdefender", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert not any(p["id"].startswith("attack-") for p in payload["passages"])
    assert "Sydney" not in payload["answer"]


def _index_trusting(tmp_path: Path, trusted: str) -> tuple[int, Path]:
    """``ragshield index`` of the demo corpus with ``--trusted-ids`` holding ``trusted``."""
    ids = tmp_path / "trusted.txt"
    ids.write_text(trusted, encoding="utf-8")
    idx = tmp_path / "idx"
    return run(["index", str(demo_files()[0]), "--out", str(idx), "--trusted-ids", str(ids)]), idx


@pytest.mark.slow
def test_operator_trust_is_recorded_at_index_time(tmp_path: Path) -> None:
    rc, idx = _index_trusting(tmp_path, "# vouched for\ncanberra\n")
    assert rc == 0
    meta = json.loads((idx / "meta.json").read_text(encoding="utf-8"))
    assert meta["profile"]["trusted_ids"] == ["canberra"]


def test_unknown_trusted_id_is_refused_before_encoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    rc, idx = _index_trusting(tmp_path, "no-such-passage\n")
    assert rc == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "not in the corpus ('no-such-passage')" in err
    assert not idx.exists()
