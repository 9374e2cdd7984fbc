"""The facet-spread attack (#28, the answer to ``consensus_added_alike``): hand-built pages."""

from __future__ import annotations

import dataclasses

import pytest
from test_excerpt_edit import GOLD, TARGET  # the same hand-built page

from ragshield.attacks.adaptive import AttackTarget
from ragshield.attacks.registry import build_attack
from ragshield.errors import InputError
from ragshield.text import contains_answer, split_sentences


def test_each_passage_carries_a_different_part_of_the_page_and_the_wrong_answer() -> None:
    texts = build_attack("facet-spread").craft_for(TARGET, 3)
    assert len(texts) == 3 and len({t.text for t in texts}) == 3
    page = [s.strip() for s in split_sentences(GOLD)]
    facets = [[s for s in page if s in t.text] for t in texts]
    assert all(len(f) == 1 for f in facets)  # one facet each ...
    assert len({f[0] for f in facets}) == 3  # ... and never the same one twice
    for t in texts:
        assert contains_answer(t.text, t.payload) and contains_answer(t.payload, "Sydney")
        assert not contains_answer(t.text, "Canberra")  # the page's answer sentence stays out
        assert (t.label, t.body, t.family) == ("rule", "genuine", "facet-spread")


def test_without_a_page_the_bodies_fill_in() -> None:
    bare = dataclasses.replace(TARGET, gold="")
    texts = build_attack("facet-spread").craft_for(bare, 5)
    assert len(texts) == 5 and {t.body for t in texts} == {"template"}
    assert all(contains_answer(t.text, t.payload) for t in texts)


def test_seeded() -> None:
    a = build_attack("facet-spread")
    assert a.craft_for(TARGET, 3, seed=1) == a.craft_for(TARGET, 3, seed=1)
    assert a.craft_for(TARGET, 0) == []


def test_bad_input_is_refused() -> None:
    with pytest.raises(InputError):
        build_attack("facet-spread").craft_for(TARGET, -1)
    with pytest.raises(InputError):
        build_attack("facet-spread").craft_for(AttackTarget("", ("a",), "b"), 1)
