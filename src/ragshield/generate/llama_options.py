"""The llama.cpp engine's own options, one frozen group apart from the decoding options.

Example::

    from ragshield.generate.llama_cpp import LlamaCppGenerator
    from ragshield.generate.llama_options import LlamaEngineOptions

    LlamaCppGenerator("qwen2.5-0.5b", engine_options=LlamaEngineOptions(batch_size=32))
    LlamaCppGenerator("qwen2.5-0.5b", batch_size=32)            # the same, by its flat name
    LlamaCppGenerator("qwen2.5-0.5b", engine_options={"batch_size": 32})   # a config table

Why: :class:`~ragshield.generate.llama_cpp.LlamaCppGenerator` takes the twelve decoding
options both local engines share (:data:`~ragshield.generate.engine_options.DECODING_OPTIONS`)
plus seven that only say how llama.cpp holds the model and its KV cache; nineteen flat
parameters hide which is which (issue #22 caps a public constructor at about twelve). The
seven live here with their defaults and reasons; the generator reads and assigns them by
their flat names (:class:`~ragshield.defenses.params.StagedParams`), which configs, the
CLI's options and the benchmarks keep using.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragshield.errors import check_int
from ragshield.models.formats import check_format


@dataclass(frozen=True)
class LlamaEngineOptions:
    """How llama.cpp holds the model and its KV cache (see ``LlamaCppGenerator``).

    n_ctx: KV cache cells shared by the rows of a batch (ours: 16,384 holds eight
        1,300-token RAG prompts with their answers; 0.5B: 12 KB per cell).
    batch_size: most rows decoded together by ``generate_many`` (ours: 8; CPU
        milliseconds per generated token of the bf16 0.5B at 2 threads: 42.7 for one row,
        13.9 for 8, 8.3 for 16, 7.5 for 32 — ``docs/results-llm-engine.md``, round 6 — but
        16 rows changed one of 20 answers against the reference and saved no CPU on RAG
        prompts, whose cost is prefill; a layout change needs its own agreement run).
    reuse_prefix: keep the last prompts' shared prefix in the KV cache
        (:mod:`ragshield.generate.llama_cpp`); ``False`` recomputes every prompt from
        scratch (benchmarks time prefill with it).
    weights: ``"packaged"`` runs the packaged GGUF as is; ``"bf16"`` its matrices widened
        to bfloat16 once into the cache (:mod:`ragshield.models.formats`: about twice the
        prefill tokens/s on AVX512-BF16, slower one-row decode;
        ``docs/results-llm-engine.md``); ``"auto"`` (ours): the model's measured best (bf16 for qwen2.5-0.5b) where llama.cpp
        has bf16 dot products here, else packaged.
    share_engine: use the process's engine of the same weights, ``n_ctx`` and
        ``batch_size`` when there is one (:mod:`ragshield.generate.llama_cpp`); ``False``
        loads a private copy (the model's memory twice, no shared prefix).
    state_cache_mb: RAM for saved KV states of earlier prompts, restored when a new prompt
        shares a long head with one (:mod:`ragshield.generate.kv_states`; ours: 1,024 MB
        holds about 100 of the scan's 800-token 0.5B prompts at ~13 KB per token, i.e. the
        previous defense chain's prompts of a 50-question scan); 0 turns it off. Same
        answers up to the kernels' rounding (a restored row's cells were computed in
        another batch; ``docs/results-llm-engine.md`` counts the agreement).
    refill: continuous batching in ``generate_many``: a row that ends hands its sequence
        to the next waiting prompt at the next decode step, so steps keep ``batch_size``
        rows while prompts wait, instead of groups of ``batch_size`` that run until their
        longest reply ends (ours, off: it changes which rows share a step and so, measured,
        the writer's texts; ``bench_scan.py --writer-refill on`` turns it on for the
        writer, whose uneven replies it suits: −27 % writer LLM CPU at 50 questions, but
        the scan's ``mixed-2x`` ASR moved by 0.04-0.06 with its texts,
        ``docs/results-llm-engine.md``, round 9).
    """

    n_ctx: int = 16384  # ours: eight 1,300-token RAG prompts and their answers
    batch_size: int = 8  # ours: 16 changed 1 of 20 answers for no RAG gain (results, round 6)
    reuse_prefix: bool = True  # ours: every RAG prompt opens with the same instruction
    weights: str = "auto"  # ours: bf16 for qwen2.5-0.5b where llama.cpp has bf16 kernels
    share_engine: bool = True  # ours: one model in memory per process and sizes
    state_cache_mb: int = 1024  # ours: ~100 of the scan's 800-token 0.5B prompts
    refill: bool = False  # ours: off, its 50-question agreement missed 0.02 (results, round 9)

    def check(self, owner: str) -> None:
        """One-line errors for a bad option (before any loading)."""
        from ragshield.generate.engine_options import check_bool

        check_int(self.n_ctx, "n_ctx", owner, low=256)
        check_int(self.batch_size, "batch_size", owner, low=1, high=64)
        check_format(self.weights, owner)
        check_bool(self.reuse_prefix, "reuse_prefix", owner)
        check_bool(self.share_engine, "share_engine", owner)
        check_bool(self.refill, "refill", owner)
        check_int(self.state_cache_mb, "state_cache_mb", owner, low=0, high=1 << 20)
