"""Which inference engine runs a packaged model: llama.cpp (fast) or transformers (reference).

Example::

    from ragshield.models.backends import resolve_backend
    resolve_backend(None)              # "llama.cpp" when llama-cpp-python is installed
    resolve_backend("transformers")    # the float32 reference path, always available

Why two engines: the packaged weights are 4-bit GGUF files. llama.cpp runs them as they
are, with quantised CPU kernels (``docs/results-llm-engine.md``: several times the
tokens/s of the transformers path on this 2-core machine); transformers de-quantises them
to float32 once and is kept as the numerical reference, as the engine of RAGFort's
cascade (which reads raw logits through a ``transformers`` model) and as the fallback
when llama-cpp-python is not installed.

The choice, in order: the ``backend`` option (``make_generator(..., backend=...)``), the
``RAGSHIELD_LLM_BACKEND`` environment variable, then ``"auto"`` (llama.cpp when it can be
imported, else transformers). A backend named explicitly but not installed is an error,
never a silent fallback: a figure must say which engine produced it.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass

from ragshield.errors import InputError

ENV = "RAGSHIELD_LLM_BACKEND"
AUTO = "auto"


@dataclass(frozen=True)
class Backend:
    """One engine: its name, the module it needs, and how to install it."""

    name: str
    module: str
    install: str
    weights: str


BACKENDS: dict[str, Backend] = {
    "llama.cpp": Backend(
        name="llama.cpp",
        module="llama_cpp",
        install='pip install "ragshield[llamacpp]" (builds llama-cpp-python from source)',
        weights="GGUF as packaged (4-bit), quantised CPU kernels",
    ),
    "transformers": Backend(
        name="transformers",
        module="transformers",
        install='pip install "ragshield[llm]"',
        weights="GGUF de-quantised to float32 (reference)",
    ),
}
# Tried in this order by "auto".
_PREFERENCE = ("llama.cpp", "transformers")


@functools.cache
def is_available(name: str) -> bool:
    """True when the engine's Python module can be imported here (checked once)."""
    return importlib.util.find_spec(BACKENDS[name].module) is not None


def _check_name(name: str, source: str) -> str:
    text = name.strip().lower()
    aliases = {"llamacpp": "llama.cpp", "llama-cpp": "llama.cpp", "hf": "transformers"}
    text = aliases.get(text, text)
    if text != AUTO and text not in BACKENDS:
        raise InputError(
            f"unknown LLM backend {name!r} ({source}); choose one of "
            f"{', '.join([AUTO, *BACKENDS])}."
        )
    return text


def resolve_backend(requested: str | None = None) -> str:
    """The engine a packaged model runs on (see the module docstring for the order)."""
    if requested is not None and not isinstance(requested, str):
        raise InputError(f"backend must be a string. Got {type(requested).__name__} instead.")
    if requested:
        name, source = _check_name(requested, "the backend option"), "the backend option"
    else:
        env = os.environ.get(ENV, "").strip()
        name, source = (_check_name(env, f"${ENV}"), f"${ENV}") if env else (AUTO, "")
    if name == AUTO:
        return next(n for n in _PREFERENCE if is_available(n))
    if not is_available(name):
        raise InputError(
            f"the LLM backend {name!r} ({source}) is not installed: {BACKENDS[name].install}."
        )
    return name
