"""The math of RAGFort's cascade (§4.3, Eq. 5 and Algorithm 1) as pure numpy functions.

Kept apart from the models so every step can be checked on toy distributions: the
target distribution π, the rejection rule r̂, the Bernoulli acceptance min(1, π/q) and the
residual norm(max(0, π − q)) together guarantee that each emitted token is distributed as
π (speculative sampling, Leviathan et al. 2023; Narasimhan et al. 2024). With draft ==
reference, π is the reference's own distribution, which the tests pin.

Example::

    import numpy as np
    from ragshield.generate import cascade_math as cm
    q, p = np.array([0.7, 0.2, 0.1]), np.array([0.4, 0.4, 0.2])
    r = cm.rejection_rule(q, p, q_z=0.0, p_z=0.0, alpha=0.5, eta=1.0)
    pi = cm.target_distribution(q, p, r)
    assert np.allclose(cm.emitted_distribution(q, pi), pi)

Conventions: distributions are 1-D float arrays over the full vocabulary (or 2-D, one row
per position, where stated); nothing here draws random numbers unless handed a
``numpy.random.Generator``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_TINY = 1e-300


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Row-wise softmax in float64 (a 152k-token vocabulary loses mass in float32)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0. Got {temperature!r} instead.")
    z = np.asarray(logits, dtype=np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return out


def total_variation(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """D_TV(p, q) = ½ Σ_y |p(y) − q(y)| along the last axis (Eq. 2–5)."""
    return np.asarray(0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(axis=-1))


def copy_ratio(q_z: float, p_z: float, eps: float = 1e-12) -> float:
    """q_t(z) / p_t(z) of Eq. 5, with 0/0 := 0.

    Both masses are 0 when no continuation of a retrieved chunk is possible at this
    position; the η term then vanishes and Eq. 5 reduces to the confidence comparison.
    A reference that gives the chunk (almost) no mass while the draft does makes the ratio
    large, which forces a fall-back to the reference: that is the rule's intent.
    """
    if q_z <= 0.0:
        return 0.0
    return float(q_z / max(p_z, eps))


def rejection_rule(
    q: np.ndarray, p: np.ndarray, q_z: float, p_z: float, alpha: float, eta: float
) -> int:
    """Eq. 5: r̂ = 1 iff max_y q(y) < max_y p(y) − α·D_TV(p, q) + η·q(z)/p(z).

    r̂ = 1 means "defer to the reference": the reference is sufficiently more confident
    than the draft (confidence stands in for the unknown expected loss of Lemma 1), or the
    draft is markedly more eager than the reference to continue a retrieved chunk.
    """
    lhs = float(np.max(q))
    rhs = float(np.max(p)) - alpha * float(total_variation(p, q)) + eta * copy_ratio(q_z, p_z)
    return int(lhs < rhs)


def target_distribution(q: np.ndarray, p: np.ndarray, r: int | np.ndarray) -> np.ndarray:
    """π = (1 − r)·q + r·p (§4.3); ``r`` may be a vector of per-row decisions."""
    r_arr = np.asarray(r, dtype=np.float64)
    if r_arr.ndim == 1:
        r_arr = r_arr[:, None]
    return np.asarray((1.0 - r_arr) * np.asarray(q) + r_arr * np.asarray(p))


def acceptance_probability(pi: np.ndarray, q: np.ndarray, token: int) -> float:
    """min(1, π(x)/q(x)) for the draft's token x (Algorithm 1, line 14, with π = p when r = 1).

    For r = 0, π = q and the token is always accepted, which is why Algorithm 1 skips the
    Bernoulli draw there.
    """
    qx = float(q[token])
    if qx <= 0.0:
        return 1.0 if float(pi[token]) > 0.0 else 0.0
    return min(1.0, float(pi[token]) / qx)


def residual_distribution(pi: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, π − q)): where to sample after a rejection (Algorithm 1, line 20).

    When π == q nothing can be rejected, so the residual is never used; π itself is
    returned instead of dividing by zero.
    """
    diff = np.maximum(0.0, np.asarray(pi, dtype=np.float64) - np.asarray(q, dtype=np.float64))
    total = diff.sum()
    if total <= _TINY:
        return np.asarray(pi, dtype=np.float64)
    out: np.ndarray = diff / total
    return out


def emitted_distribution(q: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Exact law of the token emitted at one position when the draft samples from q.

    P(x) = q(x)·min(1, π(x)/q(x)) + (1 − Σ_y q(y)·min(1, π(y)/q(y)))·residual(x). It equals
    π whenever q > 0 wherever π > 0 — the guarantee Algorithm 1 relies on; exposed so the
    tests check it rather than trusting it.
    """
    q = np.asarray(q, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    ratio = np.divide(pi, q, out=np.ones_like(q), where=q > 0)
    accept = q * np.minimum(1.0, ratio)
    out: np.ndarray = accept + (1.0 - accept.sum()) * residual_distribution(pi, q)
    return out


@dataclass(frozen=True)
class BlockVerdict:
    """Outcome of verifying one draft block.

    ``n_accepted`` (j*) draft tokens are kept; ``next_distribution`` is what the next token
    is drawn from: the residual at j* after a rejection, else π at the bonus position.
    """

    n_accepted: int
    next_distribution: np.ndarray
    rejected: bool


def verify_block(
    draft_tokens: Sequence[int],
    q: np.ndarray,
    pi: np.ndarray,
    rng: np.random.Generator | None,
) -> BlockVerdict:
    """Algorithm 1, lines 9–23: find the first rejected position j* and the next-token law.

    ``q`` has one row per draft token (γ rows); ``pi`` has γ + 1 rows (the last is the
    bonus position after the whole block). With ``rng=None`` the check is greedy: a draft
    token is kept iff it is argmax π at its position (automatic when r = 0, since then
    π = q and the draft chose argmax q), and a rejection takes argmax π — greedy decoding
    under π, the one-hot limit of the sampling rule.
    """
    g = len(draft_tokens)
    if q.shape[0] != g or pi.shape[0] != g + 1:
        raise ValueError(
            f"verify_block needs {g} draft rows and {g + 1} target rows; got "
            f"{q.shape[0]} and {pi.shape[0]}."
        )
    for j, x in enumerate(draft_tokens):
        if rng is None:
            ok = int(np.argmax(pi[j])) == int(x)
        else:
            a = acceptance_probability(pi[j], q[j], int(x))
            ok = a >= 1.0 or bool(rng.random() < a)
        if not ok:
            return BlockVerdict(j, residual_distribution(pi[j], q[j]), True)
    return BlockVerdict(g, np.asarray(pi[g], dtype=np.float64), False)


def draw(dist: np.ndarray, rng: np.random.Generator | None) -> int:
    """Sample a token id (inverse CDF, one uniform draw) or take argmax when ``rng`` is None."""
    if rng is None:
        return int(np.argmax(dist))
    cdf = np.cumsum(np.asarray(dist, dtype=np.float64))
    u = rng.random() * cdf[-1]
    return int(min(np.searchsorted(cdf, u, side="right"), len(cdf) - 1))
