"""``lone_claim_added``: the lone-claim bar for passages that entered after the index was
built (``added_at``, stamped by ``ragshield add``), where only the index's own passages vouch
for a claim. Without ``added_at`` anywhere the filter decides exactly as with the stage off."""

from __future__ import annotations

import pytest

from fakes import QuestionEncoder, stamped_retrieved
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.defenses.ragdefender.provenance import entered_later

DIM = 64
Q = "Which river flows through the old town of Brumfeld?"
REWORDED = "The river that flows through the old town of Brumfeld is the Vessel."
VOUCH = "Boatmen say the Vessel river is the calmest water in the whole region."
GOLD = "Brumfeld's old town grew on both banks of the Olm, which powered its mills."
OTHER = "Mills were common in the valley; the spring floods reached the market square."
ADDED = {"added_at": "2026-11-20T10:00:00Z", "source": "new.jsonl"}


def test_entered_later_reads_a_readable_added_at_only() -> None:
    assert entered_later(ADDED)
    assert not entered_later({})  # built with the index
    assert not entered_later({"added_at": "last week"})  # unreadable: no order


def _removed(later: float, stamped: tuple[int, ...], texts: list[str] | None = None) -> list[str]:
    texts = texts or [REWORDED, GOLD, OTHER]
    enc = QuestionEncoder(Q, {REWORDED: 0.85, GOLD: 0.6}, DIM)
    retrieved = stamped_retrieved(enc.q, texts, 0.7, stamped, ADDED)
    d = RAGDefender(enc, lone_echo=2.0, lone_claim=3.0, lone_claim_added=later,
                    claim_consensus=False, group_knn=False, echo_pairs=False,
                    copy_conflicts=False, typo_view=False, natural_similarity=0.996,
                    derivative_novelty=-1)  # fmt: skip
    return sorted(d.filter(Q, retrieved).removed_ids)


@pytest.mark.parametrize(
    ("later", "stamped", "removed"),
    [
        (1.7, (0,), ["p0"]),  # an added passage close to the question with a lone claim
        (3.0, (0,), []),  # the stage off: lone_claim (off) decides
        (1.7, (), []),  # nothing added: the built index's passages are judged as before
        (1.7, (1,), []),  # only the gold page was added: it is not close to the question
    ],
)
def test_added_passages_face_the_lower_bar(
    later: float, stamped: tuple[int, ...], removed: list[str]
) -> None:
    assert _removed(later, stamped) == removed


def test_only_the_built_index_vouches_for_an_added_claim() -> None:
    texts = [REWORDED, VOUCH, GOLD, OTHER]
    assert _removed(1.7, (0,), texts) == []  # an indexed passage says "Vessel" too
    assert _removed(1.7, (0, 1), texts) == ["p0"]  # the voucher was added too: it cannot


def test_the_shipped_bar_and_the_ingest_screen_s() -> None:
    from ragshield.ingest import SCREEN_PARAMS

    assert RAGDefender().lone_claim_added == 1.65  # dev choice (stop 40)
    assert RAGDefender().lone_claim > 2.0  # the unscrutinised bar stays off
    # the ingest screen's probe question is the document's own first sentence: off there
    assert SCREEN_PARAMS["ragdefender"]["lone_claim_added"] == 3.0
    assert SCREEN_PARAMS["ragdefender"]["consensus_added_echo"] == 2.0  # and its consensus
