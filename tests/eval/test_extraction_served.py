"""``extraction_logs.served_table``: chunks served against chunks recovered (the benchmark's
``--served-logs``), on hand-built sessions."""

from __future__ import annotations

import numpy as np
import pytest

from bench_modules import benchmark

_logs = benchmark("extraction_logs")
served_table = _logs.served_table


def _session(n: int, served_of: object) -> list[list[int]]:
    return [list(served_of(i)) for i in range(n)]  # type: ignore[operator]


@pytest.mark.parametrize(
    ("served", "recovered", "expect_at_25", "expect_at_50"),
    [
        # a retriever that keeps serving the same two chunks: served stalls, queries stale
        (
            _session(50, lambda i: (0, 1)),
            {0: 0},
            {"served": 2, "served_last_25": 2, "recovered": 1, "recovered_served": 1,
             "stale_queries": 24},
            {"served": 2, "served_last_25": 0, "recovered": 1, "recovered_served": 1,
             "stale_queries": 49},
        ),
        # a new pair every query, only the first of each copied: copying is what stalls
        (
            _session(50, lambda i: (2 * i, 2 * i + 1)),
            {2 * i: i for i in range(50)},
            {"served": 50, "served_last_25": 50, "recovered": 25, "recovered_served": 25,
             "stale_queries": 0},
            {"served": 100, "served_last_25": 50, "recovered": 50, "recovered_served": 50,
             "stale_queries": 0},
        ),
        # a chunk the judge credits that was never served (a near-duplicate's copy)
        (
            _session(50, lambda i: (i % 10,)),
            {7: 3, 40: 30},
            {"served": 10, "served_last_25": 10, "recovered": 1, "recovered_served": 1,
             "stale_queries": 15},
            {"served": 10, "served_last_25": 0, "recovered": 2, "recovered_served": 1,
             "stale_queries": 40},
        ),
    ],
)  # fmt: skip
def test_served_against_recovered_at_each_mark(
    served: list[list[int]],
    recovered: dict[int, int],
    expect_at_25: dict[str, int],
    expect_at_50: dict[str, int],
) -> None:
    recovered_by = np.full(100, -1)
    for chunk, query in recovered.items():
        recovered_by[chunk] = query
    rows = served_table(served, recovered_by, (25, 50, 100))
    assert [r["queries"] for r in rows] == [25, 50]  # marks past the log are left out
    assert rows[0] == {"queries": 25, **expect_at_25}
    assert rows[1] == {"queries": 50, **expect_at_50}


@pytest.mark.parametrize(
    ("header", "rows", "expect"),
    [
        ("| a | b |", ["| 1 | 2 |"], "| a | b |\n|---|---|\n| 1 | 2 |\n"),
        # a caption before the first bar is not a column; no rows, no row lines
        ("\ncaption: | a | b | c |", [], "\ncaption: | a | b | c |\n|---|---|---|\n"),
        ("| only |", ("| x |", "| y |"), "| only |\n|---|\n| x |\n| y |\n"),
    ],
)
def test_a_table_separator_has_as_many_columns_as_its_header(
    header: str, rows: list[str], expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _logs.print_table(header, rows)
    assert capsys.readouterr().out == expect
