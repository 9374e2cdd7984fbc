"""One pipeline recipe: a :class:`PipelineConfig` (TOML file + flags) and :func:`build_pipeline`,
the only place a :class:`~ragshield.pipeline.RAGPipeline` is assembled — for ``ragshield
ask``, the service, the framework adapters' registry look-ups and the evaluations.

A config file (every key optional; ``examples/pipeline.toml`` shows them all)::

    index = "my-index"             # written by `ragshield index` / `ragshield reindex`
    encoder = "/models/my-st"      # default: the encoder the index names
    generator = "extractive"       # or "qwen2.5-0.5b", "local:<folder>", "openai:<url>#<model>"
    [generator_options]            # e.g. max_new_tokens = 64
    [retrieval]
    k = 10
    context_k = 5
    [defenses]
    chain = ["ragdefender", "ecosaferag"]
    [defenses.params]
    ecosaferag = { eps = 0.6 }

Example::

    from ragshield.config import build_pipeline, load_pipeline_config
    cfg = load_pipeline_config("pipeline.toml").with_overrides(k=20, defenses="ragdefender")
    print(build_pipeline(cfg).answer("Who designed the Eiffel Tower?", k=cfg.k).text)

Relative paths in a file are relative to the file's folder. The service's config
(:class:`ragshield.server.config.ServerConfig`) is a subclass with the same keys plus the
server's sections, so one file describes the same pipeline in ``ask`` and ``serve``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ragshield.defenses import registry
from ragshield.defenses.base import PassageFilter
from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.pipeline import RAGPipeline
from ragshield.store.base import VectorStore

_C = TypeVar("_C", bound=BaseModel)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetrievalConfig(_Section):
    """How much is retrieved and how much reaches the generator."""

    k: int = 5  # RAGDefender §6.1 / RAGFort §5.1: top-5 retrieval
    context_k: int | None = None  # None: every survivor

    @field_validator("k", "context_k", mode="before")
    @classmethod
    def _not_a_bool(cls, value: object, info: ValidationInfo) -> object:
        """``k = true`` was silently k = 1 (pydantic reads a bool as an int; issue #27)."""
        if isinstance(value, bool):
            raise ValueError(f"{info.field_name} must be an integer, not {str(value).lower()}.")
        return value

    @field_validator("k", "context_k")
    @classmethod
    def _at_least_one(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 1:
            raise ValueError(f"{info.field_name} must be an integer >= 1. Got {value}.")
        return value


class DefensesConfig(_Section):
    """The defense chain by registry name (:mod:`ragshield.defenses.registry`), any kind."""

    chain: list[str] = Field(default_factory=list)
    # constructor / builder parameters per defense name, e.g. {ecosaferag = {eps = 0.6}}
    params: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @field_validator("chain")
    @classmethod
    def _known_chain(cls, value: list[str]) -> list[str]:
        chain = registry.names(value)
        registry.plan(chain)  # unknown names, two index transforms
        return chain

    @field_validator("params")
    @classmethod
    def _known_params(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in value:
            registry.entry(name)
        return value


class PipelineConfig(BaseModel):
    """Everything a pipeline is made of, by name: frozen; change it with :meth:`with_overrides`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: Path | None = None  # an index directory (FAISS files or a pgvector pointer)
    store_uri: str | None = None  # postgresql://… overriding the pointer's (e.g. a password)
    encoder: str | None = None  # None = the encoder the index names
    generator: str = "extractive"
    generator_options: dict[str, Any] = Field(default_factory=dict)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    defenses: DefensesConfig = Field(default_factory=DefensesConfig)

    @property
    def k(self) -> int:
        return self.retrieval.k

    def with_overrides(self, **flags: Any) -> Self:
        """A copy with the given flags (``None`` = not given, the file's value stays).

        Flags: ``index``, ``store_uri``, ``encoder``, ``generator``, ``k``, ``context_k``,
        ``defenses`` (a list or ``"a,b"``; ``""``/``"none"`` = no defense) and
        ``generator_options`` (merged into the file's).
        """
        given = {key: v for key, v in flags.items() if v is not None}
        unknown = sorted(set(given) - _FLAGS)
        if unknown:
            raise InputError(f"unknown pipeline option(s) {unknown}; known: {sorted(_FLAGS)}.")
        data = self.model_dump()
        for key in ("index", "store_uri", "encoder", "generator"):
            if key in given:
                data[key] = given[key]
        for key in ("k", "context_k"):
            if key in given:
                data["retrieval"][key] = given[key]
        if "defenses" in given:
            data["defenses"]["chain"] = registry.names(given["defenses"])
        if "generator_options" in given:
            if not isinstance(given["generator_options"], Mapping):
                raise InputError(
                    "generator_options must be a mapping of option = value. "
                    f"Got {type(given['generator_options']).__name__} instead."
                )
            data["generator_options"] = {**data["generator_options"], **given["generator_options"]}
        return _validate(type(self), data, "command-line options")

    def resolve_paths(self, base: Path) -> Self:
        """Relative paths made relative to ``base`` (the config file's folder)."""
        if self.index is None or self.index.is_absolute():
            return self
        return self.model_copy(update={"index": base / self.index})


_FLAGS = {
    "index",
    "store_uri",
    "encoder",
    "generator",
    "k",
    "context_k",
    "defenses",
    "generator_options",
}


def format_validation_error(exc: ValidationError, where: str) -> str:
    """One line per problem: ``limits.requests_per_minute: Input should be ...``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {str(err['msg']).removeprefix('Value error, ')}")
    return f"{where}: " + "; ".join(parts)


def _validate(cls: type[_C], data: Mapping[str, Any], where: str) -> _C:
    try:
        return cls.model_validate(dict(data))
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, where)) from None


def read_config_file(path: Path, what: str = "config") -> dict[str, Any]:
    """A TOML (or YAML) file as a dict; unreadable or malformed files are an InputError."""
    from ragshield.textfile import HOSTILE, hostile_reason, read_utf8

    raw = read_utf8(path, what)
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(raw)
        elif path.suffix.lower() in (".yaml", ".yml"):
            data = yaml.safe_load(raw) or {}
        else:
            raise InputError(f"{path}: the {what} must be a .toml, .yaml or .yml file.")
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from None
    except HOSTILE as exc:  # [ x 50,000; a 100,000-digit number (issue #27, root cause 12)
        raise InputError(
            f"{path}: not valid {path.suffix[1:].upper()}: {hostile_reason(exc)}"
        ) from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: the {what} must be a table/mapping at the top level.")
    return data


def load_pipeline_config(
    path: str | os.PathLike[str] | None = None, **overrides: Any
) -> PipelineConfig:
    """Read and validate a pipeline file; ``overrides`` as in :meth:`~PipelineConfig.with_overrides`."""
    if path is None:
        return PipelineConfig().with_overrides(**overrides)
    p = Path(path).expanduser()
    cfg = _validate(PipelineConfig, read_config_file(p, "pipeline config"), str(p))
    return cfg.resolve_paths(p.resolve().parent).with_overrides(**overrides)


# ---- building -------------------------------------------------------------------------


@dataclass(frozen=True)
class PipelineParts:
    """What a config opens once and every pipeline built from it shares (the service
    builds one pipeline per requested defense combination over the same parts).
    ``generator`` is the configured one, before any generator wrapper."""

    store: VectorStore
    encoder: Encoder
    generator: Generator
    index_defense: str | None = None  # the index transform the store was opened with


def open_parts(
    config: PipelineConfig,
    *,
    encoder: Encoder | None = None,
    store: VectorStore | None = None,
    generator: Generator | None = None,
) -> PipelineParts:
    """Open the index (through its ``index`` defense, if the chain names one), the query
    encoder and the generator.

    Pass already-loaded parts to share them: a ``store`` is used as it is (with
    ``encoder``, else the config's or the store's encoder); an ``encoder`` given next to an
    index the config opens must be the model that index's queries need.
    """
    plan = registry.plan(config.defenses.chain)
    if store is None:
        if config.index is None:
            raise InputError(
                "no index: pass an index directory (ragshield ask DIR ..., or index = ... in "
                "the config file)."
            )
        if plan.index is not None:
            store, opened = registry.open_transformed_index(
                plan.index,
                config.index,
                encoder=config.encoder,
                uri=config.store_uri,
                params=config.defenses.params.get(plan.index),
            )
        else:
            from ragshield.indexing import open_index

            store, opened = open_index(config.index, config.encoder, uri=config.store_uri)
        if encoder is not None and encoder.name != opened.name:
            raise InputError(
                f"the encoder given ({encoder.name!r}) is not the one {config.index}'s queries "
                f"need ({opened.name!r})."
            )
        encoder = encoder or opened
    elif encoder is None:
        from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

        encoder = SentenceTransformerEncoder(
            config.encoder or getattr(store, "encoder_name", "") or None
        )
    if generator is None:
        from ragshield.generate.factory import make_generator

        generator = make_generator(config.generator, encoder, **config.generator_options)
    return PipelineParts(store, encoder, generator, plan.index)


def assemble(
    config: PipelineConfig,
    parts: PipelineParts,
    *,
    defenses: Sequence[str] | None = None,
    filters: Sequence[PassageFilter] = (),
    cache: dict[Any, Any] | None = None,
) -> RAGPipeline:
    """The pipeline for ``defenses`` (default: the config's chain) over opened ``parts``.

    ``filters`` are ready-made filter objects run before the named ones (evaluations that
    build their own). ``cache`` shares built filters and wrapped generators between calls.
    """
    plan = registry.plan(config.defenses.chain if defenses is None else defenses)
    if plan.index is not None and plan.index != parts.index_defense:
        raise InputError(
            f"{plan.index!r} transforms the index, which is opened once: name it in the "
            "config's defenses.chain (or in the pipeline's --filter)."
        )
    cache = {} if cache is None else cache
    params = config.defenses.params
    named = registry.build_chain(
        plan.filters,
        parts.encoder,
        params,
        profile=getattr(parts.store, "profile", None),  # index-time statistics
        cache=cache,
    )
    from ragshield.store.calibration_novelty import use_index_novelty

    use_index_novelty(named, getattr(parts.store, "novelty", None), config.index)  # index-side
    from ragshield.defenses.ragdefender.provenance import warn_if_mostly_added

    warn_if_mostly_added(named, getattr(parts.store, "passages", None), config.index)
    chain = [*filters, *named.filters]
    generator = parts.generator
    if plan.wrappers:
        key = ("generator", plan.wrappers)
        if key not in cache:
            for name in plan.wrappers:
                generator = registry.wrap_generator(
                    name,
                    generator,
                    encoder=parts.encoder,
                    options=config.generator_options,
                    params=params.get(name),
                )
            cache[key] = generator
        generator = cache[key]
    return RAGPipeline(
        parts.encoder, parts.store, chain, generator, context_k=config.retrieval.context_k
    )


def build_pipeline(
    config: PipelineConfig,
    *,
    encoder: Encoder | None = None,
    store: VectorStore | None = None,
    generator: Generator | None = None,
    filters: Sequence[PassageFilter] = (),
) -> RAGPipeline:
    """The pipeline ``config`` describes (see :func:`open_parts` for the shared parts)."""
    parts = open_parts(config, encoder=encoder, store=store, generator=generator)
    return assemble(config, parts, filters=filters)
