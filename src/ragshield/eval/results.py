"""One result schema for every evaluation harness: rows of named metrics, exported alike.

Example::

    from ragshield.eval.results import to_table

    table = to_table(run_poisoning_eval(...))          # or injection, extraction, real
    print(table.to_markdown())
    Path("all.jsonl").write_text(table.to_jsonl())
    both = to_table(poisoning_results) + to_table(real_results)

Why: each harness grew its own result class (:class:`~ragshield.eval.poisoning.PoisoningResults`
per seed, :class:`~ragshield.eval.injection.InjectionResults` pooled over seeds,
:class:`~ragshield.eval.extraction.ExtractionReport` per attack run,
:class:`~ragshield.eval.real_retrieval.RealResults` per real-retrieval setting), each with its
own JSON and table. They stay (their tables are what the harnesses print); a
:class:`ResultRow` is the common denominator, so results of different harnesses can be
concatenated, filtered and written by one piece of code. One row = one (harness, dataset,
split, seed, defense, setting) cell; ``metrics`` holds its figures under the harness's own
names and ``n`` says over how many items they were averaged (questions, retrieval sets or
knowledge-base chunks). ``seed`` is ``None`` when the harness pooled its seeds into one
figure (the injection harness).

The converters read the result objects by attribute and dispatch on the class name, so this
module imports no harness (no import cycle, no heavy import to write a table).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragshield.errors import InputError


@dataclass(frozen=True)
class ResultRow:
    """One measured cell; ``metrics`` values are floats (NaN = not measured)."""

    harness: str
    dataset: str
    split: str
    seed: int | None
    defense: str
    setting: str
    metrics: Mapping[str, float]
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "harness": self.harness, "dataset": self.dataset, "split": self.split,
            "seed": self.seed, "defense": self.defense, "setting": self.setting,
            "metrics": {k: _finite(v) for k, v in self.metrics.items()}, "n": self.n,
        }  # fmt: skip


@dataclass(frozen=True)
class ResultTable:
    """Rows in the order the harness produced them; ``+`` concatenates tables."""

    rows: tuple[ResultRow, ...] = field(default_factory=tuple)

    def __add__(self, other: ResultTable) -> ResultTable:
        return ResultTable(self.rows + other.rows)

    def metric_names(self) -> list[str]:
        """Every metric name, in first-seen order."""
        return list(dict.fromkeys(k for r in self.rows for k in r.metrics))

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows]}

    def to_jsonl(self) -> str:
        """One JSON object per row (NaN / Inf written as ``null``)."""
        return "".join(json.dumps(r.to_dict(), allow_nan=False) + "\n" for r in self.rows)

    def to_markdown(self, metrics: Iterable[str] | None = None, digits: int = 3) -> str:
        """One line per row; a metric a row lacks (or did not measure) shows as ``–``."""
        names = list(metrics) if metrics is not None else self.metric_names()
        cols = ["harness", "dataset", "split", "seed", "defense", "setting", "n", *names]
        lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in self.rows:
            cells = [r.harness, r.dataset, r.split, "pooled" if r.seed is None else str(r.seed)]
            cells += [r.defense, r.setting, str(r.n)]
            cells += [_cell(r.metrics.get(m), digits) for m in names]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"


def _finite(v: float) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def _cell(v: float | None, digits: int) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{v:.{digits}f}"


def _numbers(values: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries (bools and strings dropped), as floats."""
    return {
        k: float(v)
        for k, v in values.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }


# --------------------------------------------------------------------------- converters


def from_poisoning(res: Any) -> ResultTable:
    """:class:`~ragshield.eval.poisoning.PoisoningResults`: one row per setting and seed;
    setting ``"<attack>@<ratio>x"`` (``"clean"`` for no attack), ``m_used`` among the
    metrics."""
    rows = []
    for s in res.settings:
        setting = s.attack if s.attack == "clean" else f"{s.attack}@{s.ratio:g}x"
        for i, seed in enumerate(res.seeds):
            metrics = {k: float(v[i]) for k, v in s.per_seed.items() if i < len(v)}
            metrics["m_used"] = float(s.m_used)
            rows.append(
                ResultRow("poisoning", res.dataset, res.split, int(seed), s.defense, setting,
                          metrics, int(s.n_questions))
            )  # fmt: skip
    return ResultTable(tuple(rows))


def from_injection(res: Any) -> ResultTable:
    """:class:`~ragshield.eval.injection.InjectionResults`: one row per (defense, setting,
    M), pooled over the seeds (``seed=None``); setting ``"<setting>@m=<M>"``, or the bare
    name for settings without M; ``n`` counts retrieval sets."""
    rows = []
    for r in res.rows:
        setting = r.setting if r.m == 0 else f"{r.setting}@m={r.m}"
        seed = int(res.seeds[0]) if len(res.seeds) == 1 else None
        rows.append(
            ResultRow("injection", res.dataset, res.split, seed, r.defense, setting,
                      {k: float(v) for k, v in r.metrics.items()}, int(r.n_sets))
        )  # fmt: skip
    return ResultTable(tuple(rows))


_EXTRACTION_TEXT = ("defense", "attack", "stop_reason", "curve")


def from_extraction(report: Any) -> ResultTable:
    """:class:`~ragshield.eval.extraction.ExtractionReport`: one row per (defense, attack);
    the setting is the attack, the metrics its numeric fields plus ``relative_crr``; ``n``
    is the knowledge base's chunk count (CRR's denominator)."""
    seed = report.settings.get("seed")
    split = str(report.settings.get("split", "all"))
    rows = []
    for r in report.rows:
        fields = {k: v for k, v in vars(r).items() if k not in _EXTRACTION_TEXT}
        rel = report.relative_crr(r)
        metrics = {**_numbers(fields), "relative_crr": math.nan if rel is None else float(rel)}
        rows.append(
            ResultRow("extraction", report.knowledge_base, split,
                      None if seed is None else int(seed), r.defense, r.attack, metrics,
                      int(report.n_chunks))
        )  # fmt: skip
    return ResultTable(tuple(rows))


def from_real(res: Any) -> ResultTable:
    """:class:`~ragshield.eval.real_retrieval.RealResults`: one row per (defense, setting),
    ``m_planted`` among the metrics; ``n`` counts questions."""
    rows = [
        ResultRow("real-retrieval", res.dataset, res.split, int(res.seed), r.defense, r.setting,
                  {**_numbers(r.metrics), "m_planted": float(r.m_planted)}, int(r.n))
        for r in res.rows
    ]  # fmt: skip
    return ResultTable(tuple(rows))


CONVERTERS: dict[str, Callable[[Any], ResultTable]] = {
    "PoisoningResults": from_poisoning,
    "InjectionResults": from_injection,
    "ExtractionReport": from_extraction,
    "RealResults": from_real,
}
"""Result class name -> converter; a new harness registers its own here."""


def to_table(results: Any) -> ResultTable:
    """Any harness's result object as a :class:`ResultTable`."""
    convert = CONVERTERS.get(type(results).__name__)
    if convert is None:
        raise InputError(
            f"no result converter for {type(results).__name__}; known: {', '.join(CONVERTERS)}."
        )
    return convert(results)
