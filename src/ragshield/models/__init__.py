"""Packaged offline language models: locate, assemble, verify, convert once, cache.

Example::

    from ragshield.models import list_models, fetch
    for info in list_models():
        print(info.name, info.params, "installed" if info.installed else info.install_command)
    folder = fetch("qwen2.5-0.5b")   # a plain Hugging Face folder, converted on first use

Every function that takes a model name also takes a local Hugging Face model folder.
"""

from __future__ import annotations

from ragshield.models.locate import (
    ModelInfo,
    cache_path,
    list_models,
    model_info,
    model_path,
    models_dir,
)
from ragshield.models.provision import (
    ModelCacheError,
    ModelIntegrityError,
    conversion_record,
    fetch,
    gguf_path,
)
from ragshield.models.registry import MODELS, PackagedModel

__all__ = [
    "MODELS",
    "ModelCacheError",
    "ModelInfo",
    "ModelIntegrityError",
    "PackagedModel",
    "cache_path",
    "conversion_record",
    "fetch",
    "gguf_path",
    "list_models",
    "model_info",
    "model_path",
    "models_dir",
]
