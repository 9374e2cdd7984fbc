"""bench_adaptive_poisoning's command line: combinations that would run for hours and print
a misleading table are refused before any index is built (check_args)."""

from __future__ import annotations

import pytest

from bench_modules import benchmark

bench = benchmark("bench_adaptive_poisoning")


def problem(*argv: str) -> str | None:
    args = bench.parser().parse_args(list(argv))
    return bench.check_args(args, set(args.sections.split(",")))


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("--sections", "main", "--writer", "qwen2.5-0.5b", "--writer-replace"),
        ("--sections", "lofo", "--lofo-writer", "qwen2.5-0.5b"),
        ("--sections", "main", "--writer", "qwen2.5-0.5b"),
        ("--sections", "main,lofo", "--datasets", "hotpotqa", "--lofo-writer", "x"),
    ],
)
def test_accepted(argv: tuple[str, ...]) -> None:
    assert problem(*argv) is None


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (("--sections", "main,bogus"), "unknown section"),
        (("--variants", "[1]"), "--variants"),
        (("--variants", "{not json"), "--variants"),
        (("--later-share", "1.5"), "--later-share"),
        (("--writer-replace",), "needs --writer"),
        (("--sections", "lofo", "--split", "dev"), "--split test"),
        (("--sections", "main", "--lofo-writer", "qwen2.5-0.5b"), "add lofo"),
        (("--sections", "lofo", "--lofo-writer", "q", "--writer", "q"), "every lofo tuning set"),
        (("--sections", "lofo", "--datasets", "squad", "--lofo-writer", "q"), "not in --datasets"),
    ],
)
def test_refused(argv: tuple[str, ...], says: str) -> None:
    found = problem(*argv)
    assert found is not None and says in found
