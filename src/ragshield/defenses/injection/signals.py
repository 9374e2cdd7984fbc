"""Signals beside the head: what a planted sentence looks like, whatever its words say.

Example::

    from ragshield.defenses.injection.signals import Signals, signal_flags

    guard = InjectionGuard(encoder=enc, signals=Signals(disguise=False))   # or language_switch=False
    flags, reasons = signal_flags(scored, language_threshold=0.4, disguise_threshold=1)

Why (issue #23, "signals, not signatures"): the head and the rules read what a sentence
*says*; an attacker rewords, translates or respells it until neither recognises it. Two
properties survive any rewording, and a monolingual reference corpus almost never shows
them, so each is thresholded on the index's own sentences like the head (at most 1 % /
0.1 % of them reach it, :mod:`ragshield.defenses.injection.calibration`) and needs no
training data:

* **language switch** (:mod:`ragshield.defenses.injection.language`): a whole sentence in a
  language that is neither the index's nor the rest of its passage's — a translated
  instruction planted in an on-topic paragraph;
* **disguise** (:func:`ragshield.defenses.injection.text.disguised_words`): words holding
  zero-width or other format characters, look-alike letters from another script, or
  leetspeak — spellings that exist to get text past a reader.

A signal flag counts like a rule's: the sentence goes, and with ``hysteresis`` its
neighbours are held to the looser point (the other half of a split instruction). An index
calibrated before these signals existed records no thresholds for them: they stay off until
it is rebuilt (its flag rate was measured without them). No calibration at all (a guard
used without an index): off too — the thresholds are per index by design.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DISGUISE", "LANGUAGE", "SIGNAL", "Signals", "signal_flags"]

#: a decision's reason is ``f"{SIGNAL}:{LANGUAGE}"`` (or ``+``-joined names)
SIGNAL, LANGUAGE, DISGUISE = "injection_signal", "language_switch", "disguise"


@dataclass(frozen=True)
class Signals:
    """The guard's calibrated signals beside the head (module docstring).

    language_switch: flag a sentence in another language than its passage and its index.
    disguise: flag a sentence with more disguised words than the index's own reach.
    language_window: also read each span of this many words of a longer sentence for the
    language switch (``None``: whole sentences only). Used when an index is calibrated and
    recorded there; a guard then reads the index's record (its thresholds hold for it), and
    an index calibrated before the record existed reads whole sentences.
    """

    # issue #23 (brief: "a sentence in another language than the index's own text");
    # SQuAD dev: every translated dev wording >= 1.05 nats/char, the index's own <= 0.82
    language_switch: bool = True
    # issue #23 (brief: "zero-width/confusable characters in an index that has none");
    # SQuAD dev: 4,758 dev-article sentences, see docs/results-injection.md
    disguise: bool = True
    # off (eighth session): spans of 8/12/16 words raised the index's fpr0.1 point from 0.24
    # to 1.34/0.82/0.62 nats/char (foreign names) and caught no more dev translated plants
    # (0.950 -> 0.900/0.950/0.950); see docs/results-injection.md
    language_window: int | None = None


def signal_flags(
    foreign: np.ndarray | None,
    disguised: np.ndarray | None,
    language_threshold: float | None,
    disguise_threshold: float | None,
) -> tuple[np.ndarray, list[str | None]]:
    """``(flags, reasons)`` per sentence: a language switch whose margin reaches
    ``language_threshold`` (a margin must be positive: the sentence reads as another
    language), or a disguised-word count reaching ``disguise_threshold`` (at least one
    word); ``None`` thresholds (not calibrated) flag nothing."""
    n = len(foreign) if foreign is not None else len(disguised) if disguised is not None else 0
    flags = np.zeros(n, dtype=bool)
    reasons: list[str | None] = [None] * n
    if foreign is not None and language_threshold is not None:
        hit = (foreign >= language_threshold) & (foreign > 0)
        for j in np.flatnonzero(hit):
            flags[j], reasons[j] = True, LANGUAGE
    if disguised is not None and disguise_threshold is not None:
        hit = disguised >= max(disguise_threshold, 1.0)
        for j in np.flatnonzero(hit):
            flags[j] = True
            reasons[j] = DISGUISE if reasons[j] is None else f"{reasons[j]}+{DISGUISE}"
    return flags, reasons
