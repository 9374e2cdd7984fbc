"""Passages that state different numbers disagree (:func:`ragshield.defenses.ragdefender.claims.
number_conflicts`, ``numbers_disagree``): the templated pages of a series — seasons, editions —
are close in embedding space and all "about" a question on one of them, but each carries its own
years and scores, so they are neither a paraphrase pair nor a consensus. Generated passages that
push one answer repeat the same numbers and are still caught."""

from __future__ import annotations

import numpy as np
import pytest

from fakes import QuestionEncoder, near_vector, unit_vector
from ragshield.defenses.ragdefender import RAGDefender, trigram_cosine_matrix
from ragshield.defenses.ragdefender.claims import (
    agreeing,
    number_conflicts,
    unsupported_consensus,
)
from ragshield.types import Passage, RetrievedPassage

DIM = 64
Q = "In which year was the club of the 2015 Brumfeld Rovers season founded?"
# pages of one series: each its own season, worded apart (3-gram cosine < 0.6) as real pages are
SERIES = [
    "Brumfeld Rovers spent 2014 in the regional league and finished 3rd on 41 points.",
    "In 2016 the Rovers of Brumfeld reached the cup semi-final; the league gave them 7th place.",
    "The 2017 campaign saw Brumfeld's Rovers leave the league, promoted with 88 goals.",
]
# generated passages pushing one answer (1901), worded apart, no other number
PLANTED = [
    "Brumfeld Rovers were founded in 1901 by railway workers, club records show.",
    "The club behind the Rovers of Brumfeld dates from 1901, when the mill teams merged.",
    "Founded in 1901, Brumfeld's Rovers are among the oldest clubs of the region.",
]
OTHER = "The regional league's clubs play on grass pitches from August to May."


@pytest.mark.parametrize(
    ("a", "b", "conflict"),
    [
        ("The 2014 season ended 3rd.", "The 2016 season ended 7th.", True),  # each its own
        ("Founded in 1901 by workers.", "It dates from 1901.", False),  # the same number
        ("Founded in 1901.", "The club is old.", False),  # one states none: no conflict
        ("Founded in 1901, 40 members.", "Founded in 1901.", False),  # one only adds
        ("The 2015 season, founded 1901.", "The 2015 season, founded 1890.", True),
        ("The 2015 season was fine.", "A 2015 season it was.", False),  # the question's own
    ],
)
def test_number_conflicts(a: str, b: str, conflict: bool) -> None:
    m = number_conflicts([a, b], Q)
    assert m.tolist() == [[False, conflict], [conflict, False]]


@pytest.mark.parametrize(
    ("pairs", "n", "left"),
    [
        ([], 3, [0, 1, 2]),  # no conflict: all stay
        ([(0, 3), (1, 3), (2, 3)], 4, [0, 1, 2]),  # one against all: it goes, the rest agree
        ([(0, 1), (0, 2), (1, 2)], 3, [2]),  # all against all: one page is left
    ],
)
def test_agreeing(pairs: list[tuple[int, int]], n: int, left: list[int]) -> None:
    d = np.zeros((n, n), dtype=bool)
    for i, j in pairs:
        d[i, j] = d[j, i] = True
    assert agreeing(range(n), d) == left


@pytest.mark.parametrize(("use", "members"), [(True, ()), (False, (0, 1, 2))])
def test_series_pages_are_no_consensus(use: bool, members: tuple[int, ...]) -> None:
    """Three season pages share a template word ("league") that the fourth,
    off-topic passage lacks; they state different years, so they do not agree."""
    texts = [*SERIES, "Brumfeld lies in a valley; its mills are closed."]
    echo = np.array([0.85, 0.85, 0.85, 0.3])
    lex = trigram_cosine_matrix(texts)
    disagree = number_conflicts(texts, Q) if use else None
    c = unsupported_consensus(Q, texts, echo, 0.75, 3, lex, 0.8, disagree=disagree)
    assert c.members == members


def test_planted_group_still_agrees() -> None:
    texts = [*PLANTED, OTHER]
    echo = np.array([0.85, 0.85, 0.85, 0.3])
    lex = trigram_cosine_matrix(texts)
    c = unsupported_consensus(
        Q, texts, echo, 0.75, 3, lex, 0.8, disagree=number_conflicts(texts, Q)
    )
    assert c.members == (0, 1, 2) and "1901" in c.words


def _filter(texts: list[str], on: bool) -> list[str]:
    """Run the echo-pair stage alone on passages whose vectors sit at 0.97 to each other
    (paraphrase-close) and whose sentences all echo the question at 0.9."""
    enc = QuestionEncoder(Q, dict.fromkeys(texts[:3], 0.9), DIM)
    base = near_vector(enc.q, 0.8, 5)
    vecs = [near_vector(base, 0.985, 10 + i) for i in range(3)] + [unit_vector(40, DIM)]
    retrieved = [
        RetrievedPassage(Passage(f"p{i}", t), float(v @ enc.q), i, v.astype(np.float32))
        for i, (t, v) in enumerate(zip(texts, vecs, strict=True))
    ]
    d = RAGDefender(enc, numbers_disagree=on, claim_consensus=False, group_knn=False,
                    copy_conflicts=False, typo_view=False, coverage_threshold=101.0,
                    natural_similarity=0.996)  # fmt: skip
    res = d.filter(Q, retrieved)
    return sorted(r.id for r in res.removed)


@pytest.mark.parametrize(
    ("texts", "on", "removed"),
    [
        ([*SERIES, OTHER], True, []),  # a series: no pair, nothing goes
        ([*SERIES, OTHER], False, ["p0", "p1", "p2"]),  # without the rule they were pairs
        ([*PLANTED, OTHER], True, ["p0", "p1", "p2"]),  # one answer's paraphrases still go
    ],
)
def test_echo_pairs_stage(texts: list[str], on: bool, removed: list[str]) -> None:
    assert _filter(texts, on) == removed
