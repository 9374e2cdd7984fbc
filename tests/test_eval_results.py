"""The common result schema (:mod:`ragshield.eval.results`): every harness exports alike."""

from __future__ import annotations

import json
import math

import pytest

from ragshield.errors import InputError
from ragshield.eval.extraction import ExtractionReport, ExtractionRow
from ragshield.eval.injection import InjectionResults, InjectionRow
from ragshield.eval.poisoning import PoisoningResults, SettingResult
from ragshield.eval.real_retrieval import RealResults, RealRow
from ragshield.eval.results import ResultRow, ResultTable, to_table


def poisoning() -> PoisoningResults:
    clean = SettingResult("none", "clean", 0.0, 0, 0.0, 4, {"filter_asr": [0.0, 0.0]})
    attacked = SettingResult(
        "ragdefender", "poisonedrag", 2.0, 10, 9.5, 4,
        {"filter_asr": [0.25, 0.5], "recall": [1.0, math.nan]},
    )  # fmt: skip
    return PoisoningResults("nq", "test", 4, [3, 4], 5, "minilm", None, [clean, attacked])


def injection(seeds: list[int]) -> InjectionResults:
    rows = [
        InjectionRow("ecosaferag", "clean", 0, 8, {"asr_filter": 0.0}),
        InjectionRow("ecosaferag", "poisonedrag", 5, 8, {"asr_filter": 0.125}),
    ]
    return InjectionResults("msmarco", "dev", 4, seeds, 5, None, rows)


def extraction() -> ExtractionReport:
    def row(defense: str, crr: float) -> ExtractionRow:
        return ExtractionRow(defense, "rag-thief", crr, int(crr * 100), 100, 0.5, 0.1, 0.8,
                             0.9, 20, 4, 1.5, "budget", 30, 40, [(10, crr)])  # fmt: skip

    return ExtractionReport("chatdoctor", 100, 7, {"seed": 0}, [row("none", 0.4), row("rf", 0.1)])


def real() -> RealResults:
    rows = (RealRow("none", "poisonedrag", 12, 5.0, "shared", {"asr": 0.75, "gold_kept": 1.0}),)
    return RealResults("squad", "test", 10, 5, 0, "minilm", rows)


def test_poisoning_one_row_per_seed() -> None:
    t = to_table(poisoning())
    assert [(r.defense, r.setting, r.seed) for r in t.rows] == [
        ("none", "clean", 3), ("none", "clean", 4),
        ("ragdefender", "poisonedrag@2x", 3), ("ragdefender", "poisonedrag@2x", 4),
    ]  # fmt: skip
    last = t.rows[-1]
    assert last.metrics["filter_asr"] == 0.5 and last.metrics["m_used"] == 9.5
    assert math.isnan(last.metrics["recall"]) and last.n == 4 and last.harness == "poisoning"


@pytest.mark.parametrize(("seeds", "seed"), [([0, 1], None), ([7], 7)])
def test_injection_rows_pool_seeds(seeds: list[int], seed: int | None) -> None:
    t = to_table(injection(seeds))
    assert [r.setting for r in t.rows] == ["clean", "poisonedrag@m=5"]
    assert {r.seed for r in t.rows} == {seed} and t.rows[1].metrics == {"asr_filter": 0.125}


def test_extraction_and_real() -> None:
    ex = to_table(extraction())
    assert [r.defense for r in ex.rows] == ["none", "rf"] and ex.rows[0].setting == "rag-thief"
    assert ex.rows[1].metrics["relative_crr"] == pytest.approx(0.25)
    assert ex.rows[1].metrics["queries"] == 20.0 and "stop_reason" not in ex.rows[1].metrics
    assert ex.rows[0].n == 100 and ex.rows[0].seed == 0
    rr = to_table(real()).rows[0]
    assert (rr.harness, rr.seed, rr.n, rr.metrics["m_planted"]) == ("real-retrieval", 0, 12, 5.0)


def test_one_export_for_all_harnesses() -> None:
    table = to_table(poisoning()) + to_table(injection([0, 1])) + to_table(extraction())
    table = table + to_table(real())
    assert len(table.rows) == 4 + 2 + 2 + 1
    lines = table.to_jsonl().splitlines()
    back = [json.loads(line) for line in lines]  # strict JSON: NaN became null
    assert len(back) == len(table.rows)
    assert back[3]["metrics"]["recall"] is None and back[3]["setting"] == "poisonedrag@2x"
    assert set(back[0]) == {"harness", "dataset", "split", "seed", "defense", "setting",
                            "metrics", "n"}  # fmt: skip
    assert table.to_dict()["rows"] == back
    md = table.to_markdown(["filter_asr", "asr_filter"])
    assert md.splitlines()[0].startswith("| harness | dataset | split | seed |")
    assert "| injection | msmarco | dev | pooled | ecosaferag | clean | 8 | – | 0.000 |" in md
    assert "| poisoning | nq | test | 4 | ragdefender | poisonedrag@2x | 4 | 0.500 | – |" in md


def test_rows_are_frozen_and_unknown_results_refused() -> None:
    row = ResultRow("h", "d", "s", 0, "none", "clean", {"x": 1.0}, 1)
    with pytest.raises(AttributeError):
        row.n = 2  # type: ignore[misc]
    assert ResultTable((row,)).metric_names() == ["x"]
    with pytest.raises(InputError, match="no result converter for dict"):
        to_table({})
