"""RAGFort's cascade on llama.cpp (:mod:`ragshield.generate.llama_cascade`).

The bookkeeping (which cells are dropped, which positions computed, which logits asked
for) is pinned on a fake engine that records its calls.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from ragshield.errors import InputError
from ragshield.generate.cascade_scorers import _make_scorer
from ragshield.generate.llama_cascade import LlamaLogits, LlamaScorer

VOCAB = 7


class _FakeEngine:
    """Records ``llama_memory_seq_rm`` and ``decode`` calls; a logit row encodes the
    position and token it was computed for (``row[0] = pos``, ``row[1] = token``)."""

    def __init__(self, n_ctx: int = 64, can_drop_tail: bool = True) -> None:
        self.prefix: list[int] = []
        self.lock = threading.RLock()
        self.n_ctx = n_ctx
        self.removed: list[tuple[int, int, int]] = []
        self.decoded: list[list[tuple[int, int, int, bool]]] = []
        self.threads: list[int] = []
        self.ctx = SimpleNamespace(memory="mem")
        self.model = SimpleNamespace(n_params=lambda: 1234)

        def seq_rm(memory: Any, seq: int, p0: int, p1: int) -> bool:
            self.removed.append((seq, p0, p1))
            return can_drop_tail or p0 == 0

        self.lc = SimpleNamespace(llama_memory_seq_rm=seq_rm)

    def set_threads(self, n: int) -> None:
        self.threads.append(n)

    def decode(self, items: list[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        self.decoded.append(list(items))
        out = []
        for _, pos, tok, want in items:
            if want:
                row = np.zeros(VOCAB, dtype=np.float32)
                row[0], row[1] = pos, tok
                out.append(row)
        return out


def _scorer(**engine_kw: Any) -> tuple[LlamaScorer, _FakeEngine]:
    engine = _FakeEngine(**engine_kw)
    gen = SimpleNamespace(engine_=engine, threads_=1)
    scorer = _make_scorer(SimpleNamespace(model_=LlamaLogits(gen)), None, "draft")  # type: ignore[arg-type]
    assert isinstance(scorer, LlamaScorer)
    scorer.reset()
    return scorer, engine


class TestScorerBookkeeping:
    """What the cascade's calls make the engine do (draft steps, a verification, a rollback)."""

    def test_first_call_computes_everything_and_returns_the_last_rows(self):
        s, e = _scorer()
        out = s.logits([10, 11, 12, 13], 2)
        assert e.removed == [(0, 0, -1)]
        assert [(p, t, w) for _, p, t, w in e.decoded[0]] == [
            (0, 10, False),
            (1, 11, False),
            (2, 12, True),
            (3, 13, True),
        ]
        assert out[:, :2].tolist() == [[2, 12], [3, 13]]
        assert e.prefix == [10, 11, 12, 13] and e.threads == [1]
        assert (s.counter.forwards, s.counter.tokens, s.params) == (1, 4, 1234)

    @pytest.mark.parametrize(
        ("then", "n_last", "kept", "computed"),
        [
            ([10, 11, 12, 13, 14], 1, 4, [(4, 14)]),  # a draft step: one new token
            ([10, 11, 12, 13, 14, 15, 16], 3, 4, [(4, 14), (5, 15), (6, 16)]),  # a block
            ([10, 11, 12, 20, 21], 2, 3, [(3, 20), (4, 21)]),  # rejected at 3: rolled back
            ([10, 11, 12, 13], 1, 3, [(3, 13)]),  # the same ids: the last is recomputed
            ([10, 11], 2, 0, [(0, 10), (1, 11)]),  # all logits asked again
        ],
    )
    def test_later_calls_keep_the_common_prefix_only(self, then, n_last, kept, computed):
        s, e = _scorer()
        s.logits([10, 11, 12, 13], 1)
        out = s.logits(then, n_last)
        assert e.removed[-1] == (0, kept, -1)
        assert [(p, t) for _, p, t, _ in e.decoded[-1]] == computed
        assert [w for *_, w in e.decoded[-1]] == [
            p >= len(then) - n_last for _, p, _, _ in e.decoded[-1]
        ]
        assert out[:, 0].tolist() == list(range(len(then) - n_last, len(then)))
        assert e.prefix == then

    def test_a_cache_changed_by_another_generator_is_followed(self):
        """The engine's prefix is the truth: another caller of the shared engine moved it."""
        s, e = _scorer()
        s.logits([10, 11, 12, 13], 1)
        e.prefix = [10, 99]  # what a generate() call on the same engine left
        s.logits([10, 11, 12, 13, 14], 1)
        assert e.removed[-1] == (0, 1, -1)
        assert [p for _, p, _, _ in e.decoded[-1]] == [1, 2, 3, 4]

    def test_a_cache_that_cannot_drop_a_tail_starts_over(self):
        s, e = _scorer(can_drop_tail=False)
        s.logits([10, 11, 12, 13], 1)
        s.logits([10, 11, 12, 20], 1)
        assert e.removed[-2:] == [(0, 3, -1), (0, 0, -1)]
        assert [p for _, p, _, _ in e.decoded[-1]] == [0, 1, 2, 3]

    @pytest.mark.parametrize(("ids", "n_last"), [([1, 2], 0), ([1, 2], 3), (list(range(65)), 1)])
    def test_bad_requests_are_refused_before_any_work(self, ids, n_last):
        s, e = _scorer()
        with pytest.raises(InputError):
            s.logits(ids, n_last)
        assert e.decoded == [] and e.removed == []
