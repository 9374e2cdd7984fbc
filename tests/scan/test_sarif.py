"""scan/sarif: one rule per attacked setting (never for clean), one result per finding
with its level, a location every viewer accepts, and fingerprints stable across runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragshield.eval.real_retrieval import RealResults, RealRow
from ragshield.scan.gate import Gate, evaluate, parse_rules
from ragshield.scan.run import Recommendation, ScanResult
from ragshield.scan.sarif import SCHEMA_URI, to_sarif


def _scan(index: str, reaches: float) -> ScanResult:
    rows = (
        RealRow("d", "clean", 8, 0.0, "-", {"answer_kept": 1.0}, {"answer_kept": 8}),
        RealRow(
            "d",
            "poisonedrag",
            8,
            5.0,
            "template",
            {"attack_reaches": reaches},
            {"attack_reaches": round(8 * reaches)},
        ),
    )
    rec = Recommendation("d", 0.0, 1.0, 1.0, "answer_kept", ("d",), "only chain")
    return ScanResult(
        index, "faiss", 30, "q", (), RealResults("t", "s", 10, 5, 0, "enc", rows), rec, {}
    )


@pytest.mark.parametrize(
    ("reaches", "rules", "levels"),
    [
        (0.0, None, []),  # nothing reached: no finding, no result
        (0.5, None, ["warning"]),  # over the default finding threshold
        (0.5, "attack_reaches>0.1", ["error"]),  # a --fail-on rule broken
    ],
)
def test_results_follow_the_findings(tmp_path: Path, reaches, rules, levels) -> None:
    scan = _scan(str(tmp_path / "idx"), reaches)
    gate = Gate(rules=tuple(parse_rules([rules]))) if rules else Gate()
    log = to_sarif(scan, evaluate(scan, gate), "9.9")
    (run,) = log["runs"]
    assert log["$schema"] == SCHEMA_URI and log["version"] == "2.1.0"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["ragshield/poisonedrag"]
    assert [r["level"] for r in run["results"]] == levels
    for r in run["results"]:
        uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert uri.endswith("idx/meta.json") and r["ruleIndex"] == 0
        assert "poisonedrag" in r["message"]["text"]


def test_fingerprint_names_the_cell_not_the_run(tmp_path: Path) -> None:
    scans = [_scan(str(tmp_path / "idx"), r) for r in (0.5, 0.75)]
    logs = [to_sarif(s, evaluate(s), v) for s, v in zip(scans, ("1", "2"), strict=True)]
    fp = [log["runs"][0]["results"][0]["partialFingerprints"] for log in logs]
    assert fp[0] == fp[1] and len(fp[0]["ragshieldCell/v1"]) == 32
