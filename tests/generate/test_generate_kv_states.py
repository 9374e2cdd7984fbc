"""Saved prompt states (kv_states.PromptStates), the prefix tree with per-row starts and
the prompt-token counters: pure logic, no model (the engine's use of them is tested on
SmolLM2 in test_generate_llama_cpp.py)."""

from __future__ import annotations

import pytest

from ragshield.generate import counters
from ragshield.generate.kv_states import PromptStates
from ragshield.generate.llama_engine import _prefix_tree, _Row


@pytest.mark.parametrize(
    ("query", "limit", "want"),
    [
        ([1, 2, 3, 4, 9], 10, (4, b"a" * 10)),  # the longest shared head wins
        ([1, 2, 3, 4, 9], 3, (3, b"a" * 10)),  # no more than the limit counts
        ([1, 2, 7], 10, (2, b"a" * 10)),  # ties go to the first saved
        ([5, 6], 10, None),  # nothing shared
    ],
)
def test_best_is_the_longest_shared_prefix(query, limit, want):
    states = PromptStates(100)
    states.add([1, 2, 3, 4, 5], b"a" * 10)
    states.add([1, 2, 8], b"b" * 10)
    assert states.best(query, limit=limit) == want


def test_the_budget_drops_the_least_recently_used():
    states = PromptStates(25)
    states.add([1, 1], b"x" * 10)
    states.add([2, 2], b"y" * 10)
    assert states.best([1, 1, 5], limit=9) == (2, b"x" * 10)  # [1, 1] is now the newest
    states.add([3, 3], b"z" * 10)  # 30 bytes > 25: the oldest, [2, 2], goes
    assert [1, 1] in states and [3, 3] in states and [2, 2] not in states
    assert states.bytes == 20 and len(states) == 2
    states.add([4], b"w" * 26)  # larger than the whole budget: not kept, nothing dropped
    assert len(states) == 2 and states.bytes == 20
    states.add([1, 1], b"other")  # the same tokens again: kept once
    assert states.bytes == 20


def test_a_zero_budget_keeps_nothing():
    states = PromptStates(0)
    states.add([1, 2], b"x")
    assert len(states) == 0 and states.best([1, 2], limit=2) is None


def _check(rows, starts, items, last):
    """Every sequence gets exactly its prompt from its start, in position order, and its
    last item asks for logits."""
    for r, row in enumerate(rows):
        mine = [(pos, tok) for seqs, pos, tok, _ in items if row.seq in seqs]
        assert mine == [(p, row.prompt[p]) for p in range(starts[r], len(row.prompt))]
        assert items[last[r]][3] and items[last[r]][1] == len(row.prompt) - 1


@pytest.mark.parametrize(
    ("starts", "computed", "joined"),
    [
        ((2, 2, 2), 3 + 3 + 5, 3),  # row 1 joins row 0's positions 2-4
        ((2, 3, 2), 3 + 3 + 5, 2),  # row 1 restored position 2: joins at 3-4
        ((4, 2, 2), 1 + 6 + 5, 0),  # row 1 starts before row 0: computes its own
        ((2, 5, 2), 3 + 3 + 5, 0),  # row 1 restored its whole shared head
        ((2, 2, 6), 3 + 3 + 1, 3),  # row 2 restored all but its last token
    ],
)
def test_prefix_tree_with_row_starts(starts, computed, joined):
    rows = [
        _Row([1, 1, 3, 4, 5], seq=1),
        _Row([1, 1, 3, 4, 5, 6, 7, 8], seq=2),
        _Row([1, 1, 9, 9, 9, 9, 9], seq=3),
    ]
    items, last = _prefix_tree(rows, starts)
    _check(rows, starts, items, last)
    assert len(items) == computed
    assert sum(len(seqs) > 1 for seqs, *_ in items) == joined


def test_counters_report_what_moved():
    before = counters.snapshot()
    counters.add(requested=10, computed=4)
    counters.add(requested=1, restored=0)
    assert counters.since(before) == {"requested": 11, "computed": 4}
