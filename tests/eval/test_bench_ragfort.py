"""``bench_ragfort.cascade_measures``: one cascade generation's row entries, on a hand-built
generation (the keys the benchmark's JSON has always carried)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench_modules import benchmark

cascade_measures = benchmark("bench_ragfort").cascade_measures

DETAILS = {
    "draft_forwards": 7,
    "reference_forwards": 3,
    "flops": 2.5e9,
    "flops_reference_only": 4.0e9,
    "acceptance_rate": 0.75,
    "deferrals": 2,
    "copy_positions": 5,
    "copy_deferrals": 4,
}
GEN = SimpleNamespace(timings={"generate": 1.25}, completion_tokens=11, details=DETAILS)


@pytest.mark.parametrize(
    ("prefix", "tokens_key", "extra", "expect"),
    [
        (
            "",
            "completion_tokens",
            ("flops_reference_only", "deferrals"),
            {"seconds": 1.25, "completion_tokens": 11, "draft_forwards": 7,
             "reference_forwards": 3, "flops": 2.5e9, "acceptance_rate": 0.75,
             "flops_reference_only": 4.0e9, "deferrals": 2},
        ),
        (
            "attack_",
            "attack_tokens",
            ("copy_positions", "copy_deferrals"),
            {"attack_seconds": 1.25, "attack_tokens": 11, "attack_draft_forwards": 7,
             "attack_reference_forwards": 3, "attack_flops": 2.5e9,
             "attack_acceptance_rate": 0.75, "attack_copy_positions": 5,
             "attack_copy_deferrals": 4},
        ),
    ],
)  # fmt: skip
def test_the_answer_and_the_attack_rows_keep_their_keys(
    prefix: str, tokens_key: str, extra: tuple[str, ...], expect: dict[str, float]
) -> None:
    assert cascade_measures(GEN, prefix, tokens_key, *extra) == expect


def test_a_detail_the_generation_lacks_is_an_error_not_a_silent_gap() -> None:
    with pytest.raises(KeyError):
        cascade_measures(GEN, "", "completion_tokens", "no_such_detail")
