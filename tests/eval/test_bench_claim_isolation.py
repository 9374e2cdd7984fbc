"""bench_claim_isolation's answer rules: an answer counts only when it adds words to the
question and stands in the passage it was read from (a model's guess from its own knowledge
is no claim of the passage), and two answers agree when they name the same thing."""

from __future__ import annotations

from bench_modules import benchmark

bench = benchmark("bench_claim_isolation")

Q = "Who designed the Eiffel Tower?"
PAGE = "The Eiffel Tower was designed by the engineering firm of Gustave Eiffel in 1887."


def test_an_answer_is_what_it_adds_to_the_question() -> None:
    assert bench.answer_words("Gustave Eiffel", Q) == {"gustave"}  # "eiffel" is the question's
    assert bench.answer_words("I don't know.", Q) == frozenset()
    assert bench.answer_words("The Eiffel Tower", Q) == frozenset()  # restates the question


def test_an_answer_counts_only_when_the_passage_holds_it() -> None:
    assert bench.grounded("Gustave Eiffel", [PAGE], Q) == {"gustave"}
    assert bench.grounded("Stephen Sauvestre", [PAGE], Q) == frozenset()  # model's own guess
    assert bench.grounded("Stephen Sauvestre", ["x", "Stephen Sauvestre drew it."], Q)


def test_answers_agree_when_they_name_the_same_thing() -> None:
    a, b = frozenset({"hanna", "barbera"}), frozenset({"william", "hanna", "joseph", "barbera"})
    assert bench.agree(a, b) and bench.agree(b, a)
    assert not bench.agree(a, frozenset({"abc", "circle", "films"}))
    assert not bench.agree(a, frozenset())  # no answer disagrees with nothing
