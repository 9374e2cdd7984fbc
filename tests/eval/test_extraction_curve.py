"""The CRR curve as inline SVG: one polyline per curve, a point per query, nothing when empty."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from ragshield.eval.extraction_curve import curve_svg

NS = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("curves", [{}, {"none × worm": []}])
def test_nothing_measured_draws_nothing(curves: dict[str, list[float]]) -> None:
    assert curve_svg(curves) == ""


@pytest.mark.parametrize(
    ("curves", "top_label"),
    [
        ({"none × rag-thief": [0.0, 0.1, 0.32], "canary × rag-thief": [0.0, 0.0]}, "50 %"),
        ({"none × worm <x>": [0.001, 0.004]}, "0.5 %"),
        ({"clamped": [1.7]}, "100 %"),
    ],
)
def test_one_polyline_per_curve_one_point_per_query(
    curves: dict[str, list[float]], top_label: str
) -> None:
    svg = curve_svg(curves)
    root = ET.fromstring(svg)  # well-formed: names are escaped
    lines = root.findall(f"{NS}polyline")
    assert len(lines) == len(curves)
    for line, ys in zip(lines, curves.values(), strict=True):
        assert len(line.get("points", "").split()) == len(ys)
    labels = [t.text for t in root.findall(f"{NS}text")]
    assert top_label in labels
    legend = " ".join(t for t in labels if t and "after" in t)
    for name, ys in curves.items():
        assert name in legend and f"after {len(ys)} queries" in legend


def test_higher_crr_is_drawn_higher() -> None:
    svg = curve_svg({"a": [0.0, 0.2]})
    (pts,) = re.findall(r'points="([^"]+)"', svg)
    (_, y0), (_, y1) = (map(float, p.split(",")) for p in pts.split())
    assert y1 < y0  # SVG y grows downwards


def test_scan_report_plots_measured_chains_only() -> None:
    """The scan report's extraction section carries the curve of every measured cell."""
    from types import SimpleNamespace

    from ragshield.scan.extraction import ExtractionCell
    from ragshield.scan.report import _extraction

    def cell(chain: str, why: str = "") -> ExtractionCell:
        return ExtractionCell(chain, "worm", 0.02, 2, 100, 3, 9, 1.0, "max_queries",
                              (0.0, 0.01, 0.02), not_measured=why)  # fmt: skip

    scan = SimpleNamespace(extraction=[cell("none"), cell("canary", "budget too small")], notes={})
    html = _extraction(scan)  # type: ignore[arg-type]
    assert html.count("<polyline") == 1 and "none × worm" in html
    assert "canary × worm —" not in html
