"""EcoSafeRAG's helper modules on their own, without a model: the sentence-vector cache
(``vectors``: a passage retrieved again is not re-encoded, the bound evicts the oldest, 0
keeps nothing) and the result helpers (``result``: text checks, the one-decision-per-removed
sentence assembly on a hand-built verdict)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from ragshield.defenses.ecosaferag.result import assemble, checked_text
from ragshield.defenses.ecosaferag.settings import Clustering, Reading, Screening
from ragshield.defenses.ecosaferag.stages import BAIT, KEPT, PRUNED, Judgement
from ragshield.defenses.ecosaferag.vectors import SentenceVectors
from ragshield.errors import InputError
from ragshield.types import Passage, RetrievedPassage

A = "The tower was finished in 1889. It is 330 metres tall."
B = "Bananas grow in the tropics. They are rich in potassium."
C = "Paris is the capital of France."


class HashEncoder:
    """Test-only encoder: a fixed vector per text, and a log of what it was asked."""

    name = "hash-8"
    dim = 8

    def __init__(self) -> None:
        self.calls: list[str] = []

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        self.calls.extend(texts)
        rows = [np.random.default_rng(sum(map(ord, t))).standard_normal(8) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), 8)


@pytest.mark.parametrize(("cache_size", "cached"), [(8, 3), (2, 2), (0, 0)])
def test_cache_bound_and_reuse(cache_size: int, cached: int) -> None:
    enc, vec = HashEncoder(), SentenceVectors()
    q, seg, emb = vec.embed(enc, "q?", [A, B, C], "en", True, cache_size)
    assert q is not None and len(vec.passages) == cached
    assert seg.n_passages == 3 and seg.owner.tolist() == [0, 0, 1, 1, 2]
    assert np.allclose(np.linalg.norm(emb, axis=1), 1.0)
    enc.calls.clear()
    _, again, emb2 = vec.embed(enc, None, [A, B, C], "en", True, cache_size)
    assert again.sentences == seg.sentences and np.allclose(emb, emb2)
    assert (
        len(enc.calls) == len(seg.sentences) - {8: 5, 2: 3, 0: 0}[cache_size]
    )  # sentences of cached passages
    if cache_size == 2:  # the oldest (A) went first: only its two sentences re-encoded
        assert enc.calls == list(seg.sentences[:2])


def test_segmentation_settings_are_part_of_the_key() -> None:
    assert SentenceVectors.key(A, "en", True) != SentenceVectors.key(A, "en", False)
    assert SentenceVectors.key(A, "en", True) != SentenceVectors.key(A, "de", True)


@pytest.mark.parametrize(
    ("text", "message"),
    [(3, "must be a string. Got int"), ("bad \udc80 text", "lone surrogate")],
)
def test_checked_text(text: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        checked_text(text, "passage 0")
    assert checked_text("fine", "passage 0") == "fine"


class _Filter:
    name = "ecosaferag"
    reading = Reading()
    screening = Screening()
    clustering = Clustering()


def test_assemble_removes_only_the_flagged_sentence_in_sentence_scope() -> None:
    enc = HashEncoder()
    _, seg, _ = SentenceVectors().embed(enc, "q?", [A, B], "en", True, 0)
    items = [RetrievedPassage(Passage(f"p{i}", t), 0.5, i) for i, t in enumerate([A, B])]
    cand = np.array([0, 1])  # both sentences of A are candidates; B's are pruned
    judged = Judgement(np.array([KEPT, BAIT], dtype=object), np.array([0.0, 0.8]))
    res = assemble(
        _Filter(),
        items,
        [(A, False), (B, False)],
        seg,
        np.full(4, 0.5),
        cand,
        np.zeros(4, dtype=bool),
        judged,
        np.array([-1, 0]),
        np.ones(2),
        0.2,
        0,
        {},
        0.0,
    )
    assert [r.text for r in res.kept] == ["The tower was finished in 1889."]
    reasons = sorted(d.reason for d in res.decisions)
    assert reasons == [BAIT, PRUNED, PRUNED]
    bait = next(d for d in res.decisions if d.reason == BAIT)
    assert bait.scores["suspicion"] == pytest.approx(0.9)  # 0.5 + 0.5 x evidence
