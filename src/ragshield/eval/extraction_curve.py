"""The CRR-vs-queries curve as inline SVG, for HTML reports that carry no image files.

Example::

    from ragshield.eval.extraction_curve import curve_svg
    html = curve_svg({"none × rag-thief": [0.0, 0.01, 0.02], "canary × rag-thief": [0, 0, 0]})

Why: the scan's HTML report is one self-contained file (its bar charts are inline SVG, no
matplotlib at report time), and a table of CRR at a few budgets hides the shape that says
whether an attack was still climbing when its budget ran out — the question a reader of
an extraction result asks first. ``bench_extraction.py --plot`` draws the same curves with
their bootstrap intervals as a PNG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

#: Colour-blind-safe (Okabe–Ito), the scan report's palette.
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999")


def _nice_top(peak: float) -> float:
    """The y-axis top: the smallest of 1, 2, 5 × 10^k (as a share) at or above ``peak``."""
    for top in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0):
        if peak <= top:
            return top
    return 1.0


def curve_svg(
    curves: Mapping[str, Sequence[float]],
    title: str = "CRR after every attack query",
    *,
    width: int = 560,
    height: int = 260,
) -> str:
    """One polyline per curve (CRR after query 1, 2, ...), shares in [0, 1]; ``""`` when
    no curve has a point (nothing measured draws nothing, not a flat zero line)."""
    drawn = {name: [min(1.0, max(0.0, float(v))) for v in ys] for name, ys in curves.items() if ys}
    if not drawn:
        return ""
    left, right, top, plot_h = 52, 12, 28, height - 70
    plot_w = width - left - right
    n_max = max(len(ys) for ys in drawn.values())
    y_top = _nice_top(max(max(ys) for ys in drawn.values()))
    legend_h = 18 * len(drawn)
    total_h = height + legend_h

    def xy(i: int, v: float) -> str:
        x = left + (plot_w * (i + 1) / n_max if n_max > 1 else plot_w / 2)
        return f"{x:.1f},{top + plot_h - plot_h * v / y_top:.1f}"

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="100%" '
        f'style="max-width:{width}px" viewBox="0 0 {width} {total_h}" '
        f'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    for k in range(5):
        v = y_top * k / 4
        y = top + plot_h - plot_h * k / 4
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" '
            f'stroke="#e3e6ee"/><text x="{left - 6}" y="{y + 4:.1f}" '
            f'text-anchor="end">{100 * v:.3g} %</text>'
        )
    for q in sorted({1, max(1, n_max // 2), n_max}):
        x = left + (plot_w * q / n_max if n_max > 1 else plot_w / 2)
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{q}</text>')
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h + 32}" '
        f'text-anchor="middle">attack queries</text>'
    )
    for ci, (name, ys) in enumerate(drawn.items()):
        colour = COLOURS[ci % len(COLOURS)]
        points = " ".join(xy(i, v) for i, v in enumerate(ys))
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}">'
            f"<title>{escape(name)}: CRR {ys[-1]:.3f} after {len(ys)} queries</title>"
            "</polyline>"
        )
        y = height + 18 * ci
        out.append(
            f'<rect x="{left}" y="{y - 10}" width="12" height="12" fill="{colour}"/>'
            f'<text x="{left + 18}" y="{y}">{escape(name)} — {100 * ys[-1]:.1f} % after '
            f"{len(ys)} queries</text>"
        )
    out.append("</svg>")
    return "".join(out)
