"""Per-index calibration of the injection detector: the index's own sentences are the
benign reference.

Example::

    from ragshield.defenses.injection.calibration import calibrate_index, calibrate_injection

    data = calibrate_index(passage_texts, encoder)       # once, when the index is built
    store.profile["injection"] = data                    # meta.json -> profile.injection
    calibrate_injection(chain, store.profile)            # every pipeline opening the index

Why: a classifier's score on benign text depends on the corpus. Prompt Guard 2 caught 1 %
of injections buried in tool output at its default threshold and 97–100 % once the
threshold was recalibrated on the target domain's benign traffic (PEERS.md, "Adaptive
attackers"). The sentences a user indexes are, by the user's own account, reference text:
the threshold is set so that at most 1 % (``fpr1``) and 0.1 % (``fpr0.1``) of them would be
flagged by the classifier, measured with the same statistic the filter uses (the max of
a sentence's own and window scores, :func:`ragshield.defenses.injection.detector.window_scores`).

Bounded cost: a seeded sample of passages is read until ``sample`` sentences are scored
(5,000 by default: ~30 s on one core; at 0.1 % that leaves 5 sentences above the
threshold, so the 0.1 % point is coarse on small indexes and says how many it rests on).
The share of sampled sentences the deterministic rules flag is recorded too (a rule is not
calibrated: a high share means the corpus legitimately holds such markup, e.g. chat logs).

Caveat: an index that is already poisoned when it is built counts the poison as benign
(its one or few sentences move a 1 % quantile very little; say so when it matters).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragshield.defenses.injection import language as lang_id
from ragshield.defenses.injection.detector import OPERATING_POINTS, InjectionGuard
from ragshield.defenses.injection.features import ADDRESSED_VERSION
from ragshield.defenses.injection.head import InjectionHead
from ragshield.defenses.injection.scoring import NEIGHBOUR_POINTS
from ragshield.defenses.injection.signals import Signals
from ragshield.embed.base import Encoder
from ragshield.errors import InputError

__all__ = ["calibrate_defenses", "calibrate_index", "calibrate_injection", "thresholds_for"]

log = logging.getLogger(__name__)
KEY = "injection"  # the profile entry in meta.json
LANGUAGE_SAMPLE = 2000  # passages read for the index's languages (~1 ms each on one core)


def thresholds_for(scores: np.ndarray, cap: float = 1.0) -> dict[str, float]:
    """The smallest threshold per operating point such that ``mean(scores >= t) <= fpr``
    (at most ``cap``: the head's scores are probabilities; the signals' are not)."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    if s.size == 0:
        raise InputError("cannot calibrate the injection detector on zero sentences")
    return {name: _share_point(s, fpr, cap) for name, fpr in OPERATING_POINTS.items()}


def calibrate_index(
    texts: Sequence[str],
    encoder: Encoder,
    *,
    head: InjectionHead | str | None = None,
    sample: int = 5000,
    seed: int = 0,
    window_text: bool | None = None,
    signals: Signals | None = None,
) -> dict[str, Any] | None:
    """Score (a seeded sample of) the index's sentences; ``None`` for fewer than 20
    sentences (too few to calibrate anything: the head's default threshold applies) or an
    encoder whose vectors the head cannot read (another dimension). ``window_text``: how
    the guards that read this calibration score windows (``None``: the guard's default);
    recorded, since the thresholds hold for that scoring only; likewise ``signals``' span
    width for the language switch (``None``: the guard's default)."""
    if isinstance(texts, str):
        raise InputError("calibrate_index expects a list of texts, got a bare string.")
    guard = InjectionGuard(
        encoder=encoder, head=head if isinstance(head, str) else None, cache_size=0,
        signals=signals,
    )  # fmt: skip
    if window_text is not None:
        guard.windows = "text" if window_text else True
    if isinstance(head, InjectionHead):
        guard._head = head
    if guard.head_().vector_dim != encoder.dim:
        return None  # another encoder: the head cannot score its vectors (rules still apply)
    order = np.random.default_rng(seed).permutation(len(texts))
    langs: dict[str, float] | None = None
    if lang_id.available():  # the index's own languages, from (a sample of) its passages
        langs = lang_id.index_languages(texts[int(i)] for i in order[:LANGUAGE_SAMPLE])
        guard._languages = tuple(sorted(langs))
    else:  # said once, at index time: a signal that is off must not be off silently
        log.warning(
            "injection calibration: py3langid is not installed, so the language-switch "
            'signal stays off for this index (pip install "ragshield[injection]", then reindex)'
        )
    scores: list[np.ndarray] = []
    owns: list[np.ndarray] = []
    foreign: list[np.ndarray] = []
    disguised: list[np.ndarray] = []
    ruled = n = 0
    for start in range(0, len(order), 256):
        batch = [guard._clip(texts[int(i)])[0] for i in order[start : start + 256]]
        for sc in guard.score_texts(batch):
            scores.append(sc.scores)
            owns.append(sc.own)
            if sc.foreign is not None:
                foreign.append(sc.foreign)
            if sc.disguised is not None:
                disguised.append(sc.disguised)
            ruled += sum(bool(h) for h in sc.rules)
            n += len(sc.sentences)
        if n >= sample:
            break
    if n < 20:
        return None
    allv = np.concatenate(scores)
    return {
        "thresholds": thresholds_for(allv),
        "sentences": int(n),
        "passages_read": int(min(len(order), start + 256)),
        "passages": len(texts),
        "rules_flagged": float(ruled / n),
        # which head the thresholds hold for: a guard with another head refuses them
        "head": guard.head_().ident,
        "addressed_version": ADDRESSED_VERSION,
        "encoder": str(getattr(encoder, "name", "")),
        "mention_discount": guard.discount_(),
        "window_text": guard.window_text_(),
        "offtopic_boost": guard.boost_(),
        "seed": seed,
        # hysteresis's looser point: the own score 5 % of the index's sentences reach
        "neighbour_threshold": _share_point(
            np.sort(np.concatenate(owns)), NEIGHBOUR_POINTS["fpr5"]
        ),
        **_signal_calibration(langs, foreign, disguised),
        **({"language_window": guard.language_window_()} if langs is not None else {}),
    }  # fmt: skip


def _share_point(s: np.ndarray, share: float, cap: float = 1.0) -> float:
    """The smallest threshold (at most ``cap``) that at most ``share`` of the scores ``s``
    reach; ``s`` is sorted ascending (callers sort once for every point they read)."""
    allowed = int(np.floor(share * s.size))  # scores that may stay at or above t
    top = s[s.size - allowed - 1]  # the highest score that must fall below t
    return float(min(cap, np.nextafter(top, np.inf)))


def _signal_calibration(
    langs: Mapping[str, float] | None, foreign: list[np.ndarray], disguised: list[np.ndarray]
) -> dict[str, Any]:
    """The signals' per-index thresholds (:mod:`ragshield.defenses.injection.signals`), on
    the same sentences as the head's: the language-switch margin (floored at 0: a sentence
    must read as another language) and the disguised-word count (at least one word; counts
    are whole numbers, so a threshold between two is the next one up)."""
    out: dict[str, Any] = {}
    if langs is not None and foreign:
        out["languages"] = {k: round(v, 4) for k, v in langs.items()}
        t = thresholds_for(np.concatenate(foreign), cap=np.inf)
        out["language_thresholds"] = {k: max(0.0, v) for k, v in t.items()}
    if disguised:
        d = np.concatenate(disguised)
        t = thresholds_for(d, cap=np.inf)
        out["disguise_thresholds"] = {k: float(max(1.0, np.ceil(v))) for k, v in t.items()}
        out["disguised_share"] = float(np.mean(d > 0))
    return out


def calibrate_injection(defense: object, profile: Mapping[str, Any] | None) -> None:
    """Hand the index's injection calibration to every part of ``defense`` that takes one
    (a filter with ``calibrate_injection``, or a chain of them); an explicit threshold the
    user set still wins (the filter reads it first)."""
    if not isinstance(profile, Mapping) or not isinstance(profile.get(KEY), Mapping):
        return
    for part in getattr(defense, "filters", [defense]):
        hook = getattr(part, "calibrate_injection", None)
        if callable(hook):
            hook(profile[KEY])


def calibrate_defenses(defenses: Iterable[object], texts: Sequence[str], encoder: Encoder) -> None:
    """For evaluations that build their defenses themselves (scan, eval retrieval): score
    the index's sentences once, only when some defense takes an injection calibration."""
    parts = [
        p
        for d in defenses
        if d is not None
        for p in getattr(d, "filters", [d])
        if callable(getattr(p, "calibrate_injection", None))
    ]
    if not parts:
        return
    data = calibrate_index(texts, encoder)
    if data is not None:
        for p in parts:
            p.calibrate_injection(data)
