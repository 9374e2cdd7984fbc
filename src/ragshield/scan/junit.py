"""JUnit XML output of ``ragshield scan``: one test case per attack setting × chain.

Example::

    ragshield scan my-index --generate 20 --format junit --fail-on "attack_reaches>0.2"
    # Jenkins / GitLab: publish scan-my-index/results.junit.xml

Why: Jenkins and GitLab show test reports, not SARIF. Each case is named after its chain
(``classname`` = ``ragshield.scan.<setting>``), *fails* when it breaks a ``--fail-on``
rule (on any chain; the exit code gates only the recommended one) and carries its rates
with 95 % intervals and its OWASP/ATLAS ids as properties; ``time`` is the defense's
filtering time over the cell's questions. Written with :mod:`xml.etree` in the layout the
JUnit readers share (Ant's ``testsuites/testsuite/testcase``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragshield.scan.gate import Cell, describe_example, worst_example

if TYPE_CHECKING:
    from ragshield.scan.run import ScanResult


#: Characters XML 1.0 forbids even escaped (an attacker's passage may hold them).
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _props(cell: Cell) -> list[tuple[str, str]]:
    out = [(k, f"{r.value:.4f} [{r.lo:.4f}, {r.hi:.4f}] ({r.successes}/{r.n})")
           for k, r in cell.rates.items()]  # fmt: skip
    out += [("owasp-llm-2025", " ".join(cell.tags.owasp)),
            ("mitre-atlas", " ".join(cell.tags.atlas)),
            ("recommended_chain", str(cell.recommended).lower())]  # fmt: skip
    out += [("finding", x) for x in cell.exceeded]
    return out


def to_junit(scan: ScanResult, cells: Sequence[Cell]) -> bytes:
    """The JUnit XML document (UTF-8 bytes with a declaration)."""
    root = ET.Element("testsuites", name="ragshield scan")
    total = failed = 0
    seconds = 0.0
    for setting in dict.fromkeys(c.setting for c in cells):
        mine = [c for c in cells if c.setting == setting]
        suite = ET.SubElement(root, "testsuite", name=f"ragshield scan: {setting}")
        n_fail = sum(bool(c.failures) for c in mine)
        t = sum(c.seconds for c in mine)
        suite.attrib.update(tests=str(len(mine)), failures=str(n_fail), errors="0",
                            skipped="0", time=f"{t:.3f}")  # fmt: skip
        for c in mine:
            case = ET.SubElement(
                suite, "testcase", classname=f"ragshield.scan.{setting}",
                name=xml_safe(f"{c.chain} [{c.attack}]" if c.attack else c.chain), time=f"{c.seconds:.3f}",
            )  # fmt: skip
            props = ET.SubElement(case, "properties")
            for k, v in _props(c):
                ET.SubElement(props, "property", name=k, value=xml_safe(v))
            if c.failures:
                fail = ET.SubElement(case, "failure", message=xml_safe("; ".join(c.failures)),
                                     type="ragshield.fail_on")  # fmt: skip
                fail.text = xml_safe(describe_example(worst_example(scan, c.setting, c.chain)))
        total += len(mine)
        failed += n_fail
        seconds += t
    root.attrib.update(tests=str(total), failures=str(failed), errors="0", time=f"{seconds:.3f}")
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
