"""The screening report of ``ragshield add`` in the scan's formats (JSON, SARIF, JUnit).

Example::

    ragshield add my-index new.jsonl --report add-report --format json,sarif

Why the scan's formats: the same CI step that uploads a scan's SARIF can upload what an
ingestion job quarantined. SARIF: one rule (``ragshield/ingest-screen``, tagged like the
poisoning and injection settings with OWASP LLM Top-10 2025 and MITRE ATLAS ids), one
result per quarantined document pointing at its line of the added file. JUnit: one test
case per screened document, failed when it was quarantined.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragshield.ingest import AddReport
from ragshield.scan import formats
from ragshield.scan.junit import xml_safe
from ragshield.scan.sarif import SCHEMA_URI
from ragshield.scan.tags import ATLAS_NAMES, OWASP_NAMES

RULE_ID = "ragshield/ingest-screen"
OWASP = ("LLM04:2025", "LLM01:2025", "LLM08:2025")
ATLAS = ("AML.T0070", "AML.T0051.001")
FORMATS = {"json": "screen.json", "sarif": "screen.sarif", "junit": "screen.junit.xml"}


def _lines(source: str) -> dict[str, int]:
    """id -> line of a JSONL source file (1 when the id is not found: chunks, .txt)."""
    path = Path(source)
    out: dict[str, int] = {}
    if path.suffix.lower() != ".jsonl" or not path.is_file():
        return out
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                for key in ("id", "_id"):
                    if key in rec:
                        out.setdefault(str(rec[key]), n)
    return out


def _uri(source: str) -> str:
    """Relative POSIX path under the working directory, else an absolute ``file:`` URI."""
    path, cwd = Path(source).resolve(), Path.cwd().resolve()
    return path.relative_to(cwd).as_posix() if path.is_relative_to(cwd) else path.as_uri()


def to_sarif(report: AddReport, version: str) -> dict[str, Any]:
    lines = _lines(report.source)
    uri = _uri(report.source) if Path(report.source).exists() else "ragshield-api-input"
    results = []
    for q in report.quarantined:
        origin = str(q.passage.metadata.get("chunk_of", q.id))
        results.append({
            "ruleId": RULE_ID, "ruleIndex": 0, "level": "error",
            "message": {"text": f"document {q.id!r} quarantined by {report.screen}: "
                                + "; ".join(q.reasons)},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": uri},
                                                "region": {"startLine": lines.get(origin, 1)}}}],
            "properties": {"id": q.id, "sha256": q.passage.metadata.get("sha256", ""),
                           "reasons": list(q.reasons)},
        })  # fmt: skip
    names = [f"{i} {OWASP_NAMES.get(i) or ATLAS_NAMES[i]}" for i in (*OWASP, *ATLAS)]
    rule = {
        "id": RULE_ID, "name": "IngestScreen",
        "shortDescription": {"text": "a new document was flagged by the defense chain"},
        "fullDescription": {"text": "ragshield add screened the document with the registered "
                            "poisoning and injection defenses before it became searchable. "
                            f"Tags: {'; '.join(names)}."},
        "properties": {"tags": ["security", *OWASP, *ATLAS], "security-severity": "7.5",
                       "owasp-llm-2025": list(OWASP), "mitre-atlas": list(ATLAS)},
    }  # fmt: skip
    return {
        "$schema": SCHEMA_URI, "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "ragshield", "version": version,
                                      "rules": [rule]}},
                  "invocations": [{"executionSuccessful": True}], "results": results,
                  "properties": {"index": report.index, "screen": report.screen,
                                 "added": len(report.added),
                                 "quarantined": len(report.quarantined)}}],
    }  # fmt: skip


def to_junit(report: AddReport) -> bytes:
    root = ET.Element("testsuites", name="ragshield add")
    suite = ET.SubElement(root, "testsuite", name=f"ragshield add: {report.screen}")
    fails = 0
    for s in report.screened:
        case = ET.SubElement(suite, "testcase", classname="ragshield.add",
                             name=xml_safe(s.passage.id))  # fmt: skip
        if s.flagged:
            fails += 1
            f = ET.SubElement(case, "failure", type="ragshield.quarantine",
                              message=xml_safe("; ".join(s.reasons)))  # fmt: skip
            f.text = xml_safe(s.passage.text[:500])
    n = str(len(report.screened))
    suite.attrib.update(tests=n, failures=str(fails), errors="0", skipped="0")
    root.attrib.update(tests=n, failures=str(fails), errors="0")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def parse_formats(spec: str) -> tuple[str, ...]:
    """``json,sarif`` -> ('json', 'sarif'), by the scan's ``--format`` rule."""
    return formats.parse_formats(spec, FORMATS)


def write_report(report: AddReport, out: Path, formats: Sequence[str]) -> list[Path]:
    from ragshield import __version__

    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "json": lambda: json.dumps(report.to_dict(), indent=2).encode("utf-8"),
        "sarif": lambda: json.dumps(to_sarif(report, __version__), indent=2).encode("utf-8"),
        "junit": lambda: to_junit(report),
    }
    written = []
    for name in formats:
        (out / FORMATS[name]).write_bytes(payload[name]())
        written.append(out / FORMATS[name])
    return written
