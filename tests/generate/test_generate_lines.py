"""The one first-line rule every newline-stopped generator uses (:mod:`ragshield.generate.lines`)."""

from __future__ import annotations

import pytest

from ragshield.generate.lines import answer_line_ended, first_line


@pytest.mark.parametrize(
    ("text", "ended", "line"),
    [
        ("Canberra", False, "Canberra"),
        ("Canberra\n", True, "Canberra"),
        ("\n\n  Canberra", False, "Canberra"),  # a leading blank line is not an end
        ("\nCanberra\nis the capital", True, "Canberra"),
        ("  ", False, ""),
        ("", False, ""),
    ],
)
def test_first_line_rule(text: str, ended: bool, line: str) -> None:
    assert answer_line_ended(text) is ended
    assert first_line(text) == line
