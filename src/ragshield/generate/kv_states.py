"""Saved KV states of recent prompts, found by their longest common token prefix.

Example::

    states = PromptStates(budget_bytes=1 << 30)
    states.add(prompt_ids, data)              # bytes of llama_state_seq_get_data
    found = states.best(new_prompt_ids, limit=len(new_prompt_ids) - 1)
    if found is not None:
        length, data = found                  # restore data, keep its first `length` tokens

Why: llama.cpp re-uses only what the context still holds. The scan answers the same
questions once per defense chain, one call per chain, and a chain that drops or edits a
passage leaves the instruction, the question's first passages and often more unchanged;
those tokens were computed in the previous call, whose sequences are gone. A saved state
(about 13 KB per token for Qwen2.5-0.5B's f16 cache) is restored by a memory copy in
milliseconds, where computing 100 tokens costs a third of a CPU-second. The store is
bounded by bytes and drops the least recently used state first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class PromptStates:
    """Saved prompt states, newest last, at most ``budget_bytes`` of them in total."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = max(0, int(budget_bytes))
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._arrays: dict[tuple[int, ...], np.ndarray] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, tokens: Sequence[int]) -> bool:
        return tuple(tokens) in self._states

    def add(self, tokens: Sequence[int], data: bytes) -> None:
        """Keep ``data``, the state of a sequence holding exactly ``tokens``."""
        key = tuple(tokens)
        if not key or len(data) > self.budget_bytes:
            return
        if key in self._states:
            self._states.move_to_end(key)
            return
        self._states[key] = data
        self._arrays[key] = np.asarray(key, dtype=np.int64)
        self.bytes += len(data)
        while self.bytes > self.budget_bytes:
            old, dropped = self._states.popitem(last=False)
            del self._arrays[old]
            self.bytes -= len(dropped)

    def best(self, tokens: Sequence[int], *, limit: int) -> tuple[int, bytes] | None:
        """The saved state sharing the longest prefix with ``tokens`` (at most ``limit``
        tokens of it count) and that length; ``None`` when none shares a token."""
        want = np.asarray(tokens, dtype=np.int64)
        best_len, best_key = 0, None
        for key, arr in self._arrays.items():
            n = min(len(arr), len(want), limit)
            if n <= best_len:
                continue
            diff = np.flatnonzero(arr[:n] != want[:n])
            shared = int(diff[0]) if diff.size else n
            if shared > best_len:
                best_len, best_key = shared, key
        if best_key is None:
            return None
        self._states.move_to_end(best_key)
        return best_len, self._states[best_key]
