"""Defenses by name, so the CLI, config files, the service, the adapters and eval resolve a
name the same way.

A defense acts at one of three points of a pipeline, declared by its entry's ``kind``:

``filter``
    a post-retrieval :class:`~ragshield.defenses.base.PassageFilter` (RAGDefender,
    EcoSafeRAG, the baselines): ``cls(encoder=..., **params)``.
``index``
    an index transform (RAGFort inter-class re-index): the pipeline's index must be one the
    transform wrote, and the builder opens it with the query encoder it needs:
    ``builder(path, encoder=..., uri=..., **params) -> (store, encoder)``.
``generator_wrapper``
    wraps the configured generator (RAGFort's draft/reference cascade):
    ``builder(generator, encoder=..., options=..., **params) -> generator``.

A ``bundle`` names several entries at once (``ragfort`` = re-index + cascade, as in the
paper). :func:`ragshield.config.build_pipeline` applies every kind; :func:`build_filter` /
:func:`build_chain` build filters only and say so for the other kinds.

The chain grammar, the same in every command (``ragshield scan``, ``eval poisoning``,
``eval retrieval``, ``eval extraction``, ``ask --filter``) and in config files: ``,`` joins
the defenses of one chain, ``;`` separates alternative chains, ``none`` is no defense::

    --defenses "none;ragdefender;ragdefender,ecosaferag"   # three chains to compare

:func:`chain_labels` parses it, :func:`build_chains` builds every alternative and
:func:`build_chain` one chain; both calibrate from the index profile when given one.

Adding a defense: one module, one line in :data:`_REGISTRY`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ragshield.defenses.base import PassageFilter
from ragshield.defenses.compose import FilterChain
from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.store.base import VectorStore

Kind = Literal["filter", "index", "generator_wrapper", "bundle"]
_WHERE = {
    "filter": "a post-retrieval filter",
    "index": "an index transform (the pipeline's index must be one it wrote)",
    "generator_wrapper": "a generator wrapper (it wraps the pipeline's LLM)",
}


@dataclass(frozen=True)
class Entry:
    """One registry row: what kind of defense a name is and what builds it."""

    kind: Kind
    target: str = ""  # "module:callable"; empty for a bundle
    members: tuple[str, ...] = ()  # a bundle's names, in pipeline order


# name -> "module:Class" (a filter) or an Entry; imported on use so `import ragshield`
# stays light.
_REGISTRY: dict[str, str | Entry] = {
    "ragdefender": "ragshield.defenses.ragdefender:RAGDefender",
    "ragdefender-paper": "ragshield.defenses.ragdefender:PaperRAGDefender",
    "ragdefender-authors": "ragshield.defenses.authors:AuthorsRAGDefender",  # extra "peers"
    "ecosaferag": "ragshield.defenses.ecosaferag:EcoSafeRAG",
    "similarity-threshold": "ragshield.defenses.baselines:SimilarityThresholdFilter",
    "perplexity": "ragshield.defenses.baselines:PerplexityFilter",
    "distance-threshold": "ragshield.defenses.extraction_baselines:DistanceThresholdFilter",
    "injection-guard": "ragshield.defenses.injection.detector:InjectionGuard",  # issue #23
    "injection-output": Entry(
        "generator_wrapper", "ragshield.defenses.injection.output:wrap_output_check"
    ),
    # RAGFort (§4.2 inter-class re-index, §4.3 intra-class cascade, both = the paper's method)
    "ragfort-inter": Entry("index", "ragshield.defenses.ragfort:open_reindexed"),
    "ragfort-intra": Entry("generator_wrapper", "ragshield.defenses.ragfort:wrap_cascade"),
    "ragfort": Entry("bundle", members=("ragfort-inter", "ragfort-intra")),
    "ragfort-reindex": Entry("bundle", members=("ragfort-inter",)),
    "ragfort-cascade": Entry("bundle", members=("ragfort-intra",)),
    # canary tokens + verbatim-span output check (the index embeds the canaries)
    "canary": Entry("generator_wrapper", "ragshield.defenses.canary:wrap_canary"),
}


def register(name: str, target: str | Entry) -> None:
    """Add a defense: ``"module:Class"`` for a filter, or an :class:`Entry` for other kinds."""
    _REGISTRY[name] = target


def available(kind: Kind | None = None) -> list[str]:
    return sorted(n for n in _REGISTRY if kind is None or entry(n).kind == kind)


def entry(name: str) -> Entry:
    try:
        value = _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown defense {name!r}; available: {', '.join(available()) or '(none)'}"
        ) from None
    return value if isinstance(value, Entry) else Entry("filter", value)


def names(spec: str | Iterable[str] | None) -> list[str]:
    """``"ragdefender,ecosaferag"`` / a list -> names ("none" and blanks dropped)."""
    if spec is None:
        return []
    if not isinstance(spec, (str, Iterable)) or isinstance(spec, (bytes, Mapping)):
        raise InputError(
            f"defenses must be a name, a comma-separated string or a list of names. "
            f"Got {type(spec).__name__} instead."
        )
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    for s in items:
        if not isinstance(s, str):
            raise InputError(f"a defense name must be a string. Got {type(s).__name__} instead.")
    return [s.strip() for s in items if s.strip() and s.strip() != "none"]


@dataclass(frozen=True)
class DefensePlan:
    """A chain split by where each part acts (bundles expanded, order kept)."""

    filters: tuple[str, ...] = ()
    index: str | None = None
    wrappers: tuple[str, ...] = ()


def plan(spec: str | Iterable[str] | None) -> DefensePlan:
    """Resolve every name of a chain; at most one index transform."""
    filters: list[str] = []
    indexes: list[str] = []
    wrappers: list[str] = []
    by_kind = {"filter": filters, "index": indexes, "generator_wrapper": wrappers}
    for name in names(spec):
        e = entry(name)
        for member in e.members if e.kind == "bundle" else (name,):
            bucket = by_kind[entry(member).kind]
            if member not in bucket:
                bucket.append(member)
    if len(indexes) > 1:
        raise InputError(f"a pipeline has one index; {indexes} name more than one index transform.")
    return DefensePlan(tuple(filters), indexes[0] if indexes else None, tuple(wrappers))


def _load(name: str, e: Entry) -> Callable[..., Any]:
    module, _, attr = e.target.partition(":")
    try:
        obj: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    except (ModuleNotFoundError, AttributeError) as exc:
        raise InputError(f"defense {name!r} is registered but cannot be loaded: {exc}") from exc
    return obj


def _call(
    name: str,
    builder: Callable[..., Any],
    *args: Any,
    params: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """``builder(*args, **kwargs, **params)``; ``params`` come from a user's config, so a
    non-mapping or a key the pipeline passes itself (``encoder``: the index's encoder, not
    a config string) is refused in one line (issue #27, root cause 15)."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise InputError(
            f"parameters for defense {name!r} must be a table of name = value. "
            f"Got {type(params).__name__} instead."
        )
    reserved = sorted(set(params) & set(kwargs))
    if reserved:
        raise InputError(
            f"bad parameters for defense {name!r}: {', '.join(map(repr, reserved))} is set by "
            "the pipeline (the index's own encoder), not in the defense's params"
        )
    try:
        return builder(*args, **kwargs, **params)
    except TypeError as exc:
        raise InputError(f"bad parameters for defense {name!r}: {exc}") from exc


def _require(name: str, kind: Kind) -> Entry:
    e = entry(name)
    if e.kind != kind:
        what = f"a bundle of {', '.join(e.members)}" if e.kind == "bundle" else _WHERE[e.kind]
        raise InputError(
            f"defense {name!r} is {what}, not {_WHERE[kind]}: name it in a "
            "pipeline (ragshield ask --filter, the service's defenses.chain, "
            "ragshield.config.build_pipeline)."
        )
    return e


def build_filter(
    name: str, encoder: Encoder | None = None, params: Mapping[str, Any] | None = None
) -> PassageFilter:
    cls = _load(name, _require(name, "filter"))
    flt: PassageFilter = _call(name, cls, encoder=encoder, params=params)
    return flt


def build_chain(
    spec: str | Iterable[str] | None,
    encoder: Encoder | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    profile: Any = None,
    cache: dict[str, PassageFilter] | None = None,
) -> FilterChain:
    """``"ragdefender,ecosaferag"`` or a list of names -> a chain (empty spec = no defense).

    ``profile`` is the index's :class:`~ragshield.store.profile.IndexProfile` (or its
    dict): every filter that takes one is calibrated from it, a value the user set wins.
    ``cache`` (name -> built filter) lets several chains over one index share filters."""
    from ragshield.defenses.calibration import calibrate

    params = params or {}
    if not isinstance(params, Mapping):
        raise InputError(f"defense params must be a table per defense. Got {params!r:.60}.")
    p = plan(spec)
    for other in ([p.index] if p.index else []) + list(p.wrappers):
        _require(other, "filter")  # says what the name is and where it applies
    cache = {} if cache is None else cache
    for n in p.filters:
        if n not in cache:
            built = build_filter(n, encoder, params.get(n))
            calibrate(built, profile)  # nearest-neighbour bars and injection thresholds
            cache[n] = built
    return FilterChain([cache[n] for n in p.filters])


def chain_labels(spec: str | Sequence[str] | None) -> list[str]:
    """The chain grammar (module docstring) -> one canonical label per alternative:
    ``"none; ragdefender , ecosaferag;"`` -> ``["none", "ragdefender,ecosaferag"]``.

    Blank alternatives are skipped; ``none`` stands alone; ``+`` (an older spelling) is
    refused with the right one."""
    items = spec.split(";") if isinstance(spec, str) else list(spec or [])
    labels: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InputError(
                f"a defense chain must be a string. Got {type(item).__name__} instead."
            )
        if "+" in item:
            raise InputError(
                f"defense chain {item.strip()!r}: join a chain's defenses with ',' and separate "
                "alternative chains with ';', e.g. --defenses \"none;ragdefender,ecosaferag\""
            )
        parts = [n.strip() for n in item.split(",") if n.strip()]
        if not parts:
            continue
        if "none" in parts and len(parts) > 1:
            raise InputError(
                f"defense chain {item.strip()!r}: 'none' stands alone; separate alternative "
                "chains with ';', e.g. --defenses \"none;ragdefender\""
            )
        label = ",".join(parts)
        if label not in labels:
            labels.append(label)
    if not labels:
        raise InputError('--defenses names no chain; e.g. --defenses "none;ragdefender"')
    return labels


def build_chains(
    spec: str | Sequence[str] | Mapping[str, str | None] | None,
    encoder: Encoder | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    profile: Any = None,
) -> dict[str, FilterChain | None]:
    """Every alternative of ``spec`` (the chain grammar, or ``{label: chain spec}``) ->
    ``{label: chain}``; ``None`` for no defense. Each chain has its own filters (a chain is
    measured as it would run alone), calibrated from ``profile`` (see :func:`build_chain`)."""
    if isinstance(spec, Mapping):
        specs = {label: (s if s not in (None, "", "none") else None) for label, s in spec.items()}
    else:
        specs = {label: (label if label != "none" else None) for label in chain_labels(spec)}
    return {
        label: None if s is None else build_chain(s, encoder, params, profile=profile)
        for label, s in specs.items()
    }


def open_transformed_index(
    name: str,
    path: str | os.PathLike[str],
    *,
    encoder: str | None,
    uri: str | None,
    params: Mapping[str, Any] | None = None,
) -> tuple[VectorStore, Encoder]:
    """Run an ``index`` entry's builder: the store at ``path`` and its query encoder."""
    builder = _load(name, _require(name, "index"))
    opened: tuple[VectorStore, Encoder] = _call(
        name, builder, path, encoder=encoder, uri=uri, params=params
    )
    return opened


def wrap_generator(
    name: str,
    generator: Generator,
    *,
    encoder: Encoder,
    options: Mapping[str, Any],
    params: Mapping[str, Any] | None = None,
) -> Generator:
    """Run a ``generator_wrapper`` entry's builder around ``generator``."""
    builder = _load(name, _require(name, "generator_wrapper"))
    wrapped: Generator = _call(
        name, builder, generator, encoder=encoder, options=options, params=params
    )
    return wrapped
