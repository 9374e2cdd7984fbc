"""Group density against the index's own m-th nearest neighbour: the planted *group*.

Example::

    from ragshield.defenses.ragdefender.groups import knn_group_members

    hits = knn_group_members(sim, lex, bars=(0.968, 0.954, 0.944), lexical_cut=0.8)
    hits.members            # passages with m others at least as close as the index's bar

Why: a poisoning attack that must beat the golden passage in retrieval plants *several*
passages (PoisonedRAG: N = 5) that all say the same thing about the same question, so each
of them has two, three, four retrieved neighbours that are very close. A natural passage
rarely does: its m-th nearest neighbour *in the whole index* bounds its m-th nearest
neighbour among the retrieved passages (a subset), and the index's p99.9 of that statistic
is recorded at index time (:func:`ragshield.store.profile.profile_vectors`). So a
benign passage is flagged at most as often as 0.1 % of the index's passages per rank,
whatever the wording of the planted texts; the attacker's wording does not enter.

The 1-NN bar (``natural_similarity``) is broken by near-duplicate corpora (HotpotQA 0.996:
mirrors come in pairs); the 2nd-4th-NN bars are lower (HotpotQA 0.968 / 0.954 / 0.944).
Lexical near-copies (character 3-gram cosine >= ``lexical_cut``) are not counted as
neighbours: that is the natural kind of density (an edited copy of a genuine paragraph,
versions, mirrors), and counting it flagged the genuine original of every edited copy
(SQuAD dev answer-spread: benign flagged 0.209 -> 0.004 at 0.8). Lexical copies are the
typo-copy and near-copy-conflict stages' job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragshield.store.profile import GROUP_RANKS

#: Bars when the index was not profiled: the HotpotQA on-topic index's p99.9 of the 2nd /
#: 3rd / 4th-NN cosine under MiniLM, the densest corpus measured (SQuAD: 0.843 / 0.819 /
#: 0.807), so an uncalibrated filter errs towards keeping.
DEFAULT_BARS: tuple[float, ...] = (0.968, 0.954, 0.944)


@dataclass(frozen=True)
class GroupHits:
    """Which passages carry the group evidence, and at which rank (0 = none)."""

    members: np.ndarray  # bool per passage
    rank: np.ndarray  # the smallest m whose bar the passage reached, 0 if none
    kth: np.ndarray  # (n, len(ranks)) m-th neighbour cosine among the retrieved


def knn_group_members(
    sim: np.ndarray,
    lex: np.ndarray | None,
    bars: Sequence[float],
    lexical_cut: float,
    ranks: Sequence[int] = GROUP_RANKS,
) -> GroupHits:
    """Flag passage ``i`` when, for some ``m`` in ``ranks``, its ``m``-th most similar
    *other* retrieved passage (lexical near-copies excluded) is at least ``bars[m]``."""
    n = sim.shape[0]
    if len(bars) != len(ranks):
        raise ValueError(f"need one bar per rank {tuple(ranks)}, got {tuple(bars)}")
    s = np.array(sim, dtype=np.float64, copy=True)
    if lex is not None:
        s[np.asarray(lex) >= lexical_cut] = -np.inf
    np.fill_diagonal(s, -np.inf)
    srt = -np.sort(-s, axis=1) if n else s
    kth = np.full((n, len(ranks)), -np.inf)
    rank = np.zeros(n, dtype=np.int64)
    for col, (m, bar) in enumerate(zip(ranks, bars, strict=True)):
        if n <= m:
            continue
        kth[:, col] = srt[:, m - 1]
        hit = (kth[:, col] >= bar) & (rank == 0)
        rank[hit] = m
    return GroupHits(rank > 0, rank, kth)
