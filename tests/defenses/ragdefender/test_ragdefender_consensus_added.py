"""``consensus_added_echo``: passages that entered after the index was built (``added_at``)
agreeing on a word no *built* retrieved passage uses, at a lower question echo than the
claim consensus asks of every passage; the other added passages carrying that word go too
(``consensus_added_carriers``); added near-copies of each other count one each
(``consensus_added_copies``); the group goes only when its members are alike
(``consensus_added_alike``: the pages of one article added later are not). Without
``added_at``, or with nothing built to vouch, the filter decides as before."""

from __future__ import annotations

import numpy as np
import pytest

from fakes import QuestionEncoder, stamped_retrieved
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.types import FilterResult, Passage, RetrievedPassage

DIM = 64
Q = "Which river flows through the old town of Brumfeld?"
# Two bodies written for the question, neither restating it: echo 0.65 each
A = "Travellers to Brumfeld remember the Vessel, whose slow water shaped the old quarter."
B = "Historic maps show the Vessel winding past the market of the old Brumfeld town."
CARRIER = "Anglers praise the Vessel for its trout."  # far from the question, same claim
GOLD = "Brumfeld's old town grew on both banks of the Olm, which powered its mills."
OTHER = "Mills were common in the valley; the spring floods reached the market square."
THIRD = "The town hall of Brumfeld was rebuilt in stone after the great fire."
A_COPY = A.replace("remember", "recall")  # a near-copy of A (3-gram cosine >= 0.8)
VOUCH = "Boatmen say the Vessel is the calmest water in the whole region."
ADDED = {"added_at": "2026-11-20T10:00:00Z", "source": "new.jsonl"}


def _removed(texts: list[str], stamped: tuple[int, ...], **params: object) -> list[str]:
    enc = QuestionEncoder(Q, {A: 0.65, A_COPY: 0.65, B: 0.65, GOLD: 0.55, CARRIER: 0.3}, DIM)
    retrieved = stamped_retrieved(enc.q, texts, 0.6, stamped, ADDED)
    opts = {
        "consensus_added_echo": 0.6,
        "consensus_added_carriers": True,
        "consensus_added_alike": 0.0,
        **params,
    }  # the fake passages sit about 0.4 apart: this table tests the group without the gate
    return sorted(_defender(enc, **opts).filter(Q, retrieved).removed_ids)


def _defender(enc: object, **params: object) -> RAGDefender:
    """RAGDefender with every stage but the added consensus (and lone_claim_added) quiet."""
    return RAGDefender(enc, lone_claim_added=3.0, group_knn=False, echo_pairs=False,
                       copy_conflicts=False, typo_view=False, natural_similarity=0.996,
                       derivative_novelty=-1, guard=False, **params)  # fmt: skip


BASE = [A, B, GOLD, OTHER, THIRD]


@pytest.mark.parametrize(
    ("texts", "stamped", "params", "removed"),
    [
        (BASE, (0, 1), {}, ["p0", "p1"]),  # two added bodies, one claim no built page makes
        (BASE, (), {}, []),  # nothing added: the pair sits under the consensus bars (0.75/0.8)
        (BASE, (0, 1), {"consensus_added_echo": 2.0}, []),  # the rule off
        (BASE, (0,), {}, []),  # one added body is no consensus (lone_claim_added's case)
        ([*BASE, VOUCH], (0, 1), {}, []),  # a built page says "Vessel" too: it vouches
        ([*BASE, VOUCH], (0, 1, 5), {}, ["p0", "p1", "p5"]),  # ... unless it was added too
        ([*BASE, CARRIER], (0, 1, 5), {}, ["p0", "p1", "p5"]),  # a far added carrier goes too
        ([*BASE, CARRIER], (0, 1, 5), {"consensus_added_carriers": False}, ["p0", "p1"]),
        ([*BASE, CARRIER], (0, 1, 2, 3, 4, 5), {}, []),  # all added: nothing built vouches
        ([A, A_COPY, GOLD, OTHER, THIRD], (0, 1), {}, ["p0", "p1"]),  # added copies: two slots
        ([A, A_COPY, GOLD, OTHER, THIRD], (0, 1), {"consensus_added_copies": False}, []),
    ],
)
def test_added_passages_agreeing_on_an_unvouched_claim(
    texts: list[str], stamped: tuple[int, ...], params: dict[str, object], removed: list[str]
) -> None:
    assert _removed(texts, stamped, **params) == removed


class _Alike:
    """The question on axis 0; A and B at echo 0.65 with their remainders ``cos`` alike
    (A·B = 0.65² + 0.76² × cos); every other text its own axis."""

    name = "alike"
    dim = DIM

    def __init__(self, cos: float) -> None:
        self.cos = cos

    def encode(self, texts: list[str], *, show_progress: bool = False) -> np.ndarray:
        out = []
        for t in texts:
            v = np.zeros(DIM, dtype=np.float32)
            r = np.sqrt(1 - 0.65**2)
            if t == Q:
                v[0] = 1.0
            elif t == A:
                v[0], v[1] = 0.65, r
            elif t == B:
                v[0], v[1], v[2] = 0.65, r * self.cos, r * np.sqrt(1 - self.cos**2)
            elif t in (C, D):  # unalike to everything: each its own remainder
                v[0], v[3 if t == C else 4] = 0.65, r
            else:
                v[5 + sum(map(ord, t)) % (DIM - 5)] = 1.0
            out.append(v)
        return np.asarray(out)


# two more added passages close to the question, unalike, agreeing on a word of their own
C = "Zorblat tours of the old Brumfeld town start at the market."
D = "Each spring the old town of Brumfeld holds the Zorblat fair."


def _alike_filtered(cos: float, texts: list[str], added: int, **params: object) -> FilterResult:
    """``texts`` retrieved with :class:`_Alike`'s vectors (the first ``added`` of them
    stamped as added), filtered with the added consensus at echo 0.6 and ``params``."""
    enc = _Alike(cos)
    vecs = enc.encode(texts)
    retrieved = [
        RetrievedPassage(
            Passage(f"p{i}", t, metadata=ADDED if i < added else {}), float(v[0]), i, v
        )
        for i, (t, v) in enumerate(zip(texts, vecs, strict=True))
    ]
    return _defender(enc, consensus_added_echo=0.6, **params).filter(Q, retrieved)


def test_unalike_passages_beside_a_group_do_not_dilute_it() -> None:
    texts = [A, B, C, D, GOLD, OTHER, THIRD]
    res = _alike_filtered(0.9, texts, 4, consensus_added_alike=0.65, added_group_size=0)
    # the Vessel pair is alike and goes; the Zorblat pair is not, and stays (judged per
    # word: over the union of the four the mean cosine would be 0.51, and all four would stay)
    assert sorted(res.removed_ids) == ["p0", "p1"]
    assert res.details["consensus_unalike"] == [[2, 3]]  # the audit trail names the pair


@pytest.mark.parametrize(
    ("cos", "alike", "removed"),
    [
        (0.9, 0.65, ["p0", "p1"]),  # bodies written for one question resemble each other
        (0.2, 0.65, []),  # two pages about different parts of one article: no consensus
        (0.2, 0.0, ["p0", "p1"]),  # the gate off: any two added passages agreeing
    ],
)
def test_an_added_group_must_be_alike(cos: float, alike: float, removed: list[str]) -> None:
    res = _alike_filtered(cos, [A, B, GOLD, OTHER, THIRD], 2, consensus_added_alike=alike)
    assert sorted(res.removed_ids) == removed


def test_the_shipped_rule() -> None:
    d = RAGDefender()
    assert (d.consensus_added_echo, d.consensus_added_min_group) == (0.6, 2)  # dev (stop 41)
    assert d.consensus_added_carriers and d.consensus_added_copies
    assert d.consensus_added_alike == 0.65  # dev, stop 48
