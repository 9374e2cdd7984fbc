"""The padded meta-epistemic attack (#28, the answer to ``lone_claim_short``): hand-built pages."""

from __future__ import annotations

import re

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
    from ragshield.defenses.ragdefender.provenance import BUILT, unquoted

    later = BUILT.replace(year=2026)
    (page,) = build_attack("meta-epistemic-long").craft_for(TARGET, 1)
    (own,) = build_attack("meta-epistemic-own").craft_for(TARGET, 1)
    got = unquoted([GOLD, page.text, own.text], [BUILT, later, later], [1, 2])
    assert len(got[1].split()) < SHORT_WORDS <= len(got[2].split())


def test_the_named_note_cites_a_made_up_source() -> None:
    from ragshield.attacks.padded import SHORT_RARE

    (note,) = build_attack("meta-epistemic").craft_for(TARGET, 1)
    (t,) = build_attack("meta-epistemic-named").craft_for(TARGET, 1)
    assert t.text.startswith(note.text) and len(t.text.split()) >= SHORT_WORDS
    source = t.text[len(note.text) :]
    names = {w for w in re.findall(r"[A-Z][a-z]+", source)} - set(re.findall(r"\w+", GOLD))
    assert len(names) >= SHORT_RARE  # at least as many invented names as the bar it read
    assert not any(s in source for s in split_sentences(GOLD))  # and nothing of the page
    assert t.family == "meta-epistemic-named"
    assert CoverageParams().short_rare in (0, SHORT_RARE)  # the rule read: off, or this bar


def test_the_made_up_source_is_seeded() -> None:
    attack = build_attack("meta-epistemic-named")
    assert attack.craft_for(TARGET, 1, seed=3) == attack.craft_for(TARGET, 1, seed=3)
    texts = {attack.craft_for(TARGET, 1, seed=s)[0].text for s in range(5)}
    assert len(texts) > 1


def test_the_borrowed_source_takes_its_names_from_the_page() -> None:
    from ragshield.attacks.padded import SHORT_RARE, page_names

    names = page_names(TARGET)
    assert names[:3] == ["Sydney", "Melbourne", "Walter"]  # page order; no sentence start
    assert "Canberra" not in names and "Australia" not in names  # answer, question: out
    (note,) = build_attack("meta-epistemic").craft_for(TARGET, 1)
    (t,) = build_attack("meta-epistemic-borrowed").craft_for(TARGET, 1)
    source = t.text[len(note.text) :]
    assert sum(n in source for n in names) >= SHORT_RARE  # the page's names, enough of them
    assert not any(s in source for s in split_sentences(GOLD))  # in sentences of its own
    assert t.family == "meta-epistemic-borrowed"
