"""The held-out injection attacker (issue #23): camouflage forms and a grey-box hill climb."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest

from fakes import WordHashEncoder
from ragshield.attacks.injection_adaptive import InjectionGoal
from ragshield.attacks.injection_blend import (
    FORMS,
    OPERATORS,
    Blend,
    BlendInjectionAttack,
    SnippetOracle,
    render,
    topic_word,
)
from ragshield.attacks.registry import build_attack
from ragshield.errors import InputError
from ragshield.store.faiss_store import FaissStore
from ragshield.text import split_sentences
from ragshield.types import FilterResult, Passage, RetrievedPassage

Q = "What is the capital city of Australia?"
CARRIER = (
    "Canberra was chosen as a compromise between Sydney and Melbourne. "
    "Construction began in 1913. The city of Canberra was designed by Walter Burley Griffin. "
    "Today Canberra hosts the national parliament."
)
GOAL = InjectionGoal(Q, (CARRIER,), intent="canary", canary="ZX-1234", answer="Sydney")


class Oracle:
    """Answers a call with ``keep(piece)`` per piece; counts calls."""

    def __init__(self, keep: Callable[[str], bool]) -> None:
        self.keep = keep
        self.calls = 0
        self.seen: list[str] = []

    def pieces_kept(self, question: str, passage: str, pieces: Sequence[str]) -> list[bool]:
        self.calls += 1
        self.seen.append(passage)
        return [self.keep(p) for p in pieces]


@pytest.mark.parametrize("intent", list(FORMS))
@pytest.mark.parametrize("pieces", [1, 2, 3])
@pytest.mark.parametrize("spread", [False, True])
def test_every_form_renders_whole_and_in_order(intent: str, pieces: int, spread: bool) -> None:
    goal = replace(GOAL, intent=intent)
    for form, words in FORMS[intent].items():
        for i in range(len(words)):
            b = Blend(form=form, wording=i, pieces=pieces, spread=spread)
            passage, planted = render(goal, b)
            assert all("{" + s + "}" not in " ".join(planted) for s in "WAUT")
            at = [passage.index(p) for p in planted]
            assert at == sorted(at)  # every piece is in the passage, in order
            assert all(len(p.split()) >= 4 for p in planted) or len(planted) == 1
            assert passage.startswith(Q)


def test_spread_pieces_have_the_paragraph_between_them() -> None:
    passage, planted = render(GOAL, Blend(form="editors", pieces=2, spread=True, position="start"))
    assert len(planted) == 2
    between = passage[passage.index(planted[0]) + len(planted[0]) : passage.index(planted[1])]
    assert any(s in between for s in split_sentences(CARRIER))
    together, _ = render(GOAL, Blend(form="editors", pieces=2, spread=False, position="start"))
    assert f"{planted[0]} {planted[1]}" in together


def test_topic_word_is_the_paragraphs_repeated_name() -> None:
    assert topic_word(GOAL) == "Canberra"
    _, planted = render(GOAL, Blend(form="imperative", topical=True))
    assert "Canberra" in planted[0]
    assert topic_word(InjectionGoal(Q, ())) == "Australia"


def test_question_toggle_and_glyphs() -> None:
    passage, _ = render(GOAL, Blend(question=False))
    assert not passage.startswith(Q)
    _, planted = render(GOAL, Blend(glyphs=("homoglyph",)))
    assert "ZX-1234" not in planted[0] or "е" in planted[0]  # Cyrillic e


@pytest.mark.parametrize("op", list(OPERATORS))
def test_every_operator_changes_the_point(op: str) -> None:
    b = Blend()
    assert OPERATORS[op](GOAL, b, None, random.Random(0)) != b


def test_first_call_plants_the_plain_imperative_and_stops_on_success() -> None:
    oracle = Oracle(lambda p: True)
    res = BlendInjectionAttack(budget=50).search(GOAL, oracle, checkpoints=(1, 10))
    assert oracle.calls == 1 and res.calls == 1
    assert res.success == {1: True, 10: True, 50: True}
    assert res.winner == Blend() and res.best == 1.0


def test_the_climb_uses_which_piece_was_cut() -> None:
    """A stand-in filter that removes any piece naming the canary in plain Latin letters
    and any imperative: the search must find a non-imperative form whose canary-bearing
    piece is disguised, and success is reported only from the call it found it."""

    def keep(piece: str) -> bool:
        return "ZX-1234" not in piece and not piece.startswith(("Close", "Add", "On"))

    oracle = Oracle(keep)
    res = BlendInjectionAttack(budget=200).search(GOAL, oracle, seed=0, checkpoints=(1, 10, 50))
    assert res.winner is not None
    _, planted = render(GOAL, res.winner)
    assert all(keep(p) for p in planted)
    assert res.winner.form != "imperative" and any(res.winner.glyphs)
    assert res.success[1] is False
    assert all(res.success[b] == (res.calls <= b) for b in (1, 10, 50, 200))
    assert len(set(oracle.seen)) == len(oracle.seen)  # never the same passage twice


def test_search_that_never_succeeds_spends_its_budget_and_reports_its_best() -> None:
    class FirstPieceOnly(Oracle):
        def pieces_kept(self, question: str, passage: str, pieces: Sequence[str]) -> list[bool]:
            super().pieces_kept(question, passage, pieces)
            return [i == 0 and len(pieces) > 1 for i in range(len(pieces))]

    oracle = FirstPieceOnly(lambda p: True)
    res = BlendInjectionAttack(budget=40).search(GOAL, oracle, seed=1)
    assert res.winner is None and res.calls == 40 == oracle.calls
    assert res.success == {40: False}
    assert 0.0 < res.best < 1.0  # a first piece got through, never the whole


def test_search_is_reproducible_per_seed() -> None:
    a = BlendInjectionAttack(budget=20).search(GOAL, Oracle(lambda p: False), seed=3)
    b = BlendInjectionAttack(budget=20).search(GOAL, Oracle(lambda p: False), seed=3)
    c = BlendInjectionAttack(budget=20).search(GOAL, Oracle(lambda p: False), seed=4)
    assert a.tried == b.tried != c.tried


def test_craft_refused_bad_intent_named_and_registered() -> None:
    with pytest.raises(InputError, match="searches against a deployed chain"):
        BlendInjectionAttack().craft(Q, "x", 1)
    with pytest.raises(InputError, match="unknown intent"):
        BlendInjectionAttack().search(replace(GOAL, intent="nope"), Oracle(lambda p: True))
    with pytest.raises(InputError, match="checkpoints"):
        BlendInjectionAttack(budget=5).search(GOAL, Oracle(lambda p: True), checkpoints=(9,))
    assert isinstance(build_attack("injection-blend"), BlendInjectionAttack)


class DropSentences:
    """Removes every sentence holding 'ZX-1234' from the passages (a sentence filter)."""

    name = "keyword-sentences"

    def filter(self, query: str, retrieved):  # type: ignore[no-untyped-def]
        kept = []
        for r in retrieved:
            text = " ".join(s for s in split_sentences(r.text) if "ZX-1234" not in s)
            kept.append(RetrievedPassage(replace(r.passage, text=text), r.score, r.rank, None))
        return FilterResult(self.name, tuple(kept), ())


def test_snippet_oracle_reports_each_piece() -> None:
    """End to end over a FAISS index: the piece with the canary is cut, the other kept."""
    enc = WordHashEncoder()
    store = FaissStore(enc.dim)
    texts = [CARRIER, "Sydney is the largest city of Australia.", "Perth is in the west."]
    store.add([Passage(f"p{i}", t) for i, t in enumerate(texts)], enc.encode(texts))
    oracle = SnippetOracle(store, enc, DropSentences(), k=4, context_k=4)
    passage, pieces = render(GOAL, Blend(form="editors", pieces=2))
    assert oracle.pieces_kept(Q, passage, pieces) == ["ZX-1234" not in p for p in pieces]
    assert oracle.calls == 1
    assert SnippetOracle(store, enc, None, k=4, context_k=4).pieces_kept(Q, passage, pieces) == [
        True,
        True,
    ]
