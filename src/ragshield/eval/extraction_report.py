"""The extraction report: one row per (defense, attack), the table, the curve, the files.

Why a module of its own: what a run measured, and how it is written out (JSON, the
markdown table with each row's CRR relative to the undefended one, the CRR-vs-budget
plot), is read by the CLI, the Ray runner and the benchmarks without running anything.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.eval import figures
from ragshield.eval.outdir import claim_out_dir

__all__ = ["REPORT_FILES", "ExtractionReport", "ExtractionRow"]

#: What a report folder receives (``logs`` from ``run_extraction_eval(log_dir=out/"logs")``).
REPORT_FILES = frozenset({"extraction.json", "extraction.md", "crr_vs_budget.png", "logs"})


@dataclass
class ExtractionRow:
    defense: str
    attack: str
    crr: float
    recovered: int
    n_chunks: int
    topics_touched_share: float
    intra_rate: float
    accuracy: float
    context_recall: float
    queries: int
    rounds: int
    seconds: float
    stop_reason: str
    distinct_chunks_parsed: int
    chunks_reached: int
    curve: list[tuple[int, float]] = field(default_factory=list)
    #: 95 % bootstrap interval of the curve at the same budgets (chunks resampled)
    curve_ci: list[tuple[float, float]] = field(default_factory=list)
    leaks: int = 0  # attack answers the canary output check caught
    utility_leaks: int = 0  # utility answers it caught (false positives)


@dataclass
class ExtractionReport:
    knowledge_base: str
    n_chunks: int
    n_topics: int
    settings: dict[str, Any]
    rows: list[ExtractionRow]

    def relative_crr(self, row: ExtractionRow) -> float | None:
        """CRR as a multiple of the undefended CRR under the same attack (the paper's ×)."""
        base = next((r for r in self.rows if r.defense == "none" and r.attack == row.attack), None)
        if base is None or base.crr == 0:
            return None
        return row.crr / base.crr

    def to_dict(self) -> dict[str, Any]:
        return {
            "knowledge_base": self.knowledge_base,
            "n_chunks": self.n_chunks,
            "n_topics": self.n_topics,
            "settings": self.settings,
            "rows": [asdict(r) | {"relative_crr": self.relative_crr(r)} for r in self.rows],
        }

    def to_markdown(self) -> str:
        s = self.settings
        head = (
            f"Knowledge base: {self.knowledge_base} ({self.n_chunks} chunks, {self.n_topics} "
            f"HDBSCAN topics); generator: {s.get('generator')}; budget: {s.get('max_queries')} "
            f"queries / {s.get('max_seconds')} s per attack; utility questions: "
            f"{s.get('n_questions')}; seed {s.get('seed')}.\n\n"
        )
        cols = (
            "| defense | attack | CRR % | rel. | recovered | topics touched % | intra CRR % "
            "| accuracy % | ctx recall % | chunks reached | queries | wall s | stop |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        )
        lines = []
        for r in self.rows:
            rel = self.relative_crr(r)
            lines.append(
                f"| {r.defense} | {r.attack} | {100 * r.crr:.2f} | "
                f"{'-' if rel is None else f'{rel:.2f}×'} | {r.recovered} | "
                f"{100 * r.topics_touched_share:.1f} | {100 * r.intra_rate:.2f} | "
                f"{_pct(r.accuracy)} | {_pct(r.context_recall)} | {r.chunks_reached} | "
                f"{r.queries} | {r.seconds:.1f} | {r.stop_reason} |"
            )
        means = []
        for name in dict.fromkeys(r.defense for r in self.rows):
            rels = [self.relative_crr(r) for r in self.rows if r.defense == name]
            vals = [v for v in rels if v is not None]
            if vals:
                means.append(f"{name} {float(np.mean(vals)):.2f}×")
        tail = f"\nRelative mean CRR (vs none, averaged over attacks): {', '.join(means)}.\n"
        return head + cols + "\n".join(lines) + "\n" + (tail if means else "")

    def plot(self, path: str | os.PathLike[str]) -> Path | None:
        """CRR vs attack budget, one line per (defense, attack). ``None`` without matplotlib."""
        try:
            plt = figures.pyplot()
        except ImportError:
            return None
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
        attacks = sorted({r.attack for r in self.rows})
        names = list(dict.fromkeys(r.defense for r in self.rows))
        styles = ["-", "--", ":", "-.", (0, (5, 1)), (0, (1, 2))]
        markers = "osD^vP"
        for ax, attack in zip(np.atleast_1d(axes), attacks, strict=False):
            for r in (r for r in self.rows if r.attack == attack):
                if r.curve:
                    xs, ys = zip(*r.curve, strict=True)
                    i = names.index(r.defense)
                    ax.plot(
                        xs,
                        [100 * y for y in ys],
                        linestyle=styles[i % len(styles)],
                        marker=markers[i % len(markers)],
                        alpha=0.8,
                        label=r.defense,
                    )
            ax.set_title(attack)
            ax.set_xlabel("attack queries")
            ax.grid(alpha=0.3)
        np.atleast_1d(axes)[0].set_ylabel("CRR %")
        if np.atleast_1d(axes)[0].get_legend_handles_labels()[0]:
            np.atleast_1d(axes)[0].legend(fontsize=8)
        fig.suptitle(f"CRR vs attack budget — {self.knowledge_base}, {self.n_chunks} chunks")
        fig.tight_layout()
        return figures.save(fig, path, dpi=120)

    def save(self, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
        """Write the report files into ``out_dir``: a new or empty folder, or one a run
        wrote before (:mod:`ragshield.eval.outdir`); any other is refused untouched."""
        out = claim_out_dir(out_dir, "extraction", REPORT_FILES)
        paths = {"json": out / "extraction.json", "markdown": out / "extraction.md"}
        paths["json"].write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")
        paths["markdown"].write_text(self.to_markdown(), encoding="utf-8")
        png = self.plot(out / "crr_vs_budget.png")
        if png is not None:
            paths["plot"] = png
        return paths


def _pct(x: float) -> str:
    """A share as a percentage, ``-`` when it was not measured (NaN)."""
    return "-" if np.isnan(x) else f"{100 * x:.1f}"
