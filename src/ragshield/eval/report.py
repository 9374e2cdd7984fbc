"""Tables, JSON and plots for evaluation results.

Example::

    from ragshield.eval.report import markdown_table, plot_asr, write_json

    print(markdown_table(results))
    write_json(results, "out/nq.json")
    plot_asr(results, "out/nq.png")

Every figure is printed as mean ± std over seeds, with the dataset, split, seeds and
setting notes in a header, so a table pasted elsewhere still says what it measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragshield.eval import figures
from ragshield.eval.poisoning_results import METRIC_LABELS, PoisoningResults
from ragshield.eval.poisoning_sets import CLEAN

DEFAULT_METRICS: tuple[str, ...] = (
    "adv_majority",
    "gold_in_context",
    "filter_asr",
    "recall",
    "precision",
    "golden_retention",
    "clean_removed",
    "n_adv_error",
    "filter_ms",
)


def _fmt(mean: float, std: float, key: str) -> str:
    if not math.isfinite(mean):
        return "–"
    digits = 1 if key in ("filter_ms", "n_adv_error") else 2
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def markdown_table(
    results: PoisoningResults,
    metrics: Sequence[str] | None = None,
    defenses: Sequence[str] | None = None,
) -> str:
    """One row per (attack, ratio, defense); columns: M used, then each metric."""
    if metrics is None:
        metrics = [*DEFAULT_METRICS]
        if results.generator is not None:
            metrics[3:3] = ["asr", "accuracy"]
    names = (
        list(defenses)
        if defenses is not None
        else list(dict.fromkeys(s.defense for s in results.settings))
    )
    head = [
        f"**{results.dataset}** — split `{results.split}`, {results.n_questions} questions, "
        f"seeds {_seed_text(results.seeds)}, encoder `{results.encoder}`, generator "
        f"`{results.generator or 'none'}`, context top-{results.context_k}. Mean ± std over seeds.",
        "",
    ]
    cols = ["attack", "ratio", "M used", "defense", *(METRIC_LABELS.get(m, m) for m in metrics)]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for s in results.settings:
        if s.defense not in names:
            continue
        ratio = "–" if s.attack == CLEAN else f"{s.ratio:g}×"
        cells = [s.attack, ratio, f"{s.m_used:.1f}", s.defense]
        cells += [_fmt(*s.mean_std(m), m) for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {n}" for n in results.notes]
    return "\n".join([*head, *lines, "", *notes]) + "\n"


def _seed_text(seeds: Sequence[int]) -> str:
    s = list(seeds)
    if s and s == list(range(s[0], s[0] + len(s))):
        return f"{s[0]}–{s[-1]} ({len(s)})"
    return ", ".join(map(str, s))


def write_json(results: PoisoningResults | Sequence[PoisoningResults], path: Path | str) -> Path:
    """Write one or several results (per-seed values, mean, std, notes) as JSON."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload: Any = (
        results.to_dict()
        if isinstance(results, PoisoningResults)
        else [r.to_dict() for r in results]
    )
    out.write_text(json.dumps(payload, indent=2, allow_nan=False), encoding="utf-8")
    return out


def plot_asr(
    results: PoisoningResults | Sequence[PoisoningResults],
    path: Path | str,
    metric: str | None = None,
) -> Path:
    """ASR vs ratio, one line per defense, one column per attack, two rows per dataset.

    ``metric`` defaults to end-to-end ASR when a generator was used, else the filter-level
    ASR; the second row of each dataset shows the adversarial-majority rate. The clean
    setting is drawn at ratio 0 in every panel. Uses matplotlib's Agg backend.
    """
    plt = figures.pyplot()
    runs = [results] if isinstance(results, PoisoningResults) else list(results)
    attacks = [[a for a in dict.fromkeys(s.attack for s in r.settings) if a != CLEAN] for r in runs]
    n_cols = max((len(a) for a in attacks), default=1) or 1
    fig, axes = plt.subplots(
        2 * len(runs),
        n_cols,
        figsize=(3.2 * n_cols, 2.7 * 2 * len(runs)),
        squeeze=False,
        sharey=True,
    )
    for ri, (r, names) in enumerate(zip(runs, attacks, strict=True)):
        key = metric or ("asr" if r.generator else "filter_asr")
        for col in range(n_cols):
            for row, k in enumerate([key, "adv_majority"]):
                ax = axes[2 * ri + row][col]
                if col >= len(names):
                    ax.set_visible(False)
                    continue
                attack = names[col]
                for d in dict.fromkeys(s.defense for s in r.settings):
                    pts = sorted(
                        (s.ratio, *s.mean_std(k))
                        for s in r.settings
                        if s.defense == d and s.attack in (attack, CLEAN) and k in s.per_seed
                    )
                    if pts:
                        xs, ys, es = zip(*pts, strict=True)
                        ax.errorbar(xs, ys, yerr=es, marker="o", ms=3, capsize=2, label=d)
                ax.set_title(f"{r.dataset} · {attack}" if row == 0 else "", fontsize=9)
                ax.set_xlabel("adversarial ratio (0 = clean)" if row == 1 else "", fontsize=8)
                ax.set_ylabel(METRIC_LABELS.get(k, k) if col == 0 else "")
                ax.set_ylim(-0.02, 1.02)
                ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return figures.save(fig, path, dpi=110)
