"""The padded meta-epistemic attack (#28, the answer to ``lone_claim_short``): hand-built pages."""

from __future__ import annotations

import pytest
from test_excerpt_edit import GOLD, TARGET, Q  # the same hand-built page

from ragshield.attacks.adaptive import AttackTarget
from ragshield.attacks.padded import SHORT_WORDS, PaddedMetaEpistemicAttack
from ragshield.attacks.registry import build_attack
from ragshield.defenses.ragdefender.settings import CoverageParams
from ragshield.text import contains_answer, split_sentences


def test_the_bar_is_the_defense_s_short_passage_bar() -> None:
    assert CoverageParams().short_words == SHORT_WORDS  # the rule the attacker read


def test_the_note_is_padded_past_the_bar_with_the_page_s_answer_free_sentences() -> None:
    (note,) = build_attack("meta-epistemic").craft_for(TARGET, 1)
    (t,) = build_attack("meta-epistemic-long").craft_for(TARGET, 1)
    assert t.text.startswith(note.text) and len(note.text.split()) < SHORT_WORDS
    assert len(t.text.split()) >= SHORT_WORDS
    padding = t.text[len(note.text) :]
    assert "Australia is a federation of six states." in padding  # the page's own words
    assert not contains_answer(padding, "Canberra")  # never the right answer
    assert (t.payload, t.label, t.body, t.family) == ("Sydney", "rule", "genuine",
                                                      "meta-epistemic-long")  # fmt: skip


@pytest.mark.parametrize("min_words", [60, 80])
def test_padding_stops_once_the_bar_is_passed(min_words: int) -> None:
    (note,) = build_attack("meta-epistemic").craft_for(TARGET, 1)
    (t,) = PaddedMetaEpistemicAttack(min_words).craft_for(TARGET, 1)
    added = [s for s in split_sentences(GOLD) if s in t.text[len(note.text) :]]
    assert added and len(t.text.split()) >= min_words
    one_fewer = " ".join([note.text, *added[:-1]])
    assert len(one_fewer.split()) < min_words  # no sentence more than it takes


def test_a_note_already_past_the_bar_is_left_alone() -> None:
    (note,) = build_attack("meta-epistemic").craft_for(TARGET, 1)
    (t,) = PaddedMetaEpistemicAttack(10).craft_for(TARGET, 1)
    assert t.text == note.text


def test_without_a_gold_page_it_pads_with_template_bodies() -> None:
    (t,) = build_attack("meta-epistemic-long").craft_for(
        AttackTarget(Q, ("Canberra",), "Sydney"), 1
    )
    assert t.body == "template" and len(t.text.split()) >= SHORT_WORDS
    assert contains_answer(t.text, "Sydney")


def test_nothing_for_zero_passages() -> None:
    assert build_attack("meta-epistemic-long").craft_for(TARGET, 0) == []


def test_the_own_padding_quotes_no_page() -> None:
    (note,) = build_attack("meta-epistemic").craft_for(TARGET, 1)
    (t,) = build_attack("meta-epistemic-own").craft_for(TARGET, 1)
    assert t.text.startswith(note.text) and len(t.text.split()) >= SHORT_WORDS
    padding = t.text[len(note.text) :]
    assert not any(s in padding for s in split_sentences(GOLD))  # none of the page's sentences
    assert contains_answer(padding, "Sydney")  # its own words restate the wrong answer
    assert (t.body, t.family) == ("template", "meta-epistemic-own")


def test_the_own_padding_is_long_after_the_quote_rule() -> None:
    """What the rule counts: every word of the own-padded note is its own, where the page
    padding counts as quoted once the page was built and retrieved beside it."""
    from ragshield.defenses.ragdefender.provenance import BUILT, own_words

    later = BUILT.replace(year=2026)
    (page,) = build_attack("meta-epistemic-long").craft_for(TARGET, 1)
    (own,) = build_attack("meta-epistemic-own").craft_for(TARGET, 1)
    got = own_words([GOLD, page.text, own.text], [BUILT, later, later], [1, 2])
    assert got[1] < SHORT_WORDS <= got[2]
