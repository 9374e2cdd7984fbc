"""``benchmarks/bench_injection.py``'s ``--placements``: the names are checked before any
work (a typo would otherwise cost the half hour of heads and calibration first)."""

from __future__ import annotations

import argparse
import sys

import pytest

from bench_modules import benchmark
from ragshield.attacks.injection_families import PLACEMENTS


def test_placements_arg_keeps_known_names_in_order() -> None:
    bench = benchmark("bench_injection")
    assert bench.placements_arg("prefixed, prefixed-reworded") == ("prefixed", "prefixed-reworded")
    assert bench.placements_arg(",".join(PLACEMENTS)) == tuple(PLACEMENTS)


@pytest.mark.parametrize("value", ["prefixd", "prefixed,nowhere", "", " , "])
def test_placements_arg_refuses_an_unknown_or_empty_name(value: str) -> None:
    bench = benchmark("bench_injection")
    with pytest.raises(argparse.ArgumentTypeError, match="choose from prefixed"):
        bench.placements_arg(value)


def test_bad_placement_exits_2_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = benchmark("bench_injection")

    def no_work() -> None:
        raise AssertionError("the encoder was built before the options were checked")

    monkeypatch.setattr(bench, "cached_encoder", no_work)
    monkeypatch.setattr(sys, "argv", ["bench_injection.py", "--placements", "prefixed,bogus"])
    with pytest.raises(SystemExit) as exc:
        bench.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown placement bogus" in err and "Traceback" not in err
