"""What both local engines share: the decoding options, their checks, their cache key
fields, the papers' prompt and the reply text.

Example::

    class MyEngine(LocalDecoding):
        def __init__(self, model, *, max_new_tokens=64, ...):
            self._init_decoding(locals())

Why one place: :class:`~ragshield.generate.local_hf.LocalLLMGenerator` (the float32
reference) and :class:`~ragshield.generate.llama_cpp.LlamaCppGenerator` (the fast path)
must answer the same request the same way, so the options that define a request (and so
its cache key), how they are checked, the prompt they build and how a raw reply becomes
the answer are written once here; each engine keeps only what differs (weights, kernels,
batching).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ragshield.errors import InputError, check_float, check_int, check_query
from ragshield.generate.lines import first_line
from ragshield.generate.prompt import build_messages, system_prompt
from ragshield.types import Generation

DTYPES = ("float32", "bfloat16", "auto")
# Turn-end markers of common chat templates: a template's own end token is not always the
# config's eos (Qwen's config names <|im_end|>, while <|endoftext|> also ends a reply).
END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "</s>")


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@functools.cache
def cpu_has_bf16() -> bool:
    """True when the CPU has bf16 matrix instructions (Linux /proc/cpuinfo flags).

    Read once per process: ``dtype="auto"`` resolves it on every cache-key computation.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False


#: The constructor options both engines take, under the same names and defaults.
DECODING_OPTIONS = (
    "model", "max_new_tokens", "min_new_tokens", "temperature", "top_p", "seed",
    "stop_at_newline", "threads", "dtype", "prompt_style", "cache_dir", "show_progress",
)  # fmt: skip


class LocalDecoding:
    """Mixin: the shared options (see :class:`LocalLLMGenerator` for their meaning)."""

    _OWNER = "LocalDecoding"
    model: Any
    max_new_tokens: int
    min_new_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop_at_newline: bool
    threads: int | None
    dtype: str
    prompt_style: str
    cache_dir: str | os.PathLike[str] | None
    show_progress: bool | None
    name: str

    def _init_decoding(self, given: Mapping[str, Any]) -> None:
        """Set the shared options from the constructor's ``locals()`` (same names), so each
        engine's signature stays explicit (and documented) without a second copy of this."""
        for key in DECODING_OPTIONS:
            setattr(self, key, given[key])
        self.name = f"local:{self.model}"
        # re-entrant: a load may read properties that warm up (e.g. the llama.cpp engine_)
        self._load_lock = threading.RLock()

    # -- loading (each engine provides _loaded and _load) ----------------------------------

    def _loaded(self) -> bool:
        raise NotImplementedError

    def _load(self) -> None:
        raise NotImplementedError

    def warm_up(self) -> None:
        """Load the model once; safe to call repeatedly and from several threads (the lock
        is taken only while nothing is loaded, so a loaded generator never waits on it)."""
        if self._loaded():
            return
        with self._load_lock:
            if not self._loaded():
                self._load()

    def _check_decoding(self) -> None:
        """One-line errors for a bad shared option (checked before any loading)."""
        owner = self._OWNER
        check_int(self.max_new_tokens, "max_new_tokens", owner, low=1)
        check_int(self.min_new_tokens, "min_new_tokens", owner, low=0)
        check_float(self.temperature, "temperature", owner, low=0.0, high=100.0)
        check_float(self.top_p, "top_p", owner, low=0.0, high=1.0, low_open=True)
        check_int(self.seed, "seed", owner, low=0)
        check_bool(self.stop_at_newline, "stop_at_newline", owner)
        if self.threads is not None:
            check_int(self.threads, "threads", owner, low=1)
        system_prompt(self.prompt_style)
        if self.dtype not in DTYPES:
            raise InputError(
                f"The 'dtype' parameter of {owner} must be one of {', '.join(DTYPES)}. "
                f"Got {self.dtype!r} instead."
            )

    def _decoding_identity(self) -> dict[str, Any]:
        """The shared options as cache-key fields (each engine adds its own)."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "min_new_tokens": self.min_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed if self.temperature > 0 else None,
            "stop_at_newline": self.stop_at_newline,
            # only when not the default, so answers cached before the option existed stay valid
            **({} if self.prompt_style == "poisonedrag" else {"prompt_style": self.prompt_style}),
        }

    def _reply(self, raw: str) -> str:
        """The answer text of a raw reply: its first line, or all of it stripped."""
        return first_line(raw) if self.stop_at_newline else raw.strip()

    # -- the papers' prompt (each engine provides encode_messages and complete) ------------

    def encode_messages(self, messages: Sequence[Mapping[str, str]]) -> list[int]:
        raise NotImplementedError

    def complete(self, messages: Sequence[Mapping[str, str]]) -> Generation:
        raise NotImplementedError

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        """Answer ``question`` from ``contexts`` with the papers' prompt."""
        check_query(question)
        return self.complete(build_messages(question, check_contexts(contexts), self.prompt_style))

    def prompt_ids(self, question: str, contexts: Sequence[str]) -> list[int]:
        """Token ids of the papers' RAG prompt for this model."""
        check_query(question)
        return self.encode_messages(
            build_messages(question, check_contexts(contexts), self.prompt_style)
        )


def check_bool(value: Any, name: str, owner: str) -> None:
    if not isinstance(value, bool):
        raise InputError(
            f"The {name!r} parameter of {owner} must be a bool. Got {value!r} instead."
        )


def check_contexts(contexts: object) -> list[str]:
    """``contexts`` as a list of passage texts, or a one-line error."""
    if isinstance(contexts, str) or not isinstance(contexts, Sequence):
        raise InputError(
            "contexts must be a list of passage texts, not "
            f"{'a bare string' if isinstance(contexts, str) else type(contexts).__name__}."
        )
    bad = [i for i, c in enumerate(contexts) if not isinstance(c, str)]
    if bad:
        raise InputError(f"contexts must all be strings; item {bad[0]} is not.")
    return list(contexts)


def check_messages(messages: object) -> list[dict[str, str]]:
    """``messages`` as plain ``{'role', 'content'}`` dicts, or a one-line error."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise InputError(
            "messages must be a non-empty list of {'role': ..., 'content': ...} mappings."
        )
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        if (
            not isinstance(m, Mapping)
            or not isinstance(m.get("role"), str)
            or not isinstance(m.get("content"), str)
        ):
            raise InputError(f"message {i} must be a mapping with string 'role' and 'content'.")
        out.append({"role": m["role"], "content": m["content"]})
    return out
