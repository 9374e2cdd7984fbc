"""GARAG-style typo copies: the genetic search against the real packaged encoder."""

from __future__ import annotations

import re

import pytest

from ragshield.attacks.garag import TypoAttack, apply_typo
from ragshield.errors import InputError
from ragshield.text import contains_answer

QUESTION = "who designed the eiffel tower"
PASSAGE = (
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. It is "
    "named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "for the 1889 World's Fair. Locally nicknamed the Iron Lady, it was initially criticised "
    "by some of France's leading artists and intellectuals for its design."
)


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z]{2,}|\S", text)


@pytest.mark.parametrize(
    ("op", "pos", "draw", "expected"),
    [
        (0, 1, 0, "tiower"),  # insert a QWERTY neighbour of 'o' (i, k, l, p)
        (1, 1, 0, "twer"),  # delete
        (2, 0, 0, "fower"),  # substitute 't' by a neighbour
        (3, 0, 0, "otwer"),  # swap adjacent letters
        (3, 9, 0, "towre"),  # positions wrap; swap at the end stays inside the word
    ],
)
def test_apply_typo_operations(op: int, pos: int, draw: int, expected: str) -> None:
    assert apply_typo("tower", op, pos, draw) == expected
    assert apply_typo("Tower", 2, 0, 1)[0].isupper()  # substitution keeps the case


class TestTypoAttack:
    def test_copies_are_distinct_budgeted_and_scored(self, encoder) -> None:  # type: ignore[no-untyped-def]
        attack = TypoAttack(encoder, population=8, rate=0.2, generations=6)
        copies = attack.search(QUESTION, PASSAGE, 3, seed=0)
        assert len(copies) == 3 and len({c.text for c in copies}) == 3
        n_words = len(re.findall(r"[A-Za-z]{2,}", PASSAGE))
        budget = round(0.2 * n_words)
        q = encoder.encode([QUESTION])[0]
        for c in copies:
            assert c.text != PASSAGE and 1 <= c.edited_words <= budget
            assert float(encoder.encode([c.text])[0] @ q) == pytest.approx(c.similarity, abs=1e-4)
        assert [c.fitness for c in copies] == sorted((c.fitness for c in copies), reverse=True)

    def test_deterministic_by_seed(self, encoder) -> None:  # type: ignore[no-untyped-def]
        attack = TypoAttack(encoder, population=8, generations=3)
        a = attack.craft_from(QUESTION, PASSAGE, 2, seed=5)
        assert a == attack.craft_from(QUESTION, PASSAGE, 2, seed=5)
        assert a != attack.craft_from(QUESTION, PASSAGE, 2, seed=6)

    def test_search_improves_on_its_start(self, encoder) -> None:  # type: ignore[no-untyped-def]
        start = TypoAttack(encoder, population=8, generations=0).search(
            QUESTION, PASSAGE, 1, seed=1
        )[0]
        evolved = TypoAttack(encoder, population=8, generations=8).search(
            QUESTION, PASSAGE, 1, seed=1
        )[0]
        assert evolved.fitness >= start.fitness

    def test_answer_words_get_garbled(self, encoder) -> None:  # type: ignore[no-untyped-def]
        """With the right answer given, the fittest copy no longer states it (GARAG's
        reader-side goal), while staying close to the question."""
        attack = TypoAttack(encoder, population=8, generations=8)
        best = attack.search(QUESTION, PASSAGE, 1, seed=0, answers=["Gustave Eiffel"])[0]
        assert not contains_answer(best.text, "Gustave Eiffel")
        q = encoder.encode([QUESTION])[0]
        assert best.similarity > 0.8 * float(encoder.encode([PASSAGE])[0] @ q)

    def test_as_corpus_attack_needs_a_source(self, encoder) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(InputError, match="craft_from"):
            TypoAttack(encoder, population=8).craft(QUESTION, "x", 1)
        out = TypoAttack(encoder, population=8, generations=1, sources={QUESTION: PASSAGE}).craft(
            QUESTION, "x", 1
        )
        assert len(out) == 1 and out[0] != PASSAGE
        assert len(_words(out[0])) == len(_words(PASSAGE))  # typos never merge or split words

    def test_errors(self, encoder) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(InputError, match="'rate' parameter of TypoAttack"):
            TypoAttack(encoder, population=8, rate=0).craft_from(QUESTION, PASSAGE, 1)
        with pytest.raises(InputError, match="no word a typo"):
            TypoAttack(encoder, population=8).craft_from(QUESTION, "12 34 !!", 1)
        assert TypoAttack(encoder, population=8).craft_from(QUESTION, PASSAGE, 0) == []
