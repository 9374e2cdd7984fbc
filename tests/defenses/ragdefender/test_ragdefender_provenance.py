"""Provenance (``provenance``): of two retrieved near-copies the one the index held first is
spared and the later one removed. A passage without ``added_at`` (built with the index)
precedes every added one; two ``added_at`` compare as UTC instants; no provenance on either
side, equal instants or an unreadable value leave the other stages' decision untouched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from fakes import QuestionEncoder, unit_vector
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.defenses.ragdefender.evidence import trigram_cosine_matrix
from ragshield.defenses.ragdefender.provenance import (
    added_at,
    later_copies,
    shingle_containment,
    spare_originals,
)
from ragshield.types import Passage, RetrievedPassage

DIM = 64
Q = "Which city hosted the first congress of the Nordic rowing federation in its founding year?"
PAGE = ("The first congress of the Nordic rowing federation met in Bergen in 1921, where the "
        "delegates of four national clubs agreed on the rules of the regatta season.")  # fmt: skip
COPY = PAGE.replace("Bergen", "Turku")  # an edited fact
COPY2 = PAGE.replace("Bergen", "Aarhus")
OTHER = "Rowing on the fjords became a popular summer pastime in the years after the war."
T1, T2 = "2026-11-20T10:00:00Z", "2026-11-21T09:00:00+01:00"  # T2 is later (08:00 UTC)


def _meta(stamp: str | None) -> Mapping[str, Any]:
    return {} if stamp is None else {"added_at": stamp, "source": "new.jsonl"}


def _decide(texts: list[str], stamps: list[str | None], removed: list[int], mode: str = "restore"):
    mask = np.zeros(len(texts), dtype=bool)
    mask[removed] = True
    return spare_originals(mode, Q, texts, [added_at(_meta(s)) for s in stamps],  # type: ignore[arg-type]
                           trigram_cosine_matrix(texts), 0.8, mask, 6)  # fmt: skip


def test_added_at_orders_built_before_added_and_reads_utc() -> None:
    built, t1, t2 = added_at({}), added_at(_meta(T1)), added_at(_meta(T2))
    assert built is not None and t1 is not None and t2 is not None
    assert built < t1 < t2
    assert added_at({"added_at": "yesterday"}) is None  # unreadable: no order
    assert added_at({"added_at": 17}) is None


def test_the_removed_original_is_restored_and_the_later_copy_removed() -> None:
    restore, drop, rows = _decide([PAGE, COPY, OTHER], [None, T1, None], removed=[0])
    assert restore == [0] and list(drop) == [1]
    assert drop[1].startswith("added after the page it copies (passage 0")
    assert rows == [{"original": 0, "copy": 1, "restored": True}]


@pytest.mark.parametrize(
    "stamps",
    [[None, None, None], [T1, T1, None], [None, "not a date", None]],
    ids=["no metadata", "equal instants", "unreadable"],
)
def test_without_an_order_nothing_changes(stamps: list[str | None]) -> None:
    assert _decide([PAGE, COPY, OTHER], stamps, removed=[0]) == ([], {}, [])


def test_two_added_passages_compare_as_instants() -> None:
    restore, drop, _ = _decide([COPY, PAGE, OTHER], [T2, T1, None], removed=[1])
    assert restore == [1] and list(drop) == [0]  # the page added at T1 preceded T2's copy


def test_three_way_copies_keep_only_the_first() -> None:
    texts, stamps = [COPY2, PAGE, COPY, OTHER], [T2, None, T1, None]
    restore, drop, _ = _decide(texts, stamps, removed=[1, 2])
    assert restore == [1] and sorted(drop) == [0, 2]  # the T1 copy is not restored: it copies


def test_a_kept_original_leaves_its_copy_unless_facts_mode() -> None:
    assert _decide([PAGE, COPY, OTHER], [None, T1, None], removed=[]) == ([], {}, [])
    restore, drop, _ = _decide([PAGE, COPY, OTHER], [None, T1, None], [], mode="facts")
    assert restore == [] and list(drop) == [1] and "states a fact" in drop[1]
    same = PAGE + " "  # a re-added identical page changes no fact
    assert _decide([PAGE, same, OTHER], [None, T1, None], [], mode="facts") == ([], {}, [])


def test_off_and_far_passages_give_no_pair() -> None:
    assert _decide([PAGE, COPY, OTHER], [None, T1, None], [0], mode="off") == ([], {}, [])
    lex = trigram_cosine_matrix([PAGE, OTHER])
    assert later_copies([added_at({}), added_at(_meta(T1))], lex, 0.8) == []


# ---- through the filter: the original restates the question, so the filter removes it


RESTATING = Q + " " + PAGE
RESTATING_COPY = Q + " " + COPY


def _retrieved(stamps: list[str | None]) -> list[RetrievedPassage]:
    texts = [RESTATING, RESTATING_COPY, OTHER]
    return [RetrievedPassage(Passage(f"p{i}", t, metadata=_meta(s)), 1.0 - i / 10, i,
                             unit_vector(50 + i, DIM))
            for i, (t, s) in enumerate(zip(texts, stamps, strict=True))]  # fmt: skip


def _filter(mode: str) -> RAGDefender:
    enc = QuestionEncoder(Q, {}, DIM)
    return RAGDefender(enc, provenance=mode, group_knn=False, echo_pairs=False,
                       claim_consensus=False, typo_view=False, coverage_threshold=101.0,
                       lone_echo=2.0, guard=False, copy_conflicts=False)  # fmt: skip


def _removed(mode: str, stamps: list[str | None]) -> list[str]:
    return sorted(_filter(mode).filter(Q, _retrieved(stamps)).removed_ids)


def test_filter_spares_the_indexed_original() -> None:
    res = _filter("restore").filter(Q, _retrieved([None, T1, None]))
    assert res.removed_ids == ["p1"]
    assert res.details["provenance"] == [{"original": 0, "copy": 1, "restored": True}]
    assert "added after the page it copies" in res.decisions[0].reason


def test_filter_without_provenance_is_todays_behaviour() -> None:
    today = _removed("off", [None, T1, None])
    assert today == ["p0", "p1"]  # both restate the question
    assert _removed("restore", [None, None, None]) == today  # no metadata: the same
    assert _removed("restore", [T1, T1, None]) == today  # one batch: no order
    assert _removed("facts", [None, None, None]) == today  # the default mode, no metadata
    assert RAGDefender().provenance == "facts"  # the shipped default (dev choice, stop 40)


# ---- excerpts (the answer to ``excerpt-edit``): cut under the cosine bar, still contained

LONG = (PAGE + " The federation later moved its seat to Oslo. Its archive holds the minutes of "
        "every congress since then, with the names of the delegates and the results of each "
        "regatta. A museum in the old boathouse shows the early boats.")  # fmt: skip
EXCERPT = PAGE.replace("Bergen", "Turku")  # the edited answer sentence alone


def test_shingle_containment_reads_an_excerpt_whatever_its_length() -> None:
    assert shingle_containment(PAGE, LONG) == 1.0
    assert shingle_containment(EXCERPT, LONG) > 0.8  # one word of ~25 changed
    assert shingle_containment(OTHER, LONG) < 0.1
    assert shingle_containment("two words", LONG) == 0.0  # no 3-shingle at all


def test_a_later_excerpt_that_changes_a_fact_goes_in_facts_mode() -> None:
    texts = [LONG, EXCERPT, OTHER]
    assert trigram_cosine_matrix(texts)[0, 1] < 0.8  # under the near-copy bar
    restore, drop, rows = _decide(texts, [None, T1, None], [], mode="facts")
    assert restore == [] and list(drop) == [1] and "an excerpt of it" in drop[1]
    assert rows == [{"original": 0, "copy": 1, "restored": False}]
    # a later excerpt that changes nothing (a quote) stays; without an order nothing moves
    assert _decide([LONG, PAGE, OTHER], [None, T1, None], [], mode="facts") == ([], {}, [])
    assert _decide(texts, [None, None, None], [], mode="facts") == ([], {}, [])
    # the earlier page is never taken for an excerpt of the later one
    assert _decide([EXCERPT, LONG, OTHER], [None, T1, None], [], mode="facts")[1] == {}


def test_provenance_runs_when_the_density_guard_does_not_pass() -> None:
    """No evidence and no pair above the guard's bar end the filter early (the calibrated
    bar is 0.996 on HotpotQA); a later copy that changes a fact still goes, and without an
    order the early exit removes nothing."""
    texts = [PAGE, COPY, OTHER]

    def run(stamps: list[str | None]) -> Any:
        items = [RetrievedPassage(Passage(f"p{i}", t, metadata=_meta(s)), 1.0 - i / 10, i,
                                  unit_vector(70 + i, DIM))
                 for i, (t, s) in enumerate(zip(texts, stamps, strict=True))]  # fmt: skip
        rd = RAGDefender(QuestionEncoder(Q, {}, DIM), provenance="facts", guard=True,
                         guard_threshold=0.999)  # fmt: skip
        return rd.filter(Q, items)

    res = run([None, T1, None])
    assert res.details["guard"]["passed"] is False
    assert res.removed_ids == ["p1"] and "states a fact" in res.decisions[0].reason
    bare = run([None, None, None])
    assert bare.details["guard"]["passed"] is False and bare.removed_ids == []


def test_added_share_counts_readable_stamps_only() -> None:
    from ragshield.defenses.ragdefender.provenance import added_share

    assert added_share([_meta(T1), _meta(None), {"added_at": "soon"}, _meta(T2)]) == 0.5
    assert added_share([]) == 0.0


def test_the_added_share_warning_only_where_added_passages_are_scrutinised(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from ragshield.defenses.ragdefender import provenance

    passages = [Passage(f"p{i}", "text", metadata=_meta(T1 if i % 2 else None)) for i in range(10)]
    off = RAGDefender(lone_claim_added=3.0, consensus_added_echo=2.0, added_group_size=0)
    for defense, where, lines in ((off, "a", 0), (RAGDefender(lone_claim_added=3.0), "b", 1)):
        monkeypatch.setattr(provenance, "_WARNED", set())
        caplog.clear()
        with caplog.at_level("WARNING", logger=provenance.__name__):
            provenance.warn_if_mostly_added(defense, passages, where)
        assert len(caplog.records) == lines  # 50 % added
