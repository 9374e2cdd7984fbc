"""``bench_filter_aware.py --generator``: the filter-aware survivors answered end to end."""

from __future__ import annotations

from collections.abc import Sequence

from test_real_retrieval import tiny

from bench_modules import benchmark
from fakes import EchoGenerator, WordHashEncoder
from ragshield.eval.real_retrieval import build_base_store
from ragshield.types import Generation


class Recorder(EchoGenerator):
    """The fixed answer, and every context it was shown kept (test-only)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.contexts: list[tuple[str, ...]] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.contexts.append(tuple(contexts))
        return super().generate(question, contexts)


def _curve(generator: Recorder | None) -> tuple[str, dict]:
    fa = benchmark("bench_filter_aware")
    data, enc = tiny(), WordHashEncoder()
    store = build_base_store(data, enc)
    return fa.curve_table(  # type: ignore[no-any-return]
        data, list(data.questions), {"none": None}, enc, store, 0, 4, [20], novelty=False,
        generator=generator,
    )  # fmt: skip


def test_the_generator_answers_the_context_with_the_survivors_planted() -> None:
    gen = Recorder("Sydney, of course.")
    table, rows = _curve(gen)
    m = rows["none"]["20"]
    assert m["attack_reaches"] == 1.0  # no defense: the survivors reach the context
    assert m["asr"] == 1.0 and m["accuracy"] == 0.0  # the answer names the target
    assert "ASR 1.00" in table
    corpus = {p.text for p in tiny().passages}
    assert gen.contexts and any(t not in corpus for t in gen.contexts[-1])  # a planted text


def test_an_answer_without_the_target_is_no_success_and_no_generator_no_column() -> None:
    _table, rows = _curve(Recorder("Canberra."))
    assert rows["none"]["20"]["asr"] == 0.0 and rows["none"]["20"]["accuracy"] == 1.0
    table, rows = _curve(None)
    assert "asr" not in rows["none"]["20"] and "ASR" not in table


def test_no_generator_spec_builds_none() -> None:
    assert benchmark("bench_real_retrieval").bench_generator(None, WordHashEncoder(), "x") is None
