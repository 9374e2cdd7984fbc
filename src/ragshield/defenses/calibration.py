"""Hand the index profile (:mod:`ragshield.store.profile`) to the defenses that read it.

Why a function of its own: a chain holds several filters, each of which may or may not
take a profile; one call calibrates whatever is there, and a value the user set wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragshield.store.profile import IndexProfile


def calibrate(defense: object, profile: IndexProfile | Mapping[str, Any] | None) -> None:
    """Hand an index's profile to every part of ``defense`` that takes one (a filter with a
    ``calibrate(profile)`` method, or a chain of them); a value the user set wins."""
    if profile is None:
        return
    if not isinstance(profile, IndexProfile):
        profile = IndexProfile.from_dict(profile)
    for part in getattr(defense, "filters", [defense]):
        hook = getattr(part, "calibrate", None)
        if callable(hook):
            hook(profile)
