"""``extraction_wormsim``: the worm's served chunks without the LLM (the benchmark's
``--worm-sim``), on hand-built stores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench_modules import benchmark
from fakes import WordHashEncoder
from ragshield.attacks.extraction import WormAttack

TEXTS = [
    "alpha fever cough patient",
    "bravo knee pain doctor",
    "charlie skin rash cream",
    "delta chest pain heart",
    "echo headache migraine light",
]


sim = benchmark("extraction_wormsim")


class _Scripted:
    """An attack that asks fixed queries and keeps what it was answered."""

    def __init__(self, queries: list[str]) -> None:
        self.queries = queries
        self.answers: list[str] = []

    def run(self, ask: Callable[[str], str]) -> None:
        self.answers = [ask(q) for q in self.queries]


def test_each_query_is_served_its_nearest_chunks_and_answered_with_them() -> None:
    enc = WordHashEncoder()
    attack = _Scripted([TEXTS[3], TEXTS[0], TEXTS[3]])
    served = sim.served_by_simulation(attack, TEXTS, enc.encode(TEXTS), enc, top_k=1)
    assert served == [[3], [0], [3]]
    # the perfect copier: every served chunk verbatim, labelled as the bench's prompt does
    assert attack.answers[1] == f"[1] {TEXTS[0]}"


def test_progress_sees_the_served_lists_after_every_query() -> None:
    enc = WordHashEncoder()
    seen: list[list[list[int]]] = []
    sim.served_by_simulation(
        _Scripted(TEXTS[:3]), TEXTS, enc.encode(TEXTS), enc, 1, lambda s: seen.append(list(s))
    )
    assert seen == [[[0]], [[0], [1]], [[0], [1], [2]]]


def test_the_worm_runs_its_budget_against_the_simulated_store() -> None:
    enc = WordHashEncoder()
    vocab = sorted({w for t in TEXTS for w in t.split()})
    worm = WormAttack(enc, max_queries=4, seed=0, vocabulary=vocab, iterations=2, n_targets=4)
    served = sim.served_by_simulation(worm, TEXTS, enc.encode(TEXTS), enc, top_k=2)
    assert len(served) == 4  # one query a round, its budget spent
    assert all(len(ids) == 2 and len(set(ids)) == 2 for ids in served)
    assert len(worm.log_) == 4 and all(r.startswith("[1] ") for _, r in worm.log_)


@pytest.mark.parametrize(
    ("runs", "marks", "expect"),
    [
        # one instance: its own distinct chunks after each mark
        ([[[0, 1], [1, 2], [2, 3]]], (1, 2, 3), [2, 3, 4]),
        # two instances that overlap: the union, mark by mark
        ([[[0, 1], [2, 3]], [[1, 4], [5, 0]]], (1, 2), [3, 6]),
        # marks past the shortest instance are left out
        ([[[0], [1], [2]], [[3]]], (1, 2, 3), [2]),
        # no instance: nothing
        ([], (1,), []),
    ],
)
def test_union_curve_counts_distinct_chunks_of_all_instances(
    runs: list[list[list[int]]], marks: tuple[int, ...], expect: list[int]
) -> None:
    assert sim.union_curve(runs, marks) == expect


@pytest.mark.parametrize(("rounds", "seeds"), [(0, [0]), (5, [])])
def test_a_budget_or_seed_count_below_one_is_refused_before_any_work(
    rounds: int, seeds: list[int]
) -> None:
    from ragshield.errors import InputError

    def never(seed: int) -> object:
        raise AssertionError("no attack is built for a refused budget")

    with pytest.raises(InputError, match="worm_sim"):
        sim.worm_sim(None, WordHashEncoder(), Path("unused"), rounds, seeds, never)


@pytest.mark.parametrize(
    ("text", "expect"), [("100,150,200", [100, 150, 200]), ("300", [300]), (" 50, 75 ", [50, 75])]
)
def test_sizes_parse_as_chunk_counts(text: str, expect: list[int]) -> None:
    assert sim.parse_sizes(text) == expect


@pytest.mark.parametrize("text", ["", "100,", "a,b", "1.5", "100,-5", "0"])
def test_sizes_that_are_not_chunk_counts_are_refused(text: str) -> None:
    from ragshield.errors import InputError

    with pytest.raises(InputError, match="sizes"):
        sim.parse_sizes(text)


def test_estimated_crr_is_the_served_share_times_the_copy_share() -> None:
    assert sim.estimated_crr(60, 100, 0.5) == pytest.approx(0.3)
    assert sim.estimated_crr(118, 500, 0.5) == pytest.approx(0.118)


def _kb(n: int) -> object:
    from ragshield.eval.extraction_data import KnowledgeBase
    from ragshield.types import Passage

    return KnowledgeBase("toy", tuple(Passage(f"p{i}", TEXTS[i]) for i in range(n)), ())


def test_the_sweep_runs_the_worm_once_per_size_and_summarises_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    enc = WordHashEncoder()
    vocab = sorted({w for t in TEXTS for w in t.split()})
    loaded: list[int] = []

    def load(n: int) -> object:
        loaded.append(n)
        return _kb(n)

    def make(seed: int) -> WormAttack:
        return WormAttack(
            enc, max_queries=3, seed=seed, vocabulary=vocab, iterations=1, n_targets=2
        )

    sim.size_sweep(load, enc, tmp_path, 3, [2, 5], 0, make, copy_share=0.5, top_k=2)
    out = capsys.readouterr().out
    assert loaded == [2, 5]
    summary = out[out.index("summary") :].splitlines()
    # a 2-chunk store answers top 2 with both chunks: all served, half of them copied
    assert summary[2] == "| 2 | 2 | 1.00 | 0.50 |"
    cells = summary[3].strip("|").split("|")
    assert int(cells[0]) == 5 and 2 <= int(cells[1]) <= 5


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_copy_share_outside_zero_one_is_refused_before_any_load(
    tmp_path: Path, share: float
) -> None:
    from ragshield.errors import InputError

    def never(n: int) -> object:
        raise AssertionError("no knowledge base is loaded for a refused share")

    with pytest.raises(InputError, match="copy-share"):
        sim.size_sweep(never, WordHashEncoder(), tmp_path, 3, [2], 0, never, copy_share=share)


@pytest.mark.parametrize(
    ("rounds", "sizes", "match"), [(None, "100", "needs --worm-sim"), (200, "100,x", "sizes")]
)
def test_the_bench_refuses_a_sweep_without_a_budget_or_with_bad_sizes(
    rounds: int | None, sizes: str, match: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from ragshield.errors import InputError

    bench = benchmark("bench_extraction")
    monkeypatch.setattr(bench, "SentenceTransformerEncoder", lambda: pytest.fail("model loaded"))
    args = argparse.Namespace(worm_sim=rounds, worm_sim_sizes=sizes, copy_share=0.5)
    with pytest.raises(InputError, match=match):
        bench._size_sweep(args)
