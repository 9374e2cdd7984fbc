"""What an index records about itself for its defenses, and handing it to them.

Example::

    profile = profile_index(texts, vectors, encoder)   # `ragshield index`: meta.json "profile"
    calibrate(chain, profile)                           # every pipeline that opens the index
    calibrate_from(defenses, texts, vectors, encoder)   # an evaluation over a planted copy

Why one module: the profile has two parts written by two issues — the nearest-neighbour
statistics (:mod:`ragshield.store.profile`, RAGDefender's density and group bars) and the
injection detector's thresholds on the index's own sentences (issue #23). Before, each
caller computed and handed over the two parts itself, and they disagreed (the ingestion
screen got only the first). A chain holds several filters, each of which may or may not
take either part; one call calibrates whatever is there, and a value the user set wins.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ragshield.store.profile import IndexProfile, profile_vectors, text_statistics

if TYPE_CHECKING:
    import numpy as np

    from ragshield.embed.base import Encoder


def profile_index(
    texts: Sequence[str],
    vectors: np.ndarray,
    encoder: Encoder,
    *,
    trusted_ids: Collection[str] = (),
) -> dict[str, Any] | None:
    """The ``profile`` entry of an index's ``meta.json``: nearest-neighbour statistics of
    ``vectors``, the operator's trusted ids, and the injection thresholds on ``texts``
    (``None`` for an index too small to profile)."""
    from ragshield.defenses.injection.calibration import KEY, calibrate_index

    profile = profile_vectors(vectors)  # what "natural" similarity is in this index
    if profile is None:
        return None
    profile = replace(profile, **text_statistics(texts))
    if trusted_ids:
        profile = replace(profile, trusted_ids=tuple(trusted_ids))
    out = profile.to_dict()
    out[KEY] = calibrate_index(texts, encoder)  # issue #23: the detector's own threshold
    return out


def calibrate(defense: object, profile: IndexProfile | Mapping[str, Any] | None) -> None:
    """Hand an index's profile to every part of ``defense`` that takes one (a filter with a
    ``calibrate(profile)`` or ``calibrate_injection(data)`` method, or a chain of them); a
    value the user set wins. An :class:`IndexProfile` carries no injection part."""
    from ragshield.defenses.injection.calibration import calibrate_injection

    if profile is None:
        return
    nn = profile if isinstance(profile, IndexProfile) else IndexProfile.from_dict(profile)
    for part in getattr(defense, "filters", [defense]):
        hook = getattr(part, "calibrate", None)
        if callable(hook):
            hook(nn)
    if isinstance(profile, Mapping):
        calibrate_injection(defense, profile)


def calibrate_from(
    defenses: Iterable[object], texts: Sequence[str], vectors: np.ndarray, encoder: Encoder
) -> None:
    """For evaluations that build their defenses themselves over a (planted copy of an)
    index: the calibration ``ragshield index`` + :func:`calibrate` would give them. The
    index's sentences are scored only when some filter takes an injection calibration."""
    from ragshield.defenses.injection.calibration import calibrate_defenses

    wanted = [d for d in defenses if d is not None]
    profile = profile_vectors(vectors)
    if profile is not None:
        profile = replace(profile, **text_statistics(texts))
    for defense in wanted:
        calibrate(defense, profile)
    calibrate_defenses(wanted, texts, encoder)
