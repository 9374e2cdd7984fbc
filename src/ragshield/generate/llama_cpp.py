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
* RAGFort's cascade reads raw per-token logits and rolls the KV cache back after rejected
  drafts: :attr:`model_` and :attr:`tokenizer_` serve both from this engine
  (:mod:`ragshield.generate.llama_cascade`); :attr:`reference_`, a
  :class:`LocalLLMGenerator` of the same model and settings, is the transformers twin
  they are checked against, loaded only when asked for.

The KV-cache bookkeeping (batched rows, shared prefixes, saved prompt states) is
:mod:`ragshield.generate.llama_engine`; options and prompts are in engine_options.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ragshield.defenses.params import StagedParams
from ragshield.errors import InputError, check_int
from ragshield.generate.engine_options import (
    DECODING_OPTIONS,
    END_TOKENS,
    LocalDecoding,
    check_messages,
    usable_cores,
)
from ragshield.generate.lines import answer_line_ended
from ragshield.generate.llama_engine import (  # noqa: F401  (_common_prefix: tests)
    _common_prefix,
    _Engine,
    open_engine,
)
from ragshield.generate.llama_options import LlamaEngineOptions
from ragshield.models.formats import PACKAGED, check_format
from ragshield.types import Generation

_OWNER = "LlamaCppGenerator"


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


class LlamaCppGenerator(LocalDecoding, StagedParams):
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
    engine_options: how llama.cpp holds the model and its KV cache, a
        :class:`~ragshield.generate.llama_options.LlamaEngineOptions` or a table of its
        fields (``n_ctx``, ``batch_size``, ``reuse_prefix``, ``weights``, ``share_engine``,
        ``state_cache_mb``, ``refill``); each field is also taken, read and assigned by its own name
        (``LlamaCppGenerator(m, batch_size=16)``, ``gen.reuse_prefix = False``).
    """

    backend = "llama.cpp"
    _OWNER = _OWNER
    _stages: ClassVar[Mapping[str, type]] = {"engine_options": LlamaEngineOptions}
    _own_params = DECODING_OPTIONS
    engine_options: LlamaEngineOptions
    n_ctx: int
    batch_size: int
    reuse_prefix: bool
    weights: str
    share_engine: bool
    state_cache_mb: int
    refill: bool

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
        engine_options: LlamaEngineOptions | Mapping[str, Any] | None = None,
        **flat: Any,  # a field of engine_options by its own name
    ) -> None:
        self._init_decoding(locals())
        self._set_stages({"engine_options": engine_options}, flat)
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
        self.engine_options.check(_OWNER)

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
        return usable_cores() if self.threads is None else self.threads

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
            "state_bytes": self.state_cache_mb << 20,
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

    # -- RAGFort's cascade, and its transformers twin ---------------------------------------

    @property
    def reference_(self) -> Any:
        """A :class:`LocalLLMGenerator` of the same model and settings (float32 by default),
        built on first use: the numerical reference the llama.cpp path is checked against."""
        if self._reference is None:
            from ragshield.generate.local_hf import LocalLLMGenerator

            same = {k: getattr(self, k) for k in DECODING_OPTIONS if k != "cache_dir"}
            self._reference = LocalLLMGenerator(**same)
        return self._reference

    @property
    def model_(self) -> Any:
        """RAGFort's cascade scores with this engine (per-token logits, KV rollback)."""
        from ragshield.generate.llama_cascade import LlamaLogits

        return LlamaLogits(self)

    @property
    def tokenizer_(self) -> Any:
        """The GGUF's tokenizer in the calls the cascade makes (no transformers load)."""
        from ragshield.generate.llama_cascade import LlamaTokenizer

        return LlamaTokenizer(self)

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
            # likewise: continuous batching changes which rows share a step (a near-tie)
            **({"refill": True} if self.refill else {}),
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
        longest prefixes; with ``refill`` one call runs them all, a finished row's
        sequence taking the next prompt (continuous batching, see ``LlamaEngineOptions``).
        A sampling generator answers one request at a time, so a seeded sample never
        depends on its batch."""
        prompts = [self.prompt_ids(q, c) for q, c in requests]
        if not prompts:
            return []
        width = batch_size or self.batch_size
        check_int(width, "batch_size", _OWNER, low=1, high=self.batch_size)
        if self.temperature > 0:
            width = 1
        order = sorted(range(len(prompts)), key=lambda i: prompts[i])
        out: list[Generation | None] = [None] * len(prompts)
        if self.refill and width > 1:
            ran = self._generate([prompts[i] for i in order], width=width)
            for i, g in zip(order, ran, strict=True):
                out[i] = g
            return [g for g in out if g is not None]
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

    def _generate(self, prompts: list[list[int]], width: int | None = None) -> list[Generation]:
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
                width=width,
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
                        "batch_size": min(len(prompts), width or len(prompts)),
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
