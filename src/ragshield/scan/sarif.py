"""SARIF 2.1.0 output of ``ragshield scan``: findings GitHub code scanning can show.

Example::

    ragshield scan my-index --generate 20 --format html,sarif --out scan-out
    # then upload scan-out/results.sarif (github/codeql-action/upload-sarif)

Why SARIF: GitHub code scanning, GitLab and Azure DevOps read it, so a scan's findings
show beside code review like any static analyser's (promptfoo and InjectBench emit it).
One *rule* per attack setting, tagged with its OWASP LLM Top-10 2025 and MITRE ATLAS ids
(:mod:`ragshield.scan.tags`); one *result* per setting × chain that fails a
``--fail-on`` rule (level ``error``) or exceeds a finding threshold of
:mod:`ragshield.scan.gate` (level ``warning``), the worst audited question as its
message. A scanned index is not source code: each result points at the index's
``meta.json`` (line 1) so viewers that require a location have one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragshield.eval.intervals import METHOD
from ragshield.scan.gate import Cell, describe_example, worst_example
from ragshield.scan.tags import ATLAS_NAMES, OWASP_NAMES, tags_for

if TYPE_CHECKING:
    from ragshield.scan.run import ScanResult

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
#: GitHub's severity scale (0-10) for a rule: ours, by the worst OWASP item it maps to.
_SEVERITY = {"LLM01:2025": 8.0, "LLM04:2025": 7.5, "LLM02:2025": 7.0}


def _rule_id(setting: str) -> str:
    return f"ragshield/{setting}"


def _artifact(index: str) -> str:
    """The index's meta.json: a relative POSIX path when it lies under the working
    directory (the repository, in CI), else an absolute ``file:`` URI."""
    path = (Path(index) / "meta.json").resolve()
    cwd = Path.cwd().resolve()
    if path.is_relative_to(cwd):
        return path.relative_to(cwd).as_posix()
    return path.as_uri()


def _rule(setting: str) -> dict[str, Any]:
    t = tags_for(setting)
    ids = [*t.owasp, *t.atlas]
    names = [f"{i} {OWASP_NAMES.get(i) or ATLAS_NAMES.get(i, '')}".strip() for i in ids]
    severity = max((_SEVERITY.get(i, 6.0) for i in t.owasp), default=5.0)
    return {
        "id": _rule_id(setting),
        "name": "".join(w.capitalize() for w in setting.replace("-", " ").split()),
        "shortDescription": {"text": f"ragshield scan setting {setting}: {t.description}"},
        "fullDescription": {"text": f"{t.description}. Tags: {'; '.join(names)}."},
        "defaultConfiguration": {"level": "warning"},
        "properties": {
            "tags": ["security", *ids], "security-severity": f"{severity:.1f}",
            "owasp-llm-2025": list(t.owasp), "mitre-atlas": list(t.atlas),
        },
    }  # fmt: skip


def _result(scan: ScanResult, cell: Cell, rule_index: int, uri: str) -> dict[str, Any]:
    ex = worst_example(scan, cell.setting, cell.chain)
    r = cell.risk
    figure = (
        f"{cell.risk_metric} {r.value:.3f} ({r.successes}/{r.n}; 95% CI {r.lo:.3f}-{r.hi:.3f})"
        if r else f"{cell.risk_metric} {cell.metrics.get(cell.risk_metric, float('nan')):.3f}"
    )  # fmt: skip
    why = "; ".join([*(f"FAIL {f}" for f in cell.failures), *cell.exceeded])
    attack = f" ({cell.attack})" if cell.attack else ""
    text = f"{cell.setting}{attack} under chain {cell.chain!r}: {figure}. {why}."
    if cell.setting != "extraction":
        text += f" Worst example: {describe_example(ex)}"
    key = f"{cell.setting}|{cell.attack}|{cell.chain}".encode()
    return {
        "ruleId": _rule_id(cell.setting),
        "ruleIndex": rule_index,
        "level": "error" if cell.failures else "warning",
        "message": {"text": text},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": uri}, "region": {"startLine": 1}}}],
        "partialFingerprints": {"ragshieldCell/v1": hashlib.sha256(key).hexdigest()[:32]},
        "properties": {
            "setting": cell.setting, "chain": cell.chain, "attack": cell.attack,
            "recommended_chain": cell.recommended,
            "intervals": {k: v.to_dict() for k, v in cell.rates.items()},
            "failures": list(cell.failures), "exceeded": list(cell.exceeded),
            "owasp-llm-2025": list(cell.tags.owasp), "mitre-atlas": list(cell.tags.atlas),
        },
    }  # fmt: skip


def to_sarif(scan: ScanResult, cells: Sequence[Cell], version: str) -> dict[str, Any]:
    """The SARIF log (a dict ready for ``json.dump``)."""
    settings = list(dict.fromkeys(c.setting for c in cells if c.setting != "clean"))
    index = {s: i for i, s in enumerate(settings)}
    uri = _artifact(scan.index)
    results = [_result(scan, c, index[c.setting], uri) for c in cells if c.finding]
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "ragshield", "version": version, "semanticVersion": version,
                "rules": [_rule(s) for s in settings],
            }},
            "automationDetails": {"id": f"ragshield-scan/{Path(scan.index).name}/"},
            "invocations": [{"executionSuccessful": True}],
            "results": results,
            "properties": {
                "index": scan.index, "n_questions": len(scan.questions),
                "recommended_chain": scan.recommendation.chain, "interval_method": METHOD,
                "split": scan.results.split, "seed": scan.results.seed,
            },
        }],
    }  # fmt: skip
