"""The claim test of the ``lone_claim`` stage (``claims.lone_claims``): a candidate's words
that no witness uses; a planted sibling that is no witness and a lexical near-copy do not
back a claim. The stage itself is pinned in ``test_ragdefender_lone.py``."""

from __future__ import annotations

import numpy as np
import pytest

from ragshield.defenses.ragdefender.claims import lone_claims


@pytest.mark.parametrize(
    ("words", "candidates", "lex", "witnesses", "expected"),
    [
        # the candidate's own word nobody else uses: a claim
        ([{"vessel", "mills"}, {"olm", "mills"}], [True, False], 0.0, None, {0: ("vessel",)}),
        # a witness says it too: no claim
        ([{"vessel"}, {"vessel", "olm"}], [True, False], 0.0, None, {}),
        # the one who says it too is no witness (a planted sibling): still a claim
        ([{"vessel"}, {"vessel", "olm"}], [True, False], 0.0, [False, False], {0: ("vessel",)}),
        # a lexical near-copy repeating it is no witness
        ([{"vessel"}, {"vessel", "olm"}], [True, False], 0.95, None, {0: ("vessel",)}),
        # not a candidate: never reported
        ([{"vessel"}, {"olm"}], [False, False], 0.0, None, {}),
    ],
)
def test_lone_claims(
    words: list[set[str]], candidates: list[bool], lex: float,
    witnesses: list[bool] | None, expected: dict[int, tuple[str, ...]],
) -> None:  # fmt: skip
    m = np.full((len(words), len(words)), lex)
    np.fill_diagonal(m, 1.0)
    w = None if witnesses is None else np.array(witnesses)
    got = lone_claims([frozenset(x) for x in words], np.array(candidates), m, 0.8, w)
    assert got == expected
