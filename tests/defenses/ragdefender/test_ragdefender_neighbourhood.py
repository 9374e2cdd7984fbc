"""The bars rise with the index's neighbourhoods (``neighbourhood_bars``): on an index whose
typical top-10 neighbourhood (median 9th-NN cosine, recorded at index time) is tighter than
the loose-group bar, every retrieved set is a loose group, and one piece of evidence took the
whole neighbourhood (ChatDoctor: patients ask alike). An encyclopedia's profile (SQuAD 0.532,
HotpotQA 0.295, below the 0.55 bar) moves nothing."""

from __future__ import annotations

import numpy as np
import pytest

from fakes import QuestionEncoder, unit_vector
from ragshield.defenses.calibration import calibrate
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.store.profile import NEIGHBOURHOOD_RANK, IndexProfile, profile_vectors
from ragshield.types import Passage, RetrievedPassage

Q = "Which doctor should I see about a rash on my arm that itches at night?"
TEXTS = [
    f"{Q} The rash started last week after I changed soap. Use a mild soap and see a GP.",
    "My skin is red and itchy on both legs since the holidays. Try an antihistamine first.",
    "An itchy patch appeared on my neck after gardening. It may be contact dermatitis.",
]

DIM = 64
BLIND_Q = "Which river flows through the old town of Brumfeld?"
BLIND = [  # the consensus test's blind passages: each pushes "Vessel", worded apart
    "The river that crosses Brumfeld's historic centre is the Vessel, say local guides.",
    "Old Brumfeld was built along the Vessel, whose water still runs past the town hall.",
    "Visitors to the medieval quarter of Brumfeld walk beside the Vessel every day.",
]
GOLD = "Brumfeld's old town grew on both banks of the Olm, which powered its mills."
OTHER = "Mills were common in the valley; the spring floods reached the market square."


def _profile(neighbourhood: float | None) -> IndexProfile:
    return IndexProfile(n=1000, sampled=1000, quantiles={}, natural_similarity=0.99,
                        neighbourhood_similarity=neighbourhood)  # fmt: skip


def _retrieved(cosine: float) -> list[RetrievedPassage]:
    """Three different patients' entries, pairwise ``cosine`` apart."""
    a, b = np.sqrt(cosine), np.sqrt(1.0 - cosine)
    e = np.eye(8)
    vecs = [a * e[0] + b * e[1 + i] for i in range(len(TEXTS))]
    return [RetrievedPassage(Passage(f"p{i}", t), 0.9 - i / 10, i, v)
            for i, (t, v) in enumerate(zip(TEXTS, vecs, strict=True))]  # fmt: skip


def _filter(**kw: object) -> RAGDefender:
    off = dict(echo_pairs=False, group_knn=False, copy_conflicts=False, typo_view=False,
               claim_consensus=False, coverage_threshold=101.0, spare_outlier=False,
               lone_echo=2.0)  # fmt: skip
    return RAGDefender(**{**off, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("neighbourhood", "switch", "removed"),
    [
        (None, True, {"p0", "p1", "p2"}),  # not profiled: the encyclopedias' bars
        (0.53, True, {"p0", "p1", "p2"}),  # SQuAD-like: below the loose bar, nothing moves
        (0.70, True, {"p0"}),  # FAQ-like: the bars rise by 0.15, only the evidence goes
        (0.70, False, {"p0", "p1", "p2"}),  # switched off: the old behaviour
    ],
)
def test_the_loose_bar_rises_with_the_index_neighbourhood(
    neighbourhood: float | None, switch: bool, removed: set[str]
) -> None:
    d = _filter(neighbourhood_bars=switch)
    calibrate(d, _profile(neighbourhood))
    # a tight group (0.8 >= 0.75) whose member p0 restates the question: evidence for all;
    # shifted, the tight bar is 0.90 and the loose group is two patients (3 needed)
    res = d.filter(Q, _retrieved(0.8))
    assert set(res.removed_ids) == removed


@pytest.mark.parametrize(
    ("neighbourhood", "loose", "shift"),
    [(None, 0.55, 0.0), (0.2947, 0.55, 0.0), (0.5323, 0.55, 0.0), (0.6131, 0.55, 0.0631),
     (0.6131, 0.7, 0.0)],
)  # fmt: skip
def test_bar_shift(neighbourhood: float | None, loose: float, shift: float) -> None:
    d = RAGDefender(loose_threshold=loose)
    calibrate(d, _profile(neighbourhood))
    assert d.bar_shift() == pytest.approx(shift)
    assert d.evidence_threshold() == pytest.approx(0.99)  # above every shifted tight bar


def test_the_shift_moves_the_tight_bar_under_the_density_evidence() -> None:
    d = RAGDefender(natural_similarity=0.7)  # an index whose natural density bar is low
    calibrate(d, _profile(0.65))
    assert d.evidence_threshold() == pytest.approx(0.75 + 0.10)


@pytest.mark.parametrize("n", [NEIGHBOURHOOD_RANK + 1, 40])
def test_profile_records_the_median_ninth_neighbour(n: int) -> None:
    x = np.random.default_rng(n).normal(size=(n, 12))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    sim = x @ x.T
    np.fill_diagonal(sim, -np.inf)
    ninth = -np.sort(-sim, axis=1)[:, NEIGHBOURHOOD_RANK - 1]
    prof = profile_vectors(x)
    assert prof is not None and prof.neighbourhood_similarity is not None
    assert prof.neighbourhood_similarity == pytest.approx(float(np.median(ninth)), abs=1e-4)
    again = IndexProfile.from_dict(prof.to_dict())
    assert again.neighbourhood_similarity == prof.neighbourhood_similarity


def test_a_small_or_old_profile_has_no_neighbourhood() -> None:
    x = np.eye(NEIGHBOURHOOD_RANK)  # nine passages: none has a 9th neighbour
    prof = profile_vectors(x)
    assert prof is not None and prof.neighbourhood_similarity is None
    old = {k: v for k, v in prof.to_dict().items() if k != "neighbourhood_similarity"}
    assert IndexProfile.from_dict(old).neighbourhood_similarity is None


@pytest.mark.parametrize(("neighbourhood", "removed"), [(0.53, ["p0", "p1", "p2"]), (0.63, [])])
def test_the_consensus_echo_bar_rises_too(neighbourhood: float, removed: list[str]) -> None:
    """Three passages at question echo 0.80 pushing a word nothing else uses: a consensus on
    an encyclopedia (bar 0.75); on an index whose neighbourhoods are 0.08 tighter the bar is
    0.83, and three patients asking alike are no consensus."""
    texts = [*BLIND, GOLD, OTHER]
    enc = QuestionEncoder(BLIND_Q, {t: 0.80 for t in [*BLIND, GOLD]}, DIM)
    d = RAGDefender(enc, group_knn=False, echo_pairs=False, copy_conflicts=False,
                    typo_view=False, guard=False, spare_margin=99.0)  # fmt: skip
    calibrate(d, _profile(neighbourhood))
    retrieved = [RetrievedPassage(Passage(f"p{i}", t), 1.0 - i / 10, i, unit_vector(100 + i, DIM))
                 for i, t in enumerate(texts)]  # fmt: skip
    assert sorted(r.id for r in d.filter(BLIND_Q, retrieved).removed) == removed
