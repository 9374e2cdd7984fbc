"""The answer normaliser and the papers' substring rule, on hand cases."""

from __future__ import annotations

import pytest

from ragshield.text import contains_answer, normalize_answer


@pytest.mark.parametrize(
    ("response", "answer", "expected"),
    [
        ("There are 24 episodes.", "24", True),
        ("It aired in 1924.", "24", False),  # word boundary
        ("The Eiffel Tower, PARIS!", "paris", True),
        ("the Beatles", "The Beatles", True),
        ("I don't know", "no", False),
        ("Yes.", "yes", True),
        ("anything", "", False),
        ("Ｃａｎｂｅｒｒａ is the capital", "Canberra", True),  # NFKC
    ],
)
def test_contains_answer(response: str, answer: str, expected: bool) -> None:
    assert contains_answer(response, answer) is expected


def test_normalize() -> None:
    assert normalize_answer("  The  Quick, brown-fox! ") == "quick brown fox"
