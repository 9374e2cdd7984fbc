"""errors.check_names: the one check for an attacker's list-of-names parameters."""

from __future__ import annotations

import pytest

from ragshield.errors import InputError, check_names


@pytest.mark.parametrize("value", ["translate", [], (), None, 5])
def test_not_a_non_empty_list_is_refused(value: object) -> None:
    with pytest.raises(InputError, match="'operators' parameter of A must be a non-empty list"):
        check_names(value, "operators", "A", what="operator names")


def test_unknown_names_are_named_with_what_is_available() -> None:
    with pytest.raises(InputError, match=r"unknown operators \['nope'\] for A; available: x, y"):
        check_names(["x", "nope"], "operators", "A", what="operator names", known=("x", "y"))
    check_names(["y"], "operators", "A", what="operator names", known=("x", "y"))
    check_names(["anything"], "families", "A", what="attack names")  # no list to check against
