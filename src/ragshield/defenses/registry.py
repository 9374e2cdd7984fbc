"""Defenses by name, so the CLI, config files and the service build chains the same way."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from ragshield.defenses.base import PassageFilter
from ragshield.defenses.compose import FilterChain
from ragshield.embed.base import Encoder
from ragshield.errors import InputError

# name -> "module:Class"; imported on use so `import ragshield` stays light.
_REGISTRY: dict[str, str] = {
    "ragdefender": "ragshield.defenses.ragdefender:RAGDefender",
    "ragdefender-paper": "ragshield.defenses.ragdefender:PaperRAGDefender",
    "ecosaferag": "ragshield.defenses.ecosaferag:EcoSafeRAG",
    "similarity-threshold": "ragshield.defenses.baselines:SimilarityThresholdFilter",
    "perplexity": "ragshield.defenses.baselines:PerplexityFilter",
    "distance-threshold": "ragshield.defenses.extraction_baselines:DistanceThresholdFilter",
}


def register(name: str, target: str) -> None:
    _REGISTRY[name] = target


def available() -> list[str]:
    return sorted(_REGISTRY)


def _resolve(name: str) -> Callable[..., PassageFilter]:
    try:
        target = _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown defense {name!r}; available: {', '.join(available()) or '(none)'}"
        ) from None
    module, _, attr = target.partition(":")
    try:
        cls: Callable[..., PassageFilter] = getattr(importlib.import_module(module), attr)
    except (ModuleNotFoundError, AttributeError) as exc:
        raise InputError(f"defense {name!r} is registered but cannot be loaded: {exc}") from exc
    return cls


def build_filter(
    name: str, encoder: Encoder | None = None, params: Mapping[str, Any] | None = None
) -> PassageFilter:
    cls = _resolve(name)
    kwargs = dict(params or {})
    try:
        return cls(encoder=encoder, **kwargs)
    except TypeError as exc:
        raise InputError(f"bad parameters for defense {name!r}: {exc}") from exc


def build_chain(spec: str | list[str] | None, encoder: Encoder | None = None) -> FilterChain:
    """``"ragdefender,ecosaferag"`` or a list of names -> a chain (empty spec = no defense)."""
    if spec is None:
        names: list[str] = []
    elif isinstance(spec, str):
        names = [s.strip() for s in spec.split(",") if s.strip() and s.strip() != "none"]
    else:
        names = list(spec)
    return FilterChain([build_filter(n, encoder) for n in names])
