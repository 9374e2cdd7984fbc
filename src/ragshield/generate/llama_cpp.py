"""A packaged GGUF model on llama.cpp as a ragshield generator: the fast CPU path.

Example::

    from ragshield.generate.llama_cpp import LlamaCppGenerator
    gen = LlamaCppGenerator("qwen2.5-0.5b")
    out = gen.generate("Who designed the tower?", ["The tower was designed by G. Eiffel."])
    print(out.text, out.timings["prefill"], out.timings["decode"])
    gen.generate_many([(q, ctx) for q, ctx in questions])   # rows decoded together

Why it is written this way:

* The weights are the packaged 4-bit GGUF itself (assembled and sha256-verified by
  :func:`ragshield.models.gguf_path`), run with llama.cpp's quantised kernels: no float32
  conversion, a quarter of the memory, and several times the tokens/s of
  :class:`~ragshield.generate.local_hf.LocalLLMGenerator` (``benchmarks/bench_llm.py``,
  ``docs/results-llm-engine.md``). The transformers path stays the numerical reference;
  answers agree with it on most questions, not bit for bit (different kernels).
* Same prompt, same rules as the reference: the chat template shipped in the GGUF is
  rendered the way ``transformers`` renders it (sandboxed Jinja, ``trim_blocks``,
  ``lstrip_blocks``), greedy by default, the first line cut at a newline, the same end
  tokens (:data:`~ragshield.generate.engine_options.END_TOKENS`).
* One llama.cpp context holds several sequences in one unified KV cache. Sequence 0
  keeps the token prefix shared by the last batch (for a single prompt, all but its last
  token); a new call keeps the longest common prefix with it and computes only the rest,
  then every row starts as a copy of it (``llama_memory_seq_cp`` shares the cells, it
  copies nothing). The papers' RAG prompt opens with the same ~60-token instruction for
  every question and the scan writer's instructions share long heads, so that part is
  computed once. ``generate_many`` then prefills and decodes its rows in shared
  ``llama_decode`` calls, and a row leaves the batch as soon as it ends (no padding, no
  waiting for the longest row).
* One model in memory per process and settings: generators of the same weights and cache
  size share one :class:`_Engine` (model, context, KV cache), whatever their decoding
  options, e.g. ``ragshield scan``'s attack-text writer (96 tokens, whole reply) and its
  answering generator (64 tokens, first line). Each call holds the engine's lock, so the
  two take turns, and the instruction prefix one computed stays in the cache for the other.
* RAGFort's cascade reads raw logits through a ``transformers`` model and rolls its KV
  cache back after rejected drafts; that stays on the reference path: :attr:`model_`,
  :attr:`tokenizer_` and :attr:`reference_` are a :class:`LocalLLMGenerator` of the same
  model with the same settings, loaded only when the cascade asks for them.

Over 500 lines because batched decoding with a shared prompt prefix and its KV-cache
bookkeeping are state around one ``Llama`` object; options and prompts are in engine_options.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.errors import InputError, ModelNotFoundError, check_int
from ragshield.generate.engine_options import (
    END_TOKENS,
    LocalDecoding,
    check_bool,
    check_messages,
)
from ragshield.generate.lines import answer_line_ended
from ragshield.models.formats import PACKAGED, check_format
from ragshield.types import Generation

_OWNER = "LlamaCppGenerator"


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

    def __init__(self, path: Path, *, n_ctx: int, n_seq: int, n_batch: int, threads: int):
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
        """Drop every cached token (benchmarks time a cold prefill with it)."""
        self.lc.llama_memory_clear(self.ctx.memory, True)
        self.prefix = []

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

    def run(
        self,
        prompts: Sequence[list[int]],
        *,
        max_new_tokens: int,
        pick: Callable[[Any, int], int],
        is_end: Callable[[int], bool],
        line_ended: Callable[[list[int]], bool] | None,
        reuse_prefix: bool,
    ) -> list[_Outcome]:
        """Generate for ``prompts`` together (module docstring); ``pick(logits, step)``
        chooses a token, ``is_end`` says whether it ends the reply (it is not kept), and
        ``line_ended`` whether the reply so far ends its first line."""
        if not reuse_prefix:
            self.forget()
        shortest = min(len(p) for p in prompts)
        common = _common_prefix(prompts, limit=shortest - 1)
        keep = _common_prefix([self.prefix, prompts[0][:common]], limit=common)
        self._rm(0, keep)
        t0 = time.perf_counter()
        if common > keep:
            self.decode([(0, pos, prompts[0][pos], False) for pos in range(keep, common)])
        self.prefix = list(prompts[0][:common])
        rows = [_Row(list(p), seq=r + 1) for r, p in enumerate(prompts)]
        for row in rows:
            self._rm(row.seq, 0)
            if common:
                self._cp(0, row.seq, 0, common)
        items, last = _prefix_tree(rows, common)
        self.prefilled = max(0, common - keep) + len(items)
        wanted = [i for i, item in enumerate(items) if item[3]]
        logits_of = dict(zip(wanted, self.decode(items), strict=True))
        for row, i in zip(rows, last, strict=True):
            row.logits = logits_of[i].copy()  # rows with one last cell each get their own
        prefill = time.perf_counter() - t0
        t1 = time.perf_counter()
        steps = 0
        try:
            for step in range(max_new_tokens):
                feed: list[_Row] = []
                for row in rows:
                    if row.done:
                        continue
                    token = pick(row.logits, step)
                    if is_end(token):
                        row.stop, row.done = "eos", True
                        continue
                    row.out.append(token)
                    if line_ended is not None and line_ended(row.out):
                        row.stop, row.done = "newline", True
                    elif step == max_new_tokens - 1:
                        row.done = True
                    else:
                        feed.append(row)
                if not feed:
                    break
                logits = self.decode(
                    [(r.seq, len(r.prompt) + len(r.out) - 1, r.out[-1], True) for r in feed]
                )
                steps += 1
                for row, lg in zip(feed, logits, strict=True):
                    row.logits = lg
        finally:
            for row in rows:
                self._rm(row.seq, 0)
        decode = time.perf_counter() - t1
        own = [len(r.prompt) - common for r in rows]
        total_own = sum(own) or 1
        made = [max(len(r.out) - 1, 0) for r in rows]
        total_made = sum(made) or 1
        return [
            _Outcome(
                ids=r.out,
                stop=r.stop,
                reused=keep,
                prefill_s=prefill * n / total_own,
                decode_s=decode * m / total_made if len(rows) > 1 else decode,
                steps=m,
            )
            for r, n, m in zip(rows, own, made, strict=True)
        ]


#: Engines in use, by what fixes them (weights file, cache cells, sequences, batch); an
#: engine lives as long as one generator holds it (see the module docstring).
_ENGINES: weakref.WeakValueDictionary[tuple[str, int, int, int], _Engine] = (
    weakref.WeakValueDictionary()
)
_ENGINES_LOCK = threading.Lock()


def open_engine(path: Path, *, n_ctx: int, n_seq: int, n_batch: int, threads: int) -> _Engine:
    """The process's engine for these weights and sizes, loaded on first use (``threads``
    is set per call, so it is not part of what is shared)."""
    key = (str(Path(path).resolve()), n_ctx, n_seq, n_batch)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _Engine(path, n_ctx=n_ctx, n_seq=n_seq, n_batch=n_batch, threads=threads)
            _ENGINES[key] = engine
        return engine


def _prefix_tree(
    rows: Sequence[_Row], start: int
) -> tuple[list[tuple[list[int], int, int, bool]], list[int]]:
    """The prefill items of ``rows`` from position ``start`` on, each prompt token shared
    by several rows computed once: ``(seqs, pos, token, want_logits)`` items (a token in
    the rows' common part lists all their sequences) and, per row, the item of its last
    prompt token.

    Rows sorted by prompt share the longest prefix with their predecessor, so that
    predecessor's items are reused up to it (a prefix tree, built in one pass). Each
    sequence's tokens stay in position order (llama.cpp requires it)."""
    order = sorted(range(len(rows)), key=lambda r: rows[r].prompt)
    items: list[tuple[list[int], int, int, bool]] = []
    at: dict[int, list[int]] = {}  # row -> item index per position from start
    last = [0] * len(rows)
    prev: int | None = None
    for r in order:
        prompt, seq = rows[r].prompt, rows[r].seq
        shared = start
        if prev is not None:
            shared = _common_prefix([rows[prev].prompt, prompt], limit=len(prompt))
            shared = max(start, shared)
        mine = at[prev][: shared - start] if prev is not None else []
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


def render_chat_template(template: str, messages: list[dict[str, str]], **special: str) -> str:
    """Render a chat template as ``transformers``' ``apply_chat_template`` does (sandboxed
    Jinja with ``trim_blocks``/``lstrip_blocks`` and its two helper functions)."""
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def strftime_now(fmt: str) -> str:
        return time.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template).render(
        messages=messages, add_generation_prompt=True, **special
    )


class LlamaCppGenerator(LocalDecoding):
    """Greedy (or seeded sampling) generation with a packaged GGUF model on llama.cpp.

    Parameters
    ----------
    model: a packaged model name (``ragshield.models.list_models()``); llama.cpp needs
        the GGUF, so a Hugging Face folder runs on :class:`LocalLLMGenerator` instead.
    max_new_tokens, min_new_tokens, temperature, top_p, seed, stop_at_newline,
        prompt_style, cache_dir, show_progress: as :class:`LocalLLMGenerator` (the same
        defaults, so both backends answer the same request the same way).
    threads: llama.cpp threads for prefill and decode (``None``: one per usable core).
    dtype: accepted for option compatibility with the transformers path and ignored: the
        weights run in the GGUF's own 4-bit format. The reference path (cascade) uses it.
    n_ctx: KV cache cells shared by the rows of a batch (ours: 16,384 holds eight
        1,300-token RAG prompts with their answers; 0.5B: 12 KB per cell).
    batch_size: most rows decoded together by :meth:`generate_many` (ours: 8; see
        ``docs/results-llm-engine.md`` for the measured rows-per-second curve).
    reuse_prefix: keep the last prompts' shared prefix in the KV cache (module docstring);
        ``False`` recomputes every prompt from scratch (benchmarks time prefill with it).
    weights: ``"packaged"`` runs the packaged GGUF as is; ``"bf16"`` its matrices widened
        to bfloat16 once into the cache (:mod:`ragshield.models.formats`: about twice the
        prefill tokens/s on AVX512-BF16, slower one-row decode; ``docs/results-llm-engine.md``);
        ``"auto"`` (ours): the model's measured best (bf16 for qwen2.5-0.5b) where llama.cpp
        has bf16 dot products here, else packaged.
    share_engine: use the process's engine of the same weights, ``n_ctx`` and
        ``batch_size`` when there is one (module docstring); ``False`` loads a private
        copy (the model's memory twice, no shared prefix).
    """

    backend = "llama.cpp"
    _OWNER = _OWNER

    def __init__(
        self,
        model: str,
        *,
        # Same defaults as LocalLLMGenerator (see there): the papers give no decoding settings.
        max_new_tokens: int = 64,
        min_new_tokens: int = 0,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        stop_at_newline: bool = True,
        threads: int | None = 1,
        dtype: str = "float32",
        prompt_style: str = "poisonedrag",
        cache_dir: str | Path | None = None,
        show_progress: bool | None = None,
        n_ctx: int = 16384,
        batch_size: int = 8,
        reuse_prefix: bool = True,
        weights: str = "auto",
        share_engine: bool = True,
    ) -> None:
        self._init_decoding(locals())
        self.n_ctx = n_ctx
        self.batch_size = batch_size
        self.reuse_prefix = reuse_prefix
        self.weights = weights
        self.share_engine = share_engine
        self._engine: _Engine | None = None
        self._path: Path | None = None
        self._eos: frozenset[int] = frozenset()
        self._template: str | None = None
        self._special: dict[str, str] = {}
        self._reference: Any = None

    # -- set-up ----------------------------------------------------------------------------

    def _validate(self) -> None:
        from ragshield.models import MODELS

        if not isinstance(self.model, str) or self.model not in MODELS:
            raise InputError(
                f"{_OWNER} runs a packaged GGUF model ({', '.join(sorted(MODELS))}); got "
                f"{self.model!r}. A Hugging Face folder runs on the transformers backend."
            )
        self._check_decoding()
        check_int(self.n_ctx, "n_ctx", _OWNER, low=256)
        check_int(self.batch_size, "batch_size", _OWNER, low=1, high=64)
        check_format(self.weights, _OWNER)
        check_bool(self.reuse_prefix, "reuse_prefix", _OWNER)
        check_bool(self.share_engine, "share_engine", _OWNER)

    @property
    def path_(self) -> Path:
        """The verified GGUF file (assembled once from the part packages)."""
        if self._path is None:
            self._validate()
            from ragshield.models.formats import weights_path

            self._path = weights_path(
                self.model,
                self.weights_,
                cache_dir=self.cache_dir,
                show_progress=self.show_progress,
            )
        return self._path

    @property
    def weights_(self) -> str:
        """The weight format llama.cpp runs (``"auto"`` resolved for this CPU)."""
        from ragshield.models.formats import resolve_format

        self._validate()
        return resolve_format(check_format(self.weights, _OWNER), self.model)

    @property
    def threads_(self) -> int:
        if self.threads is not None:
            return self.threads
        import os

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        return max(1, cores or os.cpu_count() or 1)

    def _loaded(self) -> bool:
        """The engine is open (:meth:`warm_up` opens it once)."""
        return self._engine is not None

    def _load(self) -> None:
        self._validate()
        sizes: dict[str, Any] = {
            "n_ctx": self.n_ctx,
            "n_seq": self.batch_size + 1,
            "n_batch": 512,  # llama.cpp's default logical batch
            "threads": self.threads_,
        }
        opener = open_engine if self.share_engine else _Engine
        engine = opener(self.path_, **sizes)
        meta = engine.model.metadata()
        self._template = meta.get("tokenizer.chat_template") or None
        piece = engine.model.token_get_text
        self._special = {
            "bos_token": piece(engine.model.token_bos()) if engine.model.token_bos() >= 0 else "",
            "eos_token": piece(engine.model.token_eos()) if engine.model.token_eos() >= 0 else "",
        }
        ids = {engine.model.token_eos(), engine.model.token_eot()}
        for marker in END_TOKENS:
            toks = engine.model.tokenize(marker.encode(), False, True)
            if len(toks) == 1:
                ids.add(toks[0])
        self._eos = frozenset(i for i in ids if i >= 0)
        self._engine = engine

    @property
    def engine_(self) -> _Engine:
        self.warm_up()
        assert self._engine is not None
        return self._engine

    @property
    def eos_ids_(self) -> frozenset[int]:
        """Token ids that end a reply (the GGUF's end tokens and the chat turn markers)."""
        self.warm_up()
        return self._eos

    # -- the reference path (RAGFort's cascade) --------------------------------------------

    @property
    def reference_(self) -> Any:
        """A :class:`LocalLLMGenerator` of the same model and settings (float32 by default),
        built on first use: the cascade's logits come from it."""
        if self._reference is None:
            from ragshield.generate.local_hf import LocalLLMGenerator

            self._reference = LocalLLMGenerator(
                self.model,
                max_new_tokens=self.max_new_tokens,
                min_new_tokens=self.min_new_tokens,
                temperature=self.temperature,
                top_p=self.top_p,
                seed=self.seed,
                stop_at_newline=self.stop_at_newline,
                threads=self.threads,
                dtype=self.dtype,
                prompt_style=self.prompt_style,
                show_progress=self.show_progress,
            )
        return self._reference

    @property
    def model_(self) -> Any:
        """The reference path's ``transformers`` model (for RAGFort's cascade)."""
        return self.reference_.model_

    @property
    def tokenizer_(self) -> Any:
        """The reference path's ``transformers`` tokenizer (for RAGFort's cascade)."""
        return self.reference_.tokenizer_

    # -- prompts ---------------------------------------------------------------------------

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The exact prompt text the model sees (the GGUF's chat template, as transformers
        renders it; without one, the message contents joined by blank lines)."""
        msgs = check_messages(messages)
        self.warm_up()
        if self._template:
            return render_chat_template(self._template, msgs, **self._special)
        return "\n\n".join(m["content"] for m in msgs)

    def encode_messages(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Token ids of :meth:`render` (special tokens come from the template itself)."""
        text = self.render(messages)
        model = self.engine_.model
        add_bos = not self._template and model.add_bos_token()
        return [int(t) for t in model.tokenize(text.encode("utf-8"), add_bos, True)]

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no special tokens)."""
        if not isinstance(text, str):
            raise InputError(f"count_tokens expects a string. Got {type(text).__name__} instead.")
        return len(self.engine_.model.tokenize(text.encode("utf-8"), False, False))

    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` with control tokens dropped (as ``skip_special_tokens=True``)."""
        raw: bytes = self.engine_.model.detokenize([int(i) for i in ids], special=False)
        return raw.decode("utf-8", errors="replace")

    def cache_identity(self) -> dict[str, Any]:
        """Everything that changes the output for a given prompt (used by CachedGenerator).

        ``kind`` differs from the transformers path's, so the two backends never share a
        cached answer and a figure never silently mixes them."""
        import importlib.metadata

        from ragshield.models import MODELS

        self._validate()
        return {
            "kind": "llama.cpp",
            "engine": importlib.metadata.version("llama_cpp_python"),
            "model": self.model,
            "sha256": MODELS[self.model].sha256,
            **self._decoding_identity(),
            # only when not packaged, so answers cached before the option existed stay valid
            **({} if self.weights_ == PACKAGED else {"weights": self.weights_}),
        }

    # -- generation ------------------------------------------------------------------------

    def complete(self, messages: Sequence[Mapping[str, str]]) -> Generation:
        """Generate the assistant reply to arbitrary chat ``messages``."""
        return self.generate_from_ids(self.encode_messages(messages))

    def generate_from_ids(self, input_ids: Sequence[int]) -> Generation:
        """Decode from a ready token prefix; ``timings`` and ``details`` as
        :meth:`LocalLLMGenerator.generate_from_ids` (plus ``details["reused_prefix_tokens"]``,
        the prompt tokens read from the KV cache instead of computed)."""
        ids = [int(i) for i in input_ids]
        if not ids:
            raise InputError("input_ids is empty: the prompt must have at least one token.")
        return self._generate([ids])[0]

    def generate_many(
        self, requests: Sequence[tuple[str, Sequence[str]]], *, batch_size: int | None = None
    ) -> list[Generation]:
        """:meth:`generate` for many ``(question, contexts)`` at once, in order.

        Greedy rows are decoded ``batch_size`` at a time (default: the constructor's) in
        shared ``llama_decode`` calls, grouped by prompt so that neighbours share the
        longest prefixes; a sampling generator answers one request at a time, so a seeded
        sample never depends on its batch."""
        prompts = [self.prompt_ids(q, c) for q, c in requests]
        if not prompts:
            return []
        width = batch_size or self.batch_size
        check_int(width, "batch_size", _OWNER, low=1, high=self.batch_size)
        if self.temperature > 0:
            width = 1
        order = sorted(range(len(prompts)), key=lambda i: prompts[i])
        out: list[Generation | None] = [None] * len(prompts)
        group: list[int] = []
        for i in [*order, -1]:
            if i >= 0 and len(group) < width and self._fits([prompts[j] for j in [*group, i]]):
                group.append(i)
                continue
            if group:
                for j, g in zip(group, self._generate([prompts[j] for j in group]), strict=True):
                    out[j] = g
            group = [i] if i >= 0 else []
        return [g for g in out if g is not None]

    def _fits(self, prompts: list[list[int]]) -> bool:
        return sum(len(p) + self.max_new_tokens for p in prompts) <= self.n_ctx or len(prompts) == 1

    def _check_length(self, ids: list[int]) -> None:
        engine = self.engine_
        limit = min(self.n_ctx, engine.model.n_ctx_train())
        if len(ids) + self.max_new_tokens > limit:
            raise InputError(
                f"the prompt has {len(ids)} tokens; with max_new_tokens={self.max_new_tokens} "
                f"it exceeds the context of {limit} tokens. Pass fewer or shorter contexts."
            )

    def _generate(self, prompts: list[list[int]]) -> list[Generation]:
        for p in prompts:
            self._check_length(p)
        engine = self.engine_
        eos = self._eos
        suppress = np.array(sorted(eos), dtype=np.int64)
        rng = np.random.default_rng(self.seed) if self.temperature > 0 else None

        def pick(logits: Any, step: int) -> int:
            if step < self.min_new_tokens and suppress.size:
                logits[suppress] = -np.inf
            if rng is None:
                return int(np.argmax(logits))
            return _sample(logits, self.temperature, self.top_p, rng)

        def line_ended(ids: list[int]) -> bool:
            return answer_line_ended(self.detokenize(ids))

        with engine.lock:
            engine.set_threads(self.threads_)
            outcomes = engine.run(
                prompts,
                max_new_tokens=self.max_new_tokens,
                pick=pick,
                is_end=eos.__contains__,
                line_ended=line_ended if self.stop_at_newline else None,
                reuse_prefix=self.reuse_prefix,
            )
        results = []
        for p, o in zip(prompts, outcomes, strict=True):
            raw = self.detokenize(o.ids)
            results.append(
                Generation(
                    text=self._reply(raw),
                    prompt_tokens=len(p),
                    completion_tokens=len(o.ids),
                    timings={"prefill": o.prefill_s, "decode": o.decode_s},
                    details={
                        "model": self.model,
                        "backend": self.backend,
                        "stop": o.stop,
                        "raw": raw,
                        "completion_ids": o.ids,
                        "batch_size": len(prompts),
                        "reused_prefix_tokens": o.reused,
                        "prefill_tokens_per_s": (len(p) - o.reused) / o.prefill_s
                        if o.prefill_s > 0
                        else 0.0,
                        "decode_steps": o.steps,
                        "decode_tokens_per_s": o.steps / o.decode_s
                        if o.decode_s > 0 and o.steps
                        else 0.0,
                    },
                )
            )
        return results


def _sample(logits: Any, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """Temperature / nucleus sampling, as :meth:`LocalLLMGenerator._pick` does it."""
    z = logits.astype(np.float64) / temperature
    z -= z.max()
    probs = np.exp(z)
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        sorted_p = probs[order]
        keep = np.cumsum(sorted_p) - sorted_p < top_p
        probs = np.zeros_like(probs)
        probs[order[keep]] = sorted_p[keep]
        probs /= probs.sum()
    return int(rng.choice(probs.size, p=probs))
