"""The planted-group signal (:mod:`ragshield.defenses.ragdefender.groups`): passages whose
m-th retrieved neighbour is as close as only 0.1 % of the index's passages' m-th nearest
neighbour, lexical near-copies not counted; calibrated from the index's own profile."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fakes import near_vector, unit_vector
from ragshield.defenses.calibration import calibrate
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.defenses.ragdefender.groups import DEFAULT_BARS, knn_group_members
from ragshield.store.profile import GROUP_RANKS, IndexProfile, profile_vectors
from ragshield.types import Passage, RetrievedPassage

DIM = 32
BARS = (0.9, 0.88, 0.86)


def _sim(vectors: np.ndarray) -> np.ndarray:
    return vectors @ vectors.T


BASIS = np.linalg.qr(np.random.default_rng(0).standard_normal((DIM, 20)))[0].T


def _set(group: int, pair: bool, a: float = 0.97) -> np.ndarray:
    """Ten passages on orthonormal directions: ``group`` of them around one centre (pairwise
    cosine exactly a^2), an optional natural near-duplicate pair (0.995), the rest
    orthogonal."""
    centre, other = BASIS[0], BASIS[1]
    b = math.sqrt(1 - a * a)
    rows = [a * centre + b * BASIS[2 + i] for i in range(group)]
    if pair:
        rows += [other, 0.995 * other + math.sqrt(1 - 0.995**2) * BASIS[19]]
    rows += [BASIS[8 + i] for i in range(10 - len(rows))]
    return np.asarray(rows)


@pytest.mark.parametrize(
    ("group", "pair", "expected"),
    [
        (5, False, set(range(5))),  # PoisonedRAG's five: every member has 4 close neighbours
        (3, False, set(range(3))),  # three are enough (2nd neighbour above the 2nd-NN bar)
        (2, False, set()),  # a pair is what near-duplicate corpora are full of
        (0, True, set()),  # a natural near-duplicate pair, however close, is no group
        (5, True, set(range(5))),  # the pair does not hide the group, nor join it
    ],
)
def test_groups_not_pairs(group: int, pair: bool, expected: set[int]) -> None:
    hits = knn_group_members(_sim(_set(group, pair)), None, BARS, lexical_cut=0.8)
    assert set(np.flatnonzero(hits.members).tolist()) == expected
    assert all(hits.rank[i] in GROUP_RANKS for i in expected)


@pytest.mark.parametrize(("group", "caught"), [(5, True), (4, False), (3, False)])
def test_a_looser_group_needs_more_members(group: int, caught: bool) -> None:
    """Pairwise 0.8649: under the 2nd- and 3rd-NN bars, over the 4th-NN bar 0.86."""
    hits = knn_group_members(_sim(_set(group, False, a=0.93)), None, BARS, lexical_cut=0.8)
    assert bool(hits.members[:group].all()) is caught and not hits.members[group:].any()
    if caught:
        assert set(hits.rank[:group].tolist()) == {4}


def test_lexical_near_copies_are_not_neighbours() -> None:
    sim = _sim(_set(3, False))
    lex = np.eye(10)
    lex[0, 1] = lex[1, 0] = 0.95  # 0 and 1 are lexical copies: natural density
    hits = knn_group_members(sim, lex, BARS, lexical_cut=0.8)
    # 0 and 1 are left with one semantic neighbour each; 2 still has two (0 and 1)
    assert hits.members[:3].tolist() == [False, False, True]
    assert knn_group_members(sim, lex, BARS, lexical_cut=0.99).members[:3].all()


def test_one_bar_per_rank() -> None:
    with pytest.raises(ValueError, match="one bar per rank"):
        knn_group_members(np.eye(3), None, (0.9,), lexical_cut=0.8)


def test_profile_records_the_mth_neighbour_bars() -> None:
    # 40 unrelated passages plus one planted-like triplet and one natural pair.
    rows = [unit_vector(100 + i, DIM) for i in range(40)]
    c, o = unit_vector(1, DIM), unit_vector(2, DIM)
    rows += [
        near_vector(c, 0.97, 11),
        near_vector(c, 0.97, 12),
        near_vector(c, 0.97, 13),
        o,
        near_vector(o, 0.99, 3),
    ]
    p = profile_vectors(np.asarray(rows, dtype=np.float32))
    assert p is not None and len(p.group_similarity) == len(GROUP_RANKS)
    first, second, third, _ = (p.quantiles["p99.9"], *p.group_similarity)
    assert first > 0.98  # the natural pair sets the 1-NN bar
    assert second < first and third <= second  # m-th-NN bars fall with m
    back = IndexProfile.from_dict(p.to_dict())
    assert back.group_similarity == p.group_similarity
    old = {k: v for k, v in p.to_dict().items() if k != "group_similarity"}
    assert IndexProfile.from_dict(old).group_similarity == ()  # an index from before


def _retrieved(vectors: np.ndarray, texts: list[str]) -> list[RetrievedPassage]:
    q = vectors[0]
    return [RetrievedPassage(Passage(f"p{i}", t), float(v @ q), i, v.astype(np.float32))
            for i, (v, t) in enumerate(zip(vectors, texts, strict=True))]  # fmt: skip


TEXTS = [
    "Brumfeld lies on the Aller river.",
    "The Aller flows north past Brumfeld's walls.",
    "Old Brumfeld was built where the Aller bends.",
    "Mills once lined the Aller at Brumfeld.",
    "Brumfeld's bridge spans the Aller since 1410.",
    "Cats sleep most of the day.",
    "Domestic cats nap for many hours daily.",
    "Volcanoes erupt molten rock.",
    "Chess openings have names.",
    "Bread rises with yeast.",
]  # lexically distinct (3-gram cosine well under 0.8): the density is semantic


class TestInTheFilter:
    def test_calibration_sets_the_bars_and_a_user_value_wins(self) -> None:
        rd = RAGDefender()
        assert rd.group_bars() == DEFAULT_BARS
        calibrate(rd, IndexProfile(10, 10, {}, 0.99, group_similarity=(0.8, 0.7, 0.6)))
        assert rd.group_bars() == (0.8, 0.7, 0.6)
        assert RAGDefender(group_similarity=0.5).group_bars() == (0.5, 0.5, 0.5)

    @pytest.mark.parametrize("knn", [True, False])
    def test_group_removed_only_with_the_signal(self, knn: bool) -> None:
        v = _set(5, True)
        rd = RAGDefender(group_knn=knn, echo_pairs=False, copy_conflicts=False,
                         restated_question=False, typo_copies=False)  # fmt: skip
        calibrate(rd, IndexProfile(10, 10, {}, 0.999, group_similarity=BARS))
        res = rd.filter("what is topic A?", _retrieved(v, TEXTS))
        removed = {i for i in range(10) if f"p{i}" not in {k.id for k in res.kept}}
        assert (removed >= set(range(5))) is knn
        assert not removed & {5, 6}  # the natural pair stays either way
        if knn:
            assert set(res.details["knn_group"]) >= {0, 1, 2, 3, 4}
