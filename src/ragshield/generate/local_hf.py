"""A local Hugging Face causal LM as a ragshield generator, on CPU, offline.

Example::

    from ragshield.generate.local_hf import LocalLLMGenerator
    gen = LocalLLMGenerator("qwen2.5-0.5b")          # or a local HF model folder
    out = gen.generate("Who designed the tower?", ["The tower was designed by G. Eiffel."])
    print(out.text, out.timings["prefill"], out.timings["decode"])

Why it is written this way:

* The prompt is the papers' (:func:`ragshield.generate.prompt.build_messages`) rendered with
  the chat template that ships with the model: with a raw ``Answer:`` prompt the Qwen
  models answer on the first line and then ramble, so by default generation also stops at
  the first newline after the answer has started.
* The decode loop is written out (prefill once, then one token at a time on the KV cache,
  ``logits_to_keep=1``) so prefill and decode time are measured separately, and so the
  same loaded model can hand raw next-token distributions to RAGFort's draft/reference
  cascade (:meth:`next_token_logits`, :meth:`continuation_logits`).
* float32 by default (the reference numerics). ``dtype="bfloat16"`` pays off only on CPUs
  with bf16 matrix units (AMX / AVX512-BF16): measured on such a Xeon, prefill of 800
  tokens 4× faster and decode ~1.3× faster than float32, while on CPUs without them bf16
  prefill measured 3× slower. ``dtype="auto"`` picks bf16 only when /proc/cpuinfo lists
  ``amx_bf16`` or ``avx512_bf16``.
* ``OMP_WAIT_POLICY=PASSIVE`` is set (unless already set) before torch is imported: on a
  shared CPU, spinning OpenMP workers collapsed decode from ~4.6 to 0.5 tok/s.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ragshield.errors import InputError, ModelNotFoundError
from ragshield.generate.engine_options import (
    END_TOKENS,
    LocalDecoding,
    check_messages,
    cpu_has_bf16,
)
from ragshield.generate.lines import answer_line_ended
from ragshield.types import Generation


def end_token_ids(tok: Any, *models: Any) -> frozenset[int]:
    """Every token id that ends a reply: the tokenizer's and each model's configured EOS plus
    the chat-template turn-end markers above (shared with the RAGFort cascade)."""
    sources: list[Any] = [getattr(tok, "eos_token_id", None)]
    for model in models:
        sources.append(getattr(getattr(model, "generation_config", None), "eos_token_id", None))
    ids: set[int] = set()
    for source in sources:
        if isinstance(source, int):
            ids.add(source)
        elif isinstance(source, (list, tuple)):
            ids.update(int(x) for x in source)
    vocab = tok.get_vocab() if hasattr(tok, "get_vocab") else {}
    ids.update(vocab[t] for t in END_TOKENS if t in vocab)
    return frozenset(ids)


class LocalLLMGenerator(LocalDecoding):
    """Greedy (or seeded sampling) generation with a local causal LM.

    Parameters
    ----------
    model: a packaged model name (``ragshield.models.list_models()``) or a local Hugging
        Face model folder. Packaged models are converted on first use and cached.
    max_new_tokens: upper bound on the answer length.
    min_new_tokens: end tokens are suppressed until this many tokens exist (0 = never);
        benchmarks use it to time a fixed-length decode.
    temperature: 0 means greedy decoding; > 0 samples with ``seed``.
    top_p: nucleus sampling mass when ``temperature > 0``.
    seed: seeds sampling, reset at every call so the same input gives the same output.
    stop_at_newline: stop at the first newline after the answer has started and return
        that first line (the papers' prompt asks for a short answer).
    threads: torch intra-op threads (process-wide); ``None`` leaves torch's setting alone.
    dtype: ``"float32"`` (default), ``"bfloat16"`` or ``"auto"`` (see the module docstring).
    prompt_style: ``"poisonedrag"`` or ``"ragfort"`` (see :mod:`ragshield.generate.prompt`).
    cache_dir: where converted packaged models live (see ``ragshield.models.models_dir``).
    show_progress: bars during a first-use conversion; ``None`` follows the environment.
    """

    _OWNER = "LocalLLMGenerator"

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        # The papers give no decoding settings; the prompt asks for a short answer
        # (PoisonedRAG template, RAGDefender §6.1), so 64 tokens and greedy decoding suffice.
        max_new_tokens: int = 64,
        min_new_tokens: int = 0,
        temperature: float = 0.0,
        top_p: float = 1.0,
        seed: int = 0,
        stop_at_newline: bool = True,
        threads: int | None = 1,
        dtype: str = "float32",
        prompt_style: str = "poisonedrag",
        cache_dir: str | os.PathLike[str] | None = None,
        show_progress: bool | None = None,
    ) -> None:
        self._init_decoding(locals())
        self._model: Any = None
        self._tokenizer: Any = None
        self._path: Path | None = None
        self._eos: frozenset[int] = frozenset()

    # -- set-up ----------------------------------------------------------------------------

    def _validate(self) -> None:
        self._check_decoding()

    @property
    def path_(self) -> Path:
        """The local HF folder the model loads from (converting a packaged model once)."""
        if self._path is None:
            from ragshield.models import fetch

            self._path = fetch(
                self.model, cache_dir=self.cache_dir, show_progress=self.show_progress
            )
        return self._path

    @property
    def tokenizer_(self) -> Any:
        """The model's tokenizer; loads without the model weights (cheap token counting)."""
        if self._tokenizer is None:
            self._validate()
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from transformers import AutoTokenizer

            try:
                tok = AutoTokenizer.from_pretrained(str(self.path_))
            except (OSError, ValueError) as exc:
                raise ModelNotFoundError(
                    f"cannot load the tokenizer from {self.path_}: {exc}"
                ) from exc
            self._tokenizer = tok
        return self._tokenizer

    @property
    def model_(self) -> Any:
        """The loaded ``transformers`` model (:attr:`dtype_`, eval mode)."""
        self.warm_up()
        return self._model

    def _loaded(self) -> bool:
        """Tokenizer and model are loaded (:meth:`warm_up` loads them once)."""
        return self._model is not None

    def _load(self) -> None:
        self._validate()
        tok = self.tokenizer_
        import torch
        from transformers import AutoModelForCausalLM

        from ragshield.models.provision import _quiet_transformers, progress_enabled

        self._set_threads()
        path = self.path_
        try:
            with _quiet_transformers(not progress_enabled(self.show_progress)):
                model = AutoModelForCausalLM.from_pretrained(
                    str(path), dtype=getattr(torch, self.dtype_)
                )
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(f"cannot load the model from {path}: {exc}") from exc
        model.eval()
        self._eos = end_token_ids(tok, model)
        self._model = model

    @property
    def dtype_(self) -> str:
        """The torch dtype name the weights load in (``"auto"`` resolved)."""
        if self.dtype == "auto":
            return "bfloat16" if cpu_has_bf16() else "float32"
        return self.dtype

    def _set_threads(self) -> None:
        if self.threads is None:
            return
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    # -- prompts ---------------------------------------------------------------------------

    def render(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The exact prompt text the model sees.

        With a chat template (every packaged model has one) the template renders the
        messages and opens the assistant turn; a base model without one gets the message
        contents joined by blank lines, which for :func:`build_messages` is exactly the
        papers' ``Context: ... Question: ... Answer:`` prompt.
        """
        msgs = check_messages(messages)
        tok = self.tokenizer_
        if getattr(tok, "chat_template", None):
            text: str = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            return text
        return "\n\n".join(m["content"] for m in msgs)

    def encode_messages(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        """Token ids of :meth:`render` (special tokens come from the template itself)."""
        tok = self.tokenizer_
        text = self.render(messages)
        add_special = not getattr(tok, "chat_template", None)
        ids: list[int] = tok(text, add_special_tokens=add_special)["input_ids"]
        return ids

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this model's tokenizer (no special tokens)."""
        if not isinstance(text, str):
            raise InputError(f"count_tokens expects a string. Got {type(text).__name__} instead.")
        return len(self.tokenizer_(text, add_special_tokens=False)["input_ids"])

    def cache_identity(self) -> dict[str, Any]:
        """Everything that changes the output for a given prompt (used by CachedGenerator)."""
        from ragshield.models import MODELS, conversion_record

        model_id: dict[str, Any] = {"model": str(self.model)}
        if isinstance(self.model, str) and self.model in MODELS:
            model_id["sha256"] = MODELS[self.model].sha256
        else:
            path = Path(self.model).expanduser().resolve()
            model_id["path"] = str(path)
            model_id["sha256"] = conversion_record(path).get("sha256")
            config = path / "config.json"
            model_id["config_mtime"] = config.stat().st_mtime if config.is_file() else None
        return {
            "kind": "local-hf",
            **model_id,
            "dtype": self.dtype_,
            **self._decoding_identity(),
        }

    # -- generation ------------------------------------------------------------------------

    def complete(self, messages: Sequence[Mapping[str, str]]) -> Generation:
        """Generate the assistant reply to arbitrary chat ``messages``."""
        self.warm_up()
        ids = self.encode_messages(messages)
        return self.generate_from_ids(ids)

    def generate_many(
        self, requests: Sequence[tuple[str, Sequence[str]]], *, batch_size: int | None = None
    ) -> list[Generation]:
        """:meth:`generate` for many ``(question, contexts)`` at once, in order.

        Greedy decoding runs in left-padded batches (:mod:`ragshield.generate.batch`: on a
        CPU a batch of 16 short replies decodes in about the time of two); a sampling
        generator answers them one by one, so a seeded sample never depends on its batch.
        So does a one-line answer to a long prompt (:data:`~ragshield.generate.batch.
        LONG_PROMPT_TOKENS` or more, newline-stopped, no explicit ``batch_size``): its
        cost is prefill, which batching does not share, and a batch decodes until its
        longest row ends — ``benchmarks/bench_batch.py`` measured 1.95 s per RAG answer
        alone against 2.64 s in batches of 8 and 4.35 s in batches of 16."""
        from ragshield.generate.batch import DEFAULT_BATCH_SIZE, LONG_PROMPT_TOKENS, generate_batch

        prompts = [self.prompt_ids(q, c) for q, c in requests]
        if not prompts:
            return []
        self.warm_up()
        if self.temperature > 0 or len(prompts) == 1:
            return [self.generate_from_ids(p) for p in prompts]
        limit = getattr(self.model_.config, "max_position_embeddings", None)
        for p in prompts:
            if isinstance(limit, int) and len(p) + self.max_new_tokens > limit:
                raise InputError(
                    f"a prompt has {len(p)} tokens; with max_new_tokens={self.max_new_tokens} "
                    f"it exceeds the model's context of {limit} tokens."
                )
        alone = [
            batch_size is None and self.stop_at_newline and len(p) >= LONG_PROMPT_TOKENS
            for p in prompts
        ]
        out: list[Generation | None] = [
            self.generate_from_ids(p) if one else None
            for p, one in zip(prompts, alone, strict=True)
        ]
        rest = [i for i, one in enumerate(alone) if not one]
        batched = generate_batch(
            self, [prompts[i] for i in rest], batch_size=batch_size or DEFAULT_BATCH_SIZE
        )
        for i, g in zip(rest, batched, strict=True):
            out[i] = g
        return [g for g in out if g is not None]

    @property
    def eos_ids_(self) -> frozenset[int]:
        """Token ids that end a reply (read from the loaded tokenizer and model)."""
        self.warm_up()
        return self._eos

    def generate_from_ids(self, input_ids: Sequence[int]) -> Generation:
        """Decode from a ready token prefix (prefill once, then KV-cached single steps).

        ``timings["prefill"]`` is the forward pass over the prompt (it also yields the first
        new token); ``timings["decode"]`` covers the remaining single-token steps, counted in
        ``details["decode_steps"]``. ``details["stop"]`` is ``"eos"``, ``"newline"`` or
        ``"max_new_tokens"``.
        """
        import torch

        model = self.model_
        tok = self.tokenizer_
        self._set_threads()
        ids = [int(i) for i in input_ids]
        if not ids:
            raise InputError("input_ids is empty: the prompt must have at least one token.")
        limit = getattr(model.config, "max_position_embeddings", None)
        if isinstance(limit, int) and len(ids) + self.max_new_tokens > limit:
            raise InputError(
                f"the prompt has {len(ids)} tokens; with max_new_tokens={self.max_new_tokens} "
                f"it exceeds the model's context of {limit} tokens. Pass fewer or shorter "
                "contexts."
            )
        sampler = None
        if self.temperature > 0:
            sampler = torch.Generator().manual_seed(self.seed)

        generated: list[int] = []
        steps = 0
        stop = "max_new_tokens"
        with torch.inference_mode():
            t0 = time.perf_counter()
            out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
            prefill = time.perf_counter() - t0
            t1 = time.perf_counter()
            past = out.past_key_values
            logits = out.logits[0, -1]
            suppress = torch.tensor(sorted(self._eos), dtype=torch.long)
            for step in range(self.max_new_tokens):
                if step < self.min_new_tokens and len(suppress):
                    logits = logits.index_fill(0, suppress, float("-inf"))
                token = self._pick(logits, sampler)
                if token in self._eos:
                    stop = "eos"
                    break
                generated.append(token)
                if self.stop_at_newline and answer_line_ended(
                    tok.decode(generated, skip_special_tokens=True)
                ):
                    stop = "newline"
                    break
                if step == self.max_new_tokens - 1:
                    break
                out = model(
                    input_ids=torch.tensor([[token]]),
                    past_key_values=past,
                    use_cache=True,
                    logits_to_keep=1,
                )
                steps += 1
                past = out.past_key_values
                logits = out.logits[0, -1]
            decode = time.perf_counter() - t1

        raw = tok.decode(generated, skip_special_tokens=True)
        text = self._reply(raw)
        n_new = len(generated)
        return Generation(
            text=text,
            prompt_tokens=len(ids),
            completion_tokens=n_new,
            timings={"prefill": prefill, "decode": decode},
            details={
                "model": str(self.model),
                "stop": stop,
                "raw": raw,
                "completion_ids": generated,
                "prefill_tokens_per_s": len(ids) / prefill if prefill > 0 else 0.0,
                "decode_steps": steps,
                "decode_tokens_per_s": steps / decode if decode > 0 and steps else 0.0,
            },
        )

    def _pick(self, logits: Any, sampler: Any) -> int:
        import torch

        if sampler is None:
            return int(torch.argmax(logits).item())
        probs = torch.softmax(logits.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_p, order = torch.sort(probs, descending=True)
            keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < self.top_p
            probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
        return int(torch.multinomial(probs, 1, generator=sampler).item())

    # -- raw distributions (RAGFort cascade) -----------------------------------------------

    def _as_batch(self, input_ids: Any) -> tuple[Any, bool]:
        import torch

        ids = input_ids if isinstance(input_ids, torch.Tensor) else torch.tensor(input_ids)
        ids = ids.to(torch.long)
        if ids.dim() == 1:
            ids, squeeze = ids.unsqueeze(0), True
        elif ids.dim() == 2:
            squeeze = False
        else:
            raise InputError(f"input_ids must be 1-D or 2-D token ids. Got {ids.dim()}-D instead.")
        if ids.shape[-1] == 0:
            raise InputError("input_ids is empty: the prefix must have at least one token.")
        return ids, squeeze

    def next_token_logits(self, input_ids: Any) -> Any:
        """Raw logits over the full vocabulary for the token after ``input_ids``.

        ``input_ids``: a list of ints or a 1-D tensor -> returns a 1-D float32 tensor of
        ``model.config.vocab_size``; a 2-D ``[batch, length]`` tensor (equal lengths) ->
        ``[batch, vocab]``. Apply ``torch.softmax`` for probabilities.
        """
        import torch

        ids, squeeze = self._as_batch(input_ids)
        self._set_threads()
        with torch.inference_mode():
            logits = self.model_(input_ids=ids, use_cache=False, logits_to_keep=1).logits[:, -1]
        logits = logits.float()
        return logits[0] if squeeze else logits

    def continuation_logits(
        self, prefix_ids: Sequence[int], continuation_ids: Sequence[int]
    ) -> Any:
        """Next-token logits at every position of ``continuation_ids``, in one forward pass.

        Row ``t`` is the distribution the model assigns to ``continuation_ids[t]`` given the
        prefix and ``continuation_ids[:t]``; shape ``[len(continuation), vocab]``.
        """
        import torch

        prefix = [int(i) for i in prefix_ids]
        cont = [int(i) for i in continuation_ids]
        if not prefix or not cont:
            raise InputError("prefix_ids and continuation_ids must both be non-empty.")
        ids = torch.tensor([prefix + cont])
        self._set_threads()
        with torch.inference_mode():
            logits = self.model_(
                input_ids=ids, use_cache=False, logits_to_keep=len(cont) + 1
            ).logits
        return logits[0, :-1].float()

    def token_logprobs(self, prefix_ids: Sequence[int], continuation_ids: Sequence[int]) -> Any:
        """log p(continuation_ids[t] | prefix, continuation_ids[:t]) for each t (1-D tensor)."""
        import torch

        logits = self.continuation_logits(prefix_ids, continuation_ids)
        logp = torch.log_softmax(logits, dim=-1)
        index = torch.tensor([int(i) for i in continuation_ids]).unsqueeze(1)
        return logp.gather(1, index).squeeze(1)
