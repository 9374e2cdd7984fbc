"""95 % confidence intervals for the rates a scan reports, and which rates have one.

Example::

    from ragshield.eval.intervals import wilson

    lo, hi = wilson(0, 8)       # 0 of 8 attacks reached the context
    print(f"{lo:.3f}-{hi:.3f}")  # 0.000-0.324: eight clean trials do not prove < 0.2

Why Wilson (Wilson 1927, "Probable inference, the law of succession, and statistical
inference", JASA 22:209): a scan measures rates over a handful of questions (8 in the
demo), often 0 or n successes. The normal ("Wald") interval collapses to a width of zero
there, and a bootstrap over 8 zeros does too; Wilson's score interval stays honest at
the edges (0/8 → upper bound 0.324) and needs nothing but the counts. Brown, Cai and
DasGupta 2001 ("Interval Estimation for a Binomial Proportion", Stat. Sci. 16:101)
recommend it for small n.

A rate has an interval when it is a share of questions, each scored 0 or 1
(:data:`BINARY_RATES`): successes = mean × questions it was averaged over. ``benign_removed``
(a mean of per-question shares), ``adv_retrieved`` (a count) and ``filter_ms`` (time) are
not binomial and get none; a gate on them compares the point estimate and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: z for a two-sided 95 % interval.
Z95 = 1.959963984540054
METHOD = "Wilson score, 95 %"
#: Per-question 0/1 metrics of :mod:`ragshield.eval.real_retrieval` (a rate over questions).
BINARY_RATES: frozenset[str] = frozenset(
    {"attack_reaches", "adv_majority", "caught", "gold_retrieved", "gold_kept",
     "answer_kept", "touched", "asr", "accuracy", "crr"}
)  # fmt: skip


@dataclass(frozen=True)
class Rate:
    """A rate with its interval: ``successes`` of ``n``, ``lo``..``hi`` at 95 %."""

    value: float
    successes: int
    n: int
    lo: float
    hi: float

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "value": self.value, "successes": self.successes, "n": self.n,
            "ci_low": self.lo, "ci_high": self.hi, "ci_method": METHOD,
        }  # fmt: skip


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for ``successes`` of ``n`` trials (``n`` > 0)."""
    if n <= 0:
        raise ValueError(f"n must be > 0 for an interval. Got {n} instead.")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..n ({n}). Got {successes} instead.")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    # clamp: the exact bounds at 0 and n are 0 and 1; floating point may miss by 1e-17
    return (0.0 if successes == 0 else max(0.0, centre - half),
            1.0 if successes == n else min(1.0, centre + half))  # fmt: skip


def rate(value: float, n: int) -> Rate | None:
    """The :class:`Rate` of a mean of 0/1 scores over ``n`` questions; ``None`` when
    there is nothing to count (``n`` = 0 or the mean is NaN)."""
    if n <= 0 or value != value:
        return None
    k = min(n, max(0, round(value * n)))
    lo, hi = wilson(k, n)
    return Rate(value, k, n, lo, hi)
