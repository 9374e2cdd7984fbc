"""Build a generator from one string, the form the CLI, config files and the server use.

Accepted specs::

    None, "", "extractive"          -> ExtractiveGenerator(encoder)      (no LLM)
    "qwen2.5-0.5b" (any packaged)    -> LlamaCppGenerator("qwen2.5-0.5b") when llama.cpp is
                                        installed, else LocalLLMGenerator (see below)
    "local:NAME_OR_FOLDER"           -> the same for a name; LocalLLMGenerator(FOLDER)
    "/path/to/hf-model-folder"       -> LocalLLMGenerator(folder)        (has config.json)
    "openai:BASE_URL#MODEL"          -> OpenAICompatGenerator(BASE_URL, MODEL)
        e.g. "openai:http://127.0.0.1:8080/v1#qwen2.5-7b-instruct"; the key comes from
        OPENAI_API_KEY.

Example::

    gen = make_generator("qwen2.5-0.5b", cache_dir="runs/gen-cache", max_new_tokens=32)

A packaged model runs on the engine :func:`ragshield.models.backends.resolve_backend`
picks: the ``backend`` option (``"llama.cpp"``, ``"transformers"`` or ``"auto"``), else
``$RAGSHIELD_LLM_BACKEND``, else llama.cpp when installed. A Hugging Face folder always runs
on transformers (llama.cpp needs the GGUF).

Nothing heavy happens here: models load on first use (``warm_up``), so building a
pipeline from a config stays instant.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.generate.engine_options import usable_cores

SPEC_HELP = (
    "'extractive', a packaged model name ({names}), 'local:<name or folder>', a local "
    "Hugging Face model folder, or 'openai:<base_url>#<model>'"
)


def _names() -> str:
    from ragshield.models import MODELS

    return ", ".join(sorted(MODELS))


def batch_job_options(spec: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Options for a local model in a job that owns the machine (``ragshield scan``,
    benchmarks): ``dtype="auto"`` (bf16 where the CPU has bf16 units) and one torch
    thread per usable core. Measured here (Qwen2.5-0.5B, 2 cores, AVX512-BF16): prefill
    99 → 403 tokens/s and decode 6.5 → 10 steps/s against the interactive default
    (float32, one thread, which stays polite on a shared CPU). ``{}`` for other specs."""
    text = "" if spec is None else os.fspath(spec).strip()
    if text in ("", "extractive", "template") or text.startswith("openai:"):
        return {}
    return {"dtype": "auto", "threads": usable_cores()}


def make_generator(
    spec: str | os.PathLike[str] | None,
    encoder: Encoder | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Generator:
    """The generator ``spec`` names (see the module docstring for the forms).

    ``encoder`` is used by the extractive generator only. ``cache_dir`` wraps the result
    in :class:`~ragshield.generate.cache.CachedGenerator`. ``options`` go to the
    generator's constructor (e.g. ``max_new_tokens``, ``temperature``, ``threads``);
    ``max_new_tokens`` is also accepted for OpenAI endpoints (sent as ``max_tokens``).
    """
    gen = _build(spec, encoder, options)
    if cache_dir is not None:
        from ragshield.generate.cache import CachedGenerator

        return CachedGenerator(gen, cache_dir)
    return gen


def _build(
    spec: str | os.PathLike[str] | None, encoder: Encoder | None, options: dict[str, Any]
) -> Generator:
    from ragshield.models import MODELS
    from ragshield.models.locate import is_local_model_dir

    if spec is not None and not isinstance(spec, (str, os.PathLike)):
        raise InputError(
            f"generator spec must be a string. Got {type(spec).__name__} instead; pass "
            + SPEC_HELP.format(names=_names())
            + "."
        )
    text = "" if spec is None else os.fspath(spec).strip()

    if text in ("", "extractive"):
        from ragshield.generate.extractive import ExtractiveGenerator

        if options:
            raise InputError(f"the extractive generator takes no options; got {sorted(options)}.")
        return ExtractiveGenerator(encoder)

    if text.startswith("openai:"):
        rest = text[len("openai:") :]
        base_url, sep, model = rest.rpartition("#")
        if not sep or not base_url or not model:
            raise InputError(
                f"generator spec {text!r} must look like 'openai:<base_url>#<model>', e.g. "
                "'openai:http://127.0.0.1:8080/v1#qwen2.5-7b-instruct'."
            )
        from ragshield.generate.openai_compat import OpenAICompatGenerator

        # One option name across generators: the local ``max_new_tokens`` is the API's
        # ``max_tokens``.
        if "max_new_tokens" in options and "max_tokens" not in options:
            options = {**options, "max_tokens": options["max_new_tokens"]}
            del options["max_new_tokens"]
        return _construct(OpenAICompatGenerator, base_url, model, **options)

    target: str | Path | None = None
    if text.startswith("local:"):
        target = text[len("local:") :].strip()
        if target not in MODELS and not is_local_model_dir(target):
            raise InputError(
                f"{text!r}: {target!r} is neither a packaged model ({_names()}) nor a local "
                "Hugging Face model folder (a directory with config.json)."
            )
    elif text in MODELS:
        target = text
    elif is_local_model_dir(text):
        target = Path(text).expanduser()
    if target is None:
        raise InputError(
            f"unknown generator {text!r}: pass " + SPEC_HELP.format(names=_names()) + "."
        )
    from ragshield.models.backends import resolve_backend

    requested = options.pop("backend", None)
    backend = resolve_backend(requested)
    if isinstance(target, str) and target in MODELS and backend == "llama.cpp":
        from ragshield.generate.llama_cpp import LlamaCppGenerator

        return _construct(LlamaCppGenerator, target, **options)
    if requested and backend == "llama.cpp":
        raise InputError(
            f"the llama.cpp backend runs a packaged GGUF model ({_names()}); {text!r} is a "
            "Hugging Face folder: use backend='transformers'."
        )
    from ragshield.generate.local_hf import LocalLLMGenerator

    return _construct(LocalLLMGenerator, target, **options)


def _construct(cls: Any, *args: Any, **options: Any) -> Generator:
    """``cls(*args, **options)``, with an option the class does not take reported as a
    user error (e.g. ``dtype`` given for an OpenAI endpoint) instead of a TypeError."""
    import inspect

    params = inspect.signature(cls).parameters
    accepted = [n for n, p in params.items() if p.kind is not p.VAR_KEYWORD and n != "self"]
    flat = getattr(cls, "flat_param_names", None)  # grouped options, by their flat names
    accepted += [n for n in (flat() if callable(flat) else ()) if n not in accepted]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise InputError(
            f"{cls.__name__} does not take the option(s) {', '.join(unknown)}; it takes "
            f"{', '.join(accepted)}."
        )
    gen: Generator = cls(*args, **options)
    return gen
