"""The poisoning harness's result types: one seed's metrics from summed counts, the JSON
form (non-finite means become null, never 0.0), and the cell lookup."""

from __future__ import annotations

import json
import math

import pytest

from ragshield.eval.poisoning_results import (
    METRIC_LABELS,
    PoisoningResults,
    SettingResult,
    aggregate,
)

ROW = {
    "tp": 2.0,
    "fp": 1.0,
    "fn": 2.0,
    "n_clean": 4.0,
    "gold_total": 1.0,
    "gold_kept": 1.0,
    "n_adv_error": 1.0,
    "filter_asr": 1.0,
    "adv_majority": 0.0,
    "gold_in_context": 1.0,
    "filter_ms": 3.0,
}


def test_aggregate_sums_counts_before_dividing() -> None:
    second = {**ROW, "tp": 0.0, "fn": 4.0, "filter_asr": 0.0, "gold_kept": 0.0, "filter_ms": 5.0}
    out = aggregate([ROW, second])
    assert out["recall"] == pytest.approx(2 / 8)  # (2 + 0) / (2 + 0 + 2 + 4), not a mean of ratios
    assert out["precision"] == pytest.approx(2 / 4)
    assert out["golden_retention"] == pytest.approx(0.5)
    assert out["clean_removed"] == pytest.approx(2 / 8)
    assert out["filter_asr"] == pytest.approx(0.5) and out["filter_ms"] == pytest.approx(4.0)
    assert "asr" not in out  # no generator: not measured, not 0
    assert set(out) <= set(METRIC_LABELS)


def test_end_to_end_metrics_only_when_measured() -> None:
    out = aggregate([{**ROW, "asr": 1.0, "accuracy": 0.0}, {**ROW, "asr": 0.0, "accuracy": 1.0}])
    assert out["asr"] == pytest.approx(0.5) and out["accuracy"] == pytest.approx(0.5)


@pytest.mark.parametrize(("values", "mean"), [([0.5, 1.0], 0.75), ([math.nan, math.nan], None)])
def test_to_dict_is_json_and_says_null_for_what_is_not_finite(values, mean) -> None:
    cell = SettingResult("d", "poisonedrag", 1.0, 5, 5.0, 10, {"recall": values})
    res = PoisoningResults("nq", "test", 10, [0, 1], 5, "enc", None, [cell])
    data = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert data["settings"][0]["mean"]["recall"] == (None if mean is None else pytest.approx(mean))
    assert res.get("d", "poisonedrag", 1.0) is cell
    with pytest.raises(KeyError):
        res.get("d", "poisonedrag", 2.0)
