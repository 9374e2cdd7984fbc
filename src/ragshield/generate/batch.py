"""Greedy decoding of many prompts at once with a local causal LM (left-padded batches).

Example::

    from ragshield.generate.local_hf import LocalLLMGenerator

    gen = LocalLLMGenerator("qwen2.5-0.5b", stop_at_newline=False)
    outs = gen.generate_many([("Write one line about the moon.", []),
                              ("Write one line about the sea.", [])])

Why: on a CPU one decode step is bound by reading the weights, not by arithmetic, so eight
sequences decode for about the price of one (Qwen2.5-0.5B, bf16, 2 cores, measured here:
10 steps/s for one row, 7.9 steps/s for eight = 63 tokens/s, 125 tokens/s for 32). The scan writes hundreds of
short attack passages; decoding them eight or sixteen at a time turns its slowest stage
into one of its cheapest. Prefill is compute-bound and gains nothing from batching, so
:func:`generate_batch` groups prompts of similar length (little padding).

It runs ``transformers``' own ``generate`` (left padding, attention mask, per-row end
tokens) rather than a hand-written loop: the single-prompt path in
:mod:`ragshield.generate.local_hf` is written out only because it times prefill and
decode apart and serves RAGFort's raw distributions, which a batch needs neither of. Only
greedy decoding is batched; a sampling generator answers one prompt at a time, so a
seeded sample never depends on which prompts shared its batch.

Numerics: a padded row sees the same tokens and positions as alone, but matrix shapes
differ, so in bf16 an occasional near-tie can resolve differently than in a single call.
Batched and single generations are cached under the same key; each is a valid greedy
output of the model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragshield.generate.lines import answer_line_ended, first_line
from ragshield.types import Generation

if TYPE_CHECKING:
    from ragshield.generate.local_hf import LocalLLMGenerator

#: Rows decoded together (ours; Qwen2.5-0.5B, bf16, 2 cores, measured: 10 tokens/s for
#: one row, 89 for 16, 125 for 32, 134 for 48 — past 32 the gain is small).
DEFAULT_BATCH_SIZE = 32
#: From this prompt length a newline-stopped answer is decoded alone (ours, measured by
#: ``benchmarks/bench_batch.py`` on SQuAD RAG prompts of 648-1,318 tokens: 1.95 s per
#: answer alone, 2.27 in batches of 4, 4.35 in batches of 16; short prompts still batch).
LONG_PROMPT_TOKENS = 512


def generate_batch(
    gen: LocalLLMGenerator,
    prompts: Sequence[Sequence[int]],
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> list[Generation]:
    """Greedy generations for token-id ``prompts``, in order (see the module docstring)."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    out: list[Generation | None] = [None] * len(prompts)
    for start in range(0, len(order), max(1, batch_size)):
        chunk = order[start : start + batch_size]
        for i, g in zip(chunk, _one_batch(gen, [list(prompts[i]) for i in chunk]), strict=True):
            out[i] = g
    return [g for g in out if g is not None]


def _one_batch(gen: LocalLLMGenerator, batch: list[list[int]]) -> list[Generation]:
    import torch

    model, tok = gen.model_, gen.tokenizer_
    gen._set_threads()
    pad = tok.pad_token_id if tok.pad_token_id is not None else min(gen.eos_ids_)
    width = max(len(p) for p in batch)
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for r, p in enumerate(batch):
        ids[r, width - len(p) :] = torch.tensor(p)
        mask[r, width - len(p) :] = 1
    eos = sorted(gen.eos_ids_)
    criteria = [_NewlineStop(tok, width)] if gen.stop_at_newline else []
    t0 = time.perf_counter()
    with torch.inference_mode():
        seqs = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=gen.max_new_tokens,
            min_new_tokens=gen.min_new_tokens or None, do_sample=False, eos_token_id=eos,
            pad_token_id=pad, stopping_criteria=_criteria_list(criteria),
            temperature=None, top_p=None, top_k=None,
        )  # fmt: skip
    share = (time.perf_counter() - t0) / len(batch)
    results = []
    for r, p in enumerate(batch):
        new: list[int] = []
        stop = "max_new_tokens"
        for t in seqs[r, width:].tolist():
            if t in gen.eos_ids_:
                stop = "eos"
                break
            new.append(int(t))
            if gen.stop_at_newline and answer_line_ended(tok.decode(new, skip_special_tokens=True)):
                stop = "newline"
                break
        raw = tok.decode(new, skip_special_tokens=True)
        results.append(
            Generation(
                text=first_line(raw) if gen.stop_at_newline else raw.strip(),
                prompt_tokens=len(p),
                completion_tokens=len(new),
                timings={"prefill": 0.0, "decode": share},
                details={
                    "model": str(gen.model),
                    "stop": stop,
                    "raw": raw,
                    "completion_ids": new,
                    "batch_size": len(batch),
                },
            )
        )
    return results


def _criteria_list(criteria: list[Any]) -> Any:
    from transformers import StoppingCriteriaList

    return StoppingCriteriaList(criteria)


class _NewlineStop:
    """Per-row stop once a row's answer line has ended (as the single-prompt path does)."""

    def __init__(self, tok: Any, width: int) -> None:
        self.tok = tok
        self.width = width

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = [
            answer_line_ended(self.tok.decode(row[self.width :], skip_special_tokens=True))
            for row in input_ids.tolist()
        ]
        return torch.tensor(done, dtype=torch.bool)
