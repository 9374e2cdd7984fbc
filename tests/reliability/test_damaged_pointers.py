"""Damaged ``ragfort.json``, hand-edited ``meta.json`` and ``ask /`` are one line, exit 2
(issue #27, root cause 13: AttributeError / TypeError / ValueError tracebacks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line, forbid_encoding, make_store


@pytest.fixture
def index(tmp_path: Path) -> Path:
    out = tmp_path / "idx"
    make_store().save(out)
    return out


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("[1, 2]", "expected a JSON object"),
        ('"just a string"', "expected a JSON object"),
        ('{"query_encoder": 5}', "'query_encoder' must be a str"),
        ('{"query_encoder": ["a"]}', "'query_encoder' must be a str"),
        ('{"symmetric": "yes"}', "'symmetric' must be a bool"),
        ("{" * 10, "invalid JSON"),
        ("[" * 50_000, "nested too deeply"),
        (b"\xff\xfe{}", "not valid UTF-8"),
    ],
)
def test_damaged_ragfort_json(
    index: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: str | bytes,
    needle: str,
) -> None:
    forbid_encoding(monkeypatch)
    f = index / "ragfort.json"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    fail_line(capsys, ["ask", index, "Who?"], "ragfort.json", needle)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ({"dim": "384"}, "'dim' must be a positive integer"),
        ({"store": "nosuch"}, "unknown store kind"),
        ({"store": "pgvector"}, "lacks 'uri'"),
        (
            {"store": "pgvector", "uri": "postgresql://u@h:1/d", "table": "t", "hnsw_m": "x"},
            "hnsw_m",
        ),
    ],
)
def test_hand_edited_meta(
    index: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    edit: dict[str, object],
    needle: str,
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.delenv("RAGSHIELD_PG_URI", raising=False)
    forbid_encoding(monkeypatch)
    meta = json.loads((index / "meta.json").read_text())
    (index / "meta.json").write_text(json.dumps({**meta, **edit}))
    fail_line(capsys, ["ask", index, "Who?"], needle)


@pytest.mark.parametrize("where", ["/", "."])
def test_ask_on_root_or_cwd(
    where: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    forbid_encoding(monkeypatch)
    fail_line(capsys, ["ask", where, "Who?"], "not a ragshield index")
