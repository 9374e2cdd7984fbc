"""Prompt-token and answer counters of the local engines, summed over the process.

Why: a scan's cost is prefill, and what a change to prompt sharing buys is the number of
prompt tokens it no longer computes. Engines add to :data:`PROMPT_TOKENS` as they run;
``ragshield scan`` reads it before and after each stage (:func:`snapshot`) and reports the
difference beside the stage's time. Counters, not timings: they do not move with the load.

Keys: ``requested`` (prompt tokens of the rows run), ``computed`` (tokens the model
evaluated), ``reused`` (kept from the previous call's shared prefix), ``shared`` (computed
once for several rows of a batch), ``restored`` (read back from a saved prompt state,
:mod:`ragshield.generate.kv_states`); ``requested = computed + reused + shared + restored``.
``rows``: prompts the engines ran; ``cache_hits``: requests answered without them, from
an answer cache (:class:`~ragshield.generate.cache.CachedGenerator`, memory or disk) or as
the repeat of a request in the same call. ``generated``: tokens decoded; ``decode_steps``:
batched decode calls; ``engine_ms`` / ``engine_cpu_ms``: wall and process CPU milliseconds
inside the engine's calls (the process's CPU, so work another thread does meanwhile counts
too: an upper bound where threads overlap, exact where the engine runs alone). A stage's
CPU minus ``engine_cpu_ms`` is what it spent around the model (filters, encoders, searches).
The engine's time split by token kind, because prompt tokens (prefill, compute-bound) and
generated tokens (decode, one step per token for every row still running) cost differently
and are cut by different changes: ``prefill_ms`` / ``prefill_cpu_ms`` (the prompts' forward
passes, saved states included), ``decode_ms`` / ``decode_cpu_ms`` (the decode steps), and
``decode_rows``, the rows fed over all decode steps (``decode_rows / decode_steps`` = rows
per step, what batching buys).
"""

from __future__ import annotations

import threading
from collections import Counter

PROMPT_TOKENS: Counter[str] = Counter()
_LOCK = threading.Lock()


def add(**counts: int) -> None:
    """Add ``counts`` to :data:`PROMPT_TOKENS` (thread-safe)."""
    with _LOCK:
        PROMPT_TOKENS.update(counts)


def snapshot() -> dict[str, int]:
    """A copy of the counters now (subtract two with :func:`since`)."""
    with _LOCK:
        return dict(PROMPT_TOKENS)


def since(before: dict[str, int]) -> dict[str, int]:
    """What was counted after ``before`` was taken (keys that moved only)."""
    now = snapshot()
    return {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
