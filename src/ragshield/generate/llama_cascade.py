"""RAGFort's cascade on llama.cpp: per-token logits with KV rollback from the packaged GGUF.

:class:`~ragshield.generate.cascade.CascadeGenerator` asks each model for
``logits(ids, n_last)``: next-token logits for the last ``n_last`` prefixes of one growing
sequence, the draft one token at a time, the reference a whole block of γ + 1 at once, and
after a rejection the sequence shrinks back to the accepted tokens. :class:`LlamaScorer`
serves that from a :class:`~ragshield.generate.llama_cpp.LlamaCppGenerator`'s engine:

* Sequence 0 of the engine's KV cache holds the last ids scored (``engine.prefix``, the
  same bookkeeping :meth:`~ragshield.generate.llama_engine._Engine.run` keeps). A call
  keeps the longest common prefix, drops the cells after it (``llama_memory_seq_rm``: the
  rollback after rejected drafts) and computes only the rest, asking llama.cpp for the
  logits of the last ``n_last`` positions — so a draft step costs one token and a
  verification γ + 1, as on the transformers path (:class:`~ragshield.generate.
  cascade_scorers._HFScorer`).
* Because ``engine.prefix`` is what the engine itself trusts, a generator sharing the
  engine between two cascade calls (the pipeline's answering generator of the same
  weights) finds a consistent cache, and the cascade's prompt head stays computed for it.
* :class:`LlamaTokenizer` gives the cascade the handful of tokenizer calls it makes
  (encode, the chat template, decode, the end ids) from the GGUF's own tokenizer, so no
  ``transformers`` model or tokenizer is converted or loaded: the 4-bit weights are the
  only copy in memory.

Why not the transformers reference (what the cascade used before): the 1.5B reference in
float32 through transformers peaks near 9 GB and decodes at ~2 tokens/s on one contended
core (MODELS.md); the same GGUF on llama.cpp needs a quarter of the memory and runs the
quantised kernels. The two paths agree to numerical tolerance, not bit for bit (different
kernels): ``tests/generate/test_llama_cascade.py`` states the tolerance it checks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ragshield.errors import InputError
from ragshield.generate.cascade_scorers import _Counter, _Scorer
from ragshield.generate.llama_engine import _common_prefix

if TYPE_CHECKING:
    from ragshield.generate.llama_cpp import LlamaCppGenerator


class LlamaScorer(_Scorer):
    """``logits(ids, n_last)`` from a llama.cpp generator's engine (module docstring)."""

    def __init__(self, generator: LlamaCppGenerator) -> None:
        self.generator = generator
        self.params = int(generator.engine_.model.n_params())
        self.counter = _Counter()

    def logits(self, ids: list[int], n_last: int) -> np.ndarray:
        if not 1 <= n_last <= len(ids):
            raise InputError(f"n_last must be 1..{len(ids)} (the ids scored); got {n_last}.")
        gen = self.generator
        engine = gen.engine_
        if len(ids) > engine.n_ctx:
            raise InputError(
                f"the cascade's sequence has {len(ids)} tokens, more than the llama.cpp "
                f"context of {engine.n_ctx}: pass fewer or shorter contexts (or a larger n_ctx)."
            )
        with engine.lock:
            engine.set_threads(gen.threads_)
            keep = _common_prefix([engine.prefix, ids], limit=len(ids) - n_last)
            if not engine.lc.llama_memory_seq_rm(engine.ctx.memory, 0, keep, -1):
                # a cache that cannot drop a tail (not the case for these models): start over
                engine.lc.llama_memory_seq_rm(engine.ctx.memory, 0, 0, -1)
                keep = 0
            engine.prefix = list(ids[:keep])  # what sequence 0 holds, should decode fail
            first_wanted = len(ids) - n_last
            items = [(0, pos, int(ids[pos]), pos >= first_wanted) for pos in range(keep, len(ids))]
            t0 = time.perf_counter()
            rows = engine.decode(items)
            self.counter.seconds += time.perf_counter() - t0
            engine.prefix = list(ids)
        self.counter.forwards += 1
        self.counter.tokens += len(items)
        return np.vstack(rows)


class LlamaLogits:
    """What a :class:`LlamaCppGenerator` hands the cascade as its "model": a factory of
    :class:`LlamaScorer` (``cascade_scorers._make_scorer`` asks for ``cascade_scorer()``)."""

    def __init__(self, generator: LlamaCppGenerator) -> None:
        self.generator = generator

    def cascade_scorer(self) -> LlamaScorer:
        return LlamaScorer(self.generator)


class LlamaTokenizer:
    """The tokenizer calls :class:`~ragshield.generate.cascade.CascadeGenerator` makes,
    answered by the GGUF's tokenizer through llama.cpp (module docstring).

    ``tok(text, add_special_tokens=False)["input_ids"]`` parses special-token text (the
    chat template's turn markers) as ``transformers`` does; ``decode(ids,
    skip_special_tokens=True)`` drops control tokens; ``eos_token_id`` lists every id that
    ends a reply (:attr:`LlamaCppGenerator.eos_ids_`)."""

    def __init__(self, generator: LlamaCppGenerator) -> None:
        self.generator = generator

    @property
    def chat_template(self) -> str | None:
        self.generator.warm_up()
        return self.generator._template

    @property
    def eos_token_id(self) -> list[int]:
        return sorted(self.generator.eos_ids_)

    def __call__(self, text: str, add_special_tokens: bool = False) -> dict[str, list[int]]:
        model = self.generator.engine_.model
        add_bos = bool(add_special_tokens and model.add_bos_token())
        ids = model.tokenize(text.encode("utf-8"), add_bos, True)
        return {"input_ids": [int(i) for i in ids]}

    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        add_generation_prompt: bool = True,
        tokenize: bool = False,
    ) -> str | list[int]:
        if not add_generation_prompt:
            raise InputError("the llama.cpp tokenizer renders prompts for a reply only.")
        if tokenize:
            return self.generator.encode_messages(messages)
        return self.generator.render(messages)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        if not skip_special_tokens:
            raise InputError("the llama.cpp tokenizer decodes without special tokens only.")
        return self.generator.detokenize(ids)
