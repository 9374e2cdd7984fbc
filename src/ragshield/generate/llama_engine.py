"""llama.cpp's model and one multi-sequence context: the KV-cache bookkeeping of
:class:`~ragshield.generate.llama_cpp.LlamaCppGenerator` (batched rows, shared prefixes,
restored prompt states), apart from its prompts and decoding options.

Why it is written this way:

* Sequence 0 keeps the token prefix shared by the last batch (for a single prompt, all
  but its last token); a new call keeps the longest common prefix with it and computes
  only the rest, then every row starts as a copy of it (``llama_memory_seq_cp`` shares
  the cells, it copies nothing).
* Rows of one batch share every common prefix (:func:`_prefix_tree`): a token shared by
  several rows is one KV cell of all their sequences, in the same ``llama_decode``.
* Prompts of *earlier* calls are kept as saved sequence states
  (:class:`~ragshield.generate.kv_states.PromptStates`, ``llama_state_seq_get_data``): the
  scan asks the same question with the same first passages under each defense chain, one
  call per chain, so a row restores the longest saved prefix (a memory copy) instead of
  computing it again.
* Prompt tokens are counted (:mod:`ragshield.generate.counters`): requested, computed,
  shared within a batch, restored; so are the tokens generated, the decode steps and the
  time inside the engine (wall and process CPU), so the scan can tell per stage what its
  CPU went to: the model, or the work around it (filters, encoders, searches).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.errors import ModelNotFoundError
from ragshield.generate import counters
from ragshield.generate.kv_states import PromptStates

#: Fewest tokens past the shared prefix for which a saved state is restored (ours: below
#: that the restore's memory copy buys too little; 16 tokens of the 0.5B are ~50 ms).
MIN_RESTORE = 16


@dataclass
class _Row:
    """One sequence being generated inside a shared batch."""

    prompt: list[int]
    seq: int
    out: list[int] = field(default_factory=list)
    stop: str = "max_new_tokens"
    done: bool = False
    logits: Any = None


@dataclass(frozen=True)
class _Outcome:
    ids: list[int]
    stop: str
    reused: int
    prefill_s: float
    decode_s: float
    steps: int


class _Engine:
    """A llama.cpp model and one multi-sequence context (see the module docstring).

    Not thread-safe: :class:`LlamaCppGenerator` holds :attr:`lock` around every call (the
    generators sharing an engine share its lock).
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int,
        n_seq: int,
        n_batch: int,
        threads: int,
        state_bytes: int = 0,
    ):
        import llama_cpp as lc
        from llama_cpp import _internals
        from llama_cpp._logger import set_verbose

        set_verbose(False)
        lc.llama_backend_init()
        self.lc = lc
        params = _internals.LlamaModel.default_params()
        params.n_gpu_layers = 0
        try:
            self.model = _internals.LlamaModel(path_model=str(path), params=params, verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise ModelNotFoundError(f"llama.cpp cannot load {path}: {exc}") from exc
        # Rows share the cells, each within the trained context (checked per prompt);
        # llama.cpp warns when the cache is larger than the trained context, so it is not.
        n_ctx = min(n_ctx, self.model.n_ctx_train())
        cparams = _internals.LlamaContext.default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_seq_max = n_seq
        cparams.kv_unified = True  # rows share the prefix cells (module docstring)
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.no_perf = True
        self.ctx = _internals.LlamaContext(model=self.model, params=cparams, verbose=False)
        self.n_ctx = n_ctx
        self.n_seq = n_seq
        self.n_batch = n_batch
        self.n_vocab = self.model.n_vocab()
        self._batch = lc.llama_batch_init(n_batch, 0, n_seq)  # a token may serve every row
        weakref.finalize(self, lc.llama_batch_free, self._batch)
        self.prefix: list[int] = []  # what sequence 0 holds
        self.prefilled = 0  # prompt tokens the last run computed (the rest were shared)
        self.states = PromptStates(state_bytes)  # earlier prompts' KV (module docstring)
        self.lock = threading.RLock()

    def close(self) -> None:
        self.ctx.close()
        self.model.close()

    def set_threads(self, threads: int) -> None:
        self.lc.llama_set_n_threads(self.ctx.ctx, threads, threads)

    # -- KV cache ---------------------------------------------------------------------------

    def _rm(self, seq: int, p0: int, p1: int = -1) -> None:
        self.lc.llama_memory_seq_rm(self.ctx.memory, seq, p0, p1)

    def _cp(self, src: int, dst: int, p0: int, p1: int) -> None:
        self.lc.llama_memory_seq_cp(self.ctx.memory, src, dst, p0, p1)

    def forget(self) -> None:
        """Drop every cached token and saved state (benchmarks time a cold prefill)."""
        self.lc.llama_memory_clear(self.ctx.memory, True)
        self.prefix = []
        self.states = PromptStates(self.states.budget_bytes)

    def _save(self, seq: int, tokens: Sequence[int]) -> None:
        """Keep the state of ``seq``, which holds exactly ``tokens`` (module docstring)."""
        if not self.states.budget_bytes or tokens in self.states:
            return
        import ctypes

        size = self.lc.llama_state_seq_get_size(self.ctx.ctx, seq)
        buf = (ctypes.c_uint8 * size)()
        got = self.lc.llama_state_seq_get_data(self.ctx.ctx, buf, size, seq)
        if got:
            self.states.add(tokens, bytes(buf)[:got])

    def _restore(self, seq: int, data: bytes) -> bool:
        """Load a saved state into the empty ``seq``; ``False`` when llama.cpp refuses
        (no room in the cache), and the row is computed instead."""
        import ctypes

        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if self.lc.llama_state_seq_set_data(self.ctx.ctx, buf, len(data), seq):
            return True
        self._rm(seq, 0)
        return False

    # -- forward passes ---------------------------------------------------------------------

    def decode(self, items: Sequence[tuple[int | Sequence[int], int, int, bool]]) -> list[Any]:
        """Run ``(seq, pos, token, want_logits)`` items through the model, ``n_batch`` at a
        time (``seq`` may list several sequences: one cell then serves them all); returns
        the logits (float32 vectors) of the wanted items, in order."""
        lc, batch = self.lc, self._batch
        out: list[Any] = []
        for start in range(0, len(items), self.n_batch):
            chunk = items[start : start + self.n_batch]
            batch.n_tokens = len(chunk)
            for i, (seq, pos, tok, want) in enumerate(chunk):
                seqs = (seq,) if isinstance(seq, int) else seq
                batch.token[i] = tok
                batch.pos[i] = pos
                batch.n_seq_id[i] = len(seqs)
                for j, s in enumerate(seqs):
                    batch.seq_id[i][j] = s
                batch.logits[i] = want
            code = lc.llama_decode(self.ctx.ctx, batch)
            if code != 0:
                raise RuntimeError(
                    f"llama_decode returned {code} (the KV cache of {self.n_ctx} tokens may "
                    "be full: pass a larger n_ctx or a smaller batch_size)"
                )
            for i, (_, _, _, want) in enumerate(chunk):
                if want:
                    ptr = lc.llama_get_logits_ith(self.ctx.ctx, i)
                    out.append(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy())
        return out

    def _start(self, row: _Row, common: int) -> int:
        """Fill ``row``'s empty sequence with what need not be computed: the longest saved
        prompt state when it goes :data:`MIN_RESTORE` tokens past ``common``, else a copy
        of sequence 0's ``common`` tokens; returns the position its computation starts at
        (always before the last prompt token, whose logits are needed)."""
        self._rm(row.seq, 0)
        found = self.states.best(row.prompt, limit=len(row.prompt) - 1)
        if found is not None and found[0] - common >= MIN_RESTORE:
            length, data = found
            if self._restore(row.seq, data):
                self._rm(row.seq, length)
                return length
        if common:
            self._cp(0, row.seq, 0, common)
        return common

    def run(
        self,
        prompts: Sequence[list[int]],
        *,
        max_new_tokens: int,
        pick: Callable[[Any, int], int],
        is_end: Callable[[int], bool],
        line_ended: Callable[[list[int]], bool] | None,
        reuse_prefix: bool,
        width: int | None = None,
    ) -> list[_Outcome]:
        """Generate for ``prompts`` together (module docstring); ``pick(logits, n)``
        chooses a row's token ``n``, ``is_end`` says whether it ends the reply (it is not
        kept), and ``line_ended`` whether the reply so far ends its first line.

        ``width``: at most this many rows run at once, and a finished row's sequence is
        refilled with the next waiting prompt in the next decode step (continuous
        batching: its prompt is computed in the same ``llama_decode`` as the running
        rows' next tokens), so steps keep ``width`` rows while prompts wait; ``None``:
        every prompt starts together (the caller made them fit ``n_ctx``)."""
        if not reuse_prefix:
            self.forget()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        shortest = min(len(p) for p in prompts)
        common = _common_prefix(prompts, limit=shortest - 1)
        keep = _common_prefix([self.prefix, prompts[0][:common]], limit=common)
        self._rm(0, keep)
        t0, pc0 = time.perf_counter(), time.process_time()
        restored0 = 0  # sequence 0's tokens read from a saved state
        found = self.states.best(prompts[0], limit=common)
        if found is not None and found[0] - keep >= MIN_RESTORE:  # a call in between
            self._rm(0, 0)  # replaced sequence 0's prefix (module docstring)
            keep = 0
            if self._restore(0, found[1]):
                self._rm(0, found[0])
                restored0 = found[0]
        if common > keep + restored0:
            span = range(keep + restored0, common)
            self.decode([(0, pos, prompts[0][pos], False) for pos in span])
        self.prefix = list(prompts[0][:common])
        rows = [_Row(list(p), seq=0) for p in prompts]
        waiting = list(range(len(rows)))[::-1]  # popped from the end: in the given order
        free = list(range(self.n_seq - 1, 0, -1))
        budget = self.n_ctx - common  # cells the rows may add to sequence 0's
        limit = min(width or len(rows), self.n_seq - 1)
        seq0 = max(0, common - keep - restored0)
        tally = {"computed": seq0, "restored": restored0}
        late = [0.0, 0.0]  # wall, CPU s of later rows' prompts inside decode steps

        def admit(running: int, used: int) -> list[_Row]:
            """The waiting rows that start now: up to ``limit`` running, within the cells
            (a row alone always starts)."""
            new: list[_Row] = []
            while waiting and free and running + len(new) < limit:
                row = rows[waiting[-1]]
                need = len(row.prompt) - common + max_new_tokens
                if running + len(new) and used + need > budget:
                    break
                waiting.pop()
                row.seq = free.pop()
                used += need
                new.append(row)
            return new

        def prefill_items(new: list[_Row]) -> tuple[list[Any], list[int]]:
            starts = [self._start(row, common) for row in new]
            items, last = _prefix_tree(new, starts)
            tally["computed"] += len(items)
            tally["restored"] += sum(s - common for s in starts)
            return items, last

        active = admit(0, 0)
        items, last = prefill_items(active)
        wanted = [i for i, item in enumerate(items) if item[3]]
        logits_of = dict(zip(wanted, self.decode(items), strict=True))
        for row, i in zip(active, last, strict=True):
            row.logits = logits_of[i].copy()  # rows with one last cell each get their own
        for row in active:
            self._save(row.seq, row.prompt)
        prefill = time.perf_counter() - t0
        prefill_cpu = time.process_time() - pc0
        t1, dc0 = time.perf_counter(), time.process_time()
        steps = fed = 0
        try:
            while active:
                feed: list[_Row] = []
                for row in active:
                    token = pick(row.logits, len(row.out))
                    if is_end(token):
                        row.stop, row.done = "eos", True
                        continue
                    row.out.append(token)
                    if line_ended is not None and line_ended(row.out):
                        row.stop, row.done = "newline", True
                    elif len(row.out) == max_new_tokens:
                        row.done = True
                    else:
                        feed.append(row)
                for row in active:
                    if row.done and waiting:  # its sequence takes the next waiting prompt
                        self._rm(row.seq, 0)
                        free.append(row.seq)
                used = sum(len(r.prompt) - common + max_new_tokens for r in feed)
                new = admit(len(feed), used)
                if not feed and not new:
                    break
                step_items: list[Any] = [
                    ([r.seq], len(r.prompt) + len(r.out) - 1, r.out[-1], True) for r in feed
                ]
                items, last = prefill_items(new)
                w0, c0 = time.perf_counter(), time.process_time()
                out = self.decode([*step_items, *items])
                if items:  # the step's time split by its tokens (each costs about the same)
                    share = len(items) / (len(items) + len(step_items))
                    late[0] += share * (time.perf_counter() - w0)
                    late[1] += share * (time.process_time() - c0)
                if feed:
                    steps += 1
                    fed += len(feed)
                for row, lg in zip(feed, out, strict=False):
                    row.logits = lg
                tails = iter(out[len(feed) :])
                logits_of = {i: next(tails) for i, item in enumerate(items) if item[3]}
                for row, i in zip(new, last, strict=True):
                    row.logits = logits_of[i].copy()
                    self._save(row.seq, row.prompt)
                active = [*feed, *new]
        finally:
            for row in rows:
                if row.seq:
                    self._rm(row.seq, 0)
        decode = time.perf_counter() - t1 - late[0]
        decode_cpu = time.process_time() - dc0 - late[1]
        prefill, prefill_cpu = prefill + late[0], prefill_cpu + late[1]
        requested = sum(len(p) for p in prompts)
        self.prefilled = tally["computed"]
        counters.add(
            rows=len(prompts),
            requested=requested,
            computed=tally["computed"],
            reused=keep,
            restored=tally["restored"],
            shared=requested - tally["computed"] - keep - tally["restored"],
            generated=sum(len(r.out) for r in rows),
            decode_steps=steps,
            decode_rows=fed,
            prefill_ms=round(1000 * prefill),
            prefill_cpu_ms=round(1000 * prefill_cpu),
            decode_ms=round(1000 * decode),
            decode_cpu_ms=round(1000 * decode_cpu),
            engine_ms=round(1000 * (time.perf_counter() - wall0)),
            engine_cpu_ms=round(1000 * (time.process_time() - cpu0)),
        )
        own = [len(r.prompt) - common for r in rows]
        total_own = sum(own) or 1
        made = [max(len(r.out) - 1, 0) for r in rows]
        total_made = sum(made) or 1
        return [
            _Outcome(
                ids=r.out,
                stop=r.stop,
                reused=keep + restored0,
                prefill_s=prefill * n / total_own,
                decode_s=decode * m / total_made if len(rows) > 1 else decode,
                steps=m,
            )
            for r, n, m in zip(rows, own, made, strict=True)
        ]


#: Engines in use, by what fixes them (weights file, cache cells, sequences, batch); an
#: engine lives as long as one generator holds it (see the module docstring).
_ENGINES: weakref.WeakValueDictionary[tuple[str, int, int, int, int], _Engine] = (
    weakref.WeakValueDictionary()
)
_ENGINES_LOCK = threading.Lock()


def open_engine(
    path: Path, *, n_ctx: int, n_seq: int, n_batch: int, threads: int, state_bytes: int = 0
) -> _Engine:
    """The process's engine for these weights and sizes, loaded on first use (``threads``
    is set per call, so it is not part of what is shared)."""
    key = (str(Path(path).resolve()), n_ctx, n_seq, n_batch, state_bytes)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _Engine(
                path,
                n_ctx=n_ctx,
                n_seq=n_seq,
                n_batch=n_batch,
                threads=threads,
                state_bytes=state_bytes,
            )
            _ENGINES[key] = engine
        return engine


def _prefix_tree(
    rows: Sequence[_Row], starts: Sequence[int]
) -> tuple[list[tuple[list[int], int, int, bool]], list[int]]:
    """The prefill items of ``rows``, row ``r`` from position ``starts[r]`` on (its
    sequence holds the tokens before), each prompt token shared by several rows computed
    once: ``(seqs, pos, token, want_logits)`` items (a shared token lists all their
    sequences) and, per row, the item of its last prompt token.

    Rows sorted by prompt share the longest prefix with their predecessor, so that
    predecessor's items are reused up to it (a prefix tree, built in one pass). Each
    sequence's tokens stay in position order and start where its cache ends (llama.cpp
    requires both), so a row joins its predecessor's items only when it starts at or
    after the predecessor's start."""
    order = sorted(range(len(rows)), key=lambda r: rows[r].prompt)
    items: list[tuple[list[int], int, int, bool]] = []
    at: dict[int, list[int]] = {}  # row -> item index per position from its start
    last = [0] * len(rows)
    prev: int | None = None
    for r in order:
        prompt, seq, start = rows[r].prompt, rows[r].seq, starts[r]
        mine: list[int] = []
        shared = start
        if prev is not None and start >= starts[prev]:
            shared = _common_prefix([rows[prev].prompt, prompt], limit=len(prompt))
            shared = max(start, shared)
            mine = at[prev][start - starts[prev] : shared - starts[prev]]
        for i in mine:
            items[i][0].append(seq)
        for pos in range(shared, len(prompt)):
            mine.append(len(items))
            items.append(([seq], pos, prompt[pos], False))
        at[r] = mine
        last[r] = mine[-1]
        seqs, pos, tok, _ = items[mine[-1]]
        items[mine[-1]] = (seqs, pos, tok, True)
        prev = r
    return items, last


def _common_prefix(seqs: Sequence[Sequence[int]], *, limit: int) -> int:
    """Length of the longest prefix all ``seqs`` share, at most ``limit``."""
    first = seqs[0]
    n = min(max(0, limit), len(first))
    for other in seqs[1:]:
        n = min(n, len(other))
        for i in range(n):
            if first[i] != other[i]:
                n = i
                break
    return n
