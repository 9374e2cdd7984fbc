"""Declared hyper-parameters: one constraint table per defense, one checker, one config format.

Example::

    from numbers import Real
    from ragshield.defenses.params import Interval, Options, ParamsMixin

    class MyFilter(ParamsMixin):
        name = "my-filter"
        _parameter_constraints = {
            "threshold": [Interval(Real, -1, 1)],
            "against": [Options("passages", "query")],
            "window": [Interval(int, 1, None), None],  # None allowed
        }
        def __init__(self, encoder=None, *, threshold=0.9, against="passages", window=None):
            self.encoder, self.threshold, self.against, self.window = ...  # only store

        def filter(self, query, retrieved):
            self._validate_params()          # checked once, on first use
            ...

    data = MyFilter(threshold=0.8).to_dict()  # {"type": "my-filter", "init_parameters": {...}}
    same = MyFilter.from_dict(data, encoder=enc)

Why: scikit-learn's lesson. The constructor only stores its arguments under their own
names, so ``to_dict`` is free (Haystack's ``default_to_dict``); the constraints are written
once, as data, so the error text is the same everywhere ("The 'eps' parameter of EcoSafeRAG
must be a float in (0.0, 2.0]. Got -1 instead.") and a test can derive a bad value for each
constraint instead of hand-writing one per class. The check runs once, at the first call,
not on every query; assigning a parameter (any public attribute) afterwards clears the flag
so the next call checks again.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, Literal, TypeVar

from ragshield.embed.base import Encoder
from ragshield.errors import InputError

Closed = Literal["both", "left", "right", "neither"]


@dataclass(frozen=True)
class Interval:
    """An int (``int``) or a finite-or-infinite real (``Real``) between two optional bounds.

    ``Real`` accepts ints too (``threshold=1``) but never a bool or NaN.
    """

    kind: type
    low: float | None
    high: float | None
    closed: Closed = "both"

    def accepts(self, value: object) -> bool:
        if isinstance(value, bool):
            return False
        if self.kind is int:
            if not isinstance(value, Integral):
                return False
        elif not isinstance(value, Real) or math.isnan(float(value)):
            return False
        v = float(value)
        left = self.closed in ("both", "left")
        right = self.closed in ("both", "right")
        if self.low is not None and (v < self.low or (v == self.low and not left)):
            return False
        return not (self.high is not None and (v > self.high or (v == self.high and not right)))

    def __str__(self) -> str:
        what = "an int" if self.kind is int else "a float"
        low, high = self._bound(self.low), self._bound(self.high)
        left = self.closed in ("both", "left")
        right = self.closed in ("both", "right")
        if self.high is None:
            return f"{what} {'>=' if left else '>'} {low}" if self.low is not None else what
        if self.low is None:
            return f"{what} {'<=' if right else '<'} {high}"
        return f"{what} in {'[' if left else '('}{low}, {high}{']' if right else ')'}"

    def _bound(self, b: float | None) -> str:
        return repr(int(b) if self.kind is int else float(b)) if b is not None else ""

    def invalid_example(self) -> object:
        """A value of the right type outside the interval (or of the wrong type if none)."""
        if self.high is not None:
            return self.high + 1
        if self.low is not None:
            return self.low - 1
        return "not-a-number"


@dataclass(frozen=True, init=False)
class Options:
    """One of a fixed set of literals (``"cosine"``, ``"l2"``)."""

    values: tuple[object, ...]

    def __init__(self, *values: object) -> None:
        object.__setattr__(self, "values", values)

    def accepts(self, value: object) -> bool:
        return not isinstance(value, bool) and any(
            value == v and type(value) is type(v) for v in self.values
        )

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(v) for v in self.values)

    def invalid_example(self) -> object:
        return "not-an-option"


@dataclass(frozen=True, init=False)
class OptionList:
    """A list (or tuple) of items each from a fixed set (EcoSafeRAG's ``bait_types``).

    A bare string is refused rather than read as a list of its characters.
    """

    values: tuple[object, ...]

    def __init__(self, *values: object) -> None:
        object.__setattr__(self, "values", values)

    def accepts(self, value: object) -> bool:
        return isinstance(value, (list, tuple)) and all(
            Options(*self.values).accepts(v) for v in value
        )

    def __str__(self) -> str:
        return "a list of items from " + ", ".join(repr(v) for v in self.values)

    def invalid_example(self) -> object:
        return ["not-an-option"]


@dataclass(frozen=True)
class Boolean:
    """``True`` or ``False`` — not ``"yes"``, not 1."""

    def accepts(self, value: object) -> bool:
        return isinstance(value, bool)

    def __str__(self) -> str:
        return "a bool"

    def invalid_example(self) -> object:
        return "yes"


@dataclass(frozen=True)
class IsCallable:
    """A function; serialised as its ``"module:qualname"`` import path."""

    def accepts(self, value: object) -> bool:
        return callable(value)

    def __str__(self) -> str:
        return "a callable"

    def invalid_example(self) -> object:
        return 3


@dataclass(frozen=True)
class StrList:
    """A list (or tuple, set) of strings — ids, say. A bare string is refused rather than
    read as a list of its characters."""

    def accepts(self, value: object) -> bool:
        return isinstance(value, (list, tuple, set, frozenset)) and all(
            isinstance(v, str) for v in value
        )

    def __str__(self) -> str:
        return "a list of strings"

    def invalid_example(self) -> object:
        return "not-a-list"


Constraint = Interval | Options | OptionList | Boolean | IsCallable | StrList | None
"""One allowed form; ``None`` in a parameter's list means ``None`` itself is allowed."""

ParamTable = dict[str, list[Constraint]]
"""A defense's ``_parameter_constraints``: each hyper-parameter's allowed forms."""


def describe(constraints: Sequence[Constraint]) -> str:
    parts = [str(c) for c in constraints if c is not None]
    if None in constraints:
        parts.append("None")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def param_error(
    owner: str, name: str, constraints: Sequence[Constraint], value: object
) -> InputError:
    """The one message template for a bad hyper-parameter."""
    return InputError(
        f"The '{name}' parameter of {owner} must be {describe(constraints)}. Got {value!r} instead."
    )


def validate_params(obj: object, constraints: Mapping[str, Sequence[Constraint]]) -> None:
    """Check each declared attribute of ``obj`` against its list of allowed forms."""
    owner = type(obj).__name__
    for name, allowed in constraints.items():
        value = getattr(obj, name)
        if not any((value is None) if c is None else c.accepts(value) for c in allowed):
            raise param_error(owner, name, allowed, value)


# --------------------------------------------------------------------------- config format


def _import_path(fn: Callable[..., Any], owner: str, name: str) -> str:
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<" in qualname or "." in qualname:
        raise InputError(
            f"The '{name}' parameter of {owner} cannot be serialised: {fn!r} is not a "
            "module-level function. Pass one defined at the top of a module."
        )
    return f"{module}:{qualname}"


def _plain(value: object, owner: str, name: str, allowed: Sequence[Constraint]) -> object:
    """A JSON-ready copy of a parameter value (tuples become lists, functions paths)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if callable(value) and any(isinstance(c, IsCallable) for c in allowed):
        return _import_path(value, owner, name)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return [_plain(v, owner, name, allowed) for v in items]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, owner, name, allowed) for k, v in value.items()}
    raise InputError(
        f"The '{name}' parameter of {owner} cannot be serialised: {type(value).__name__} "
        "is not a JSON value."
    )


def init_param_names(cls: type) -> list[str]:
    """Constructor parameters that are hyper-parameters (the encoder is injected, not saved).
    A class whose constructor groups them (RAGDefender's per-stage dataclasses) lists its
    flat names in ``flat_param_names``, the names its configs use."""
    flat = getattr(cls, "flat_param_names", None)
    if callable(flat):
        return list(flat())
    sig = inspect.signature(cls)
    return [p for p in sig.parameters if p not in ("self", "encoder")]


def type_name(cls: type) -> str:
    """What ``"type"`` holds: the registry name a defense declares, else ``module:Class``."""
    name = cls.__dict__.get("name")
    return name if isinstance(name, str) else f"{cls.__module__}:{cls.__qualname__}"


def default_to_dict(obj: object) -> dict[str, Any]:
    """``{"type": ..., "init_parameters": {...}}`` from the attributes named after the
    constructor's parameters (the encoder excepted: it is passed to ``from_dict``)."""
    cls = type(obj)
    table: Mapping[str, Sequence[Constraint]] = getattr(cls, "_parameter_constraints", {})
    owner = cls.__name__
    params = {p: _plain(getattr(obj, p), owner, p, table.get(p, ())) for p in init_param_names(cls)}
    return {"type": type_name(cls), "init_parameters": params}


T = TypeVar("T")


def default_from_dict(cls: type[T], data: object, encoder: Encoder | None = None) -> T:
    """The inverse of :func:`default_to_dict`; function paths are imported back."""
    if not isinstance(data, Mapping) or not isinstance(data.get("init_parameters", {}), Mapping):
        raise InputError(
            f"{cls.__name__}.from_dict expects {{'type': ..., 'init_parameters': {{...}}}}. "
            f"Got {data!r} instead."
        )
    accepted = {type_name(cls), f"{cls.__module__}:{cls.__qualname__}"}
    if data.get("type") not in accepted:
        raise InputError(
            f"not a {cls.__name__} config: type is {data.get('type')!r}, expected "
            f"{type_name(cls)!r}."
        )
    table: Mapping[str, Sequence[Constraint]] = getattr(cls, "_parameter_constraints", {})
    params = dict(data.get("init_parameters", {}))
    unknown = sorted(set(params) - set(init_param_names(cls)))
    if unknown:
        raise InputError(
            f"{cls.__name__} has no parameter {', '.join(map(repr, unknown))}; it takes "
            f"{', '.join(init_param_names(cls))}."
        )
    for name, value in params.items():
        if isinstance(value, str) and any(isinstance(c, IsCallable) for c in table.get(name, ())):
            params[name] = _load_callable(value, cls.__name__, name)
    return cls(encoder=encoder, **params)  # type: ignore[call-arg]


def _load_callable(path: str, owner: str, name: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError(
            f"The '{name}' parameter of {owner}: cannot import {path!r}: {exc}"
        ) from exc
    if not callable(fn):
        raise param_error(owner, name, [IsCallable()], fn)
    return fn


class ParamsMixin:
    """Shared by the defenses: the declared table, the once-per-change check, the config.

    ``_parameter_constraints`` maps each hyper-parameter to its allowed forms. A subclass may
    override :meth:`_constraints` for a range that depends on another parameter (checked
    after that parameter), and :meth:`_check_setup` for requirements that are not one
    parameter's range ("needs an encoder").
    """

    _parameter_constraints: ClassVar[ParamTable] = {}
    _params_checked: bool = False

    def __setattr__(self, name: str, value: Any) -> None:
        # A parameter set after the first call is checked again on the next one. Any public
        # attribute counts, not only the declared ones: a range may depend on an undeclared
        # parameter (EcoSafeRAG reads bait_types only when baits is None).
        if not name.startswith("_"):
            object.__setattr__(self, "_params_checked", False)
        object.__setattr__(self, name, value)

    def _constraints(self) -> Mapping[str, Sequence[Constraint]]:
        return type(self)._parameter_constraints

    def _check_setup(self) -> None:
        """Requirements beyond single-parameter ranges; none by default."""

    def _validate_params(self) -> None:
        """Check the declared parameters once (again after one of them is reassigned)."""
        if self._params_checked:
            return
        validate_params(self, self._constraints())
        self._check_setup()
        object.__setattr__(self, "_params_checked", True)

    def get_params(self) -> dict[str, Any]:
        """Constructor arguments without the encoder: ``type(f)(encoder=e, **f.get_params())``
        rebuilds the same filter."""
        return {p: getattr(self, p) for p in init_param_names(type(self))}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(self)

    @classmethod
    def from_dict(cls: type[T], data: Mapping[str, Any], encoder: Encoder | None = None) -> T:
        return default_from_dict(cls, data, encoder)


class StagedParams(ParamsMixin):
    """A :class:`ParamsMixin` whose hyper-parameters live in frozen per-stage dataclasses.

    Example::

        @dataclass(frozen=True)
        class Clustering:
            eps: float = 0.5  # paper §3.2

        class MyFilter(StagedParams):
            _stages = {"clustering": Clustering}
            def __init__(self, encoder=None, *, clustering=None, **flat):
                self.encoder = encoder
                self._set_stages({"clustering": clustering}, flat)

        MyFilter(clustering=Clustering(eps=0.3)).eps   # 0.3: a whole stage
        MyFilter(eps=0.3).clustering.eps               # 0.3: one flat name
        MyFilter(clustering={"eps": 0.3})              # a stage as a config table

    Why: a filter with forty parameters hides which stage reads what (issue #22 caps a
    public constructor at about twelve), yet every config names them flat: a TOML
    ``[defenses.NAME]`` table, ``to_dict`` / ``from_dict``, ``setattr`` in an ablation, an
    index's calibration. A field keeps its flat name, default and citation in its stage's
    dataclass; reading ``f.eps`` reads ``f.clustering.eps``, and assigning it replaces the
    (frozen) stage by a copy with that field changed, so the once-per-change check runs
    again. The constraint table stays keyed by the flat names. ``_own_params`` are
    constructor arguments outside any stage (listed first, then the stages' fields, then
    the rest), so ``to_dict`` keeps the order the flat constructor had.
    """

    _stages: ClassVar[Mapping[str, type]] = {}  # constructor argument -> stage dataclass
    _own_params: ClassVar[tuple[str, ...]] = ()
    _flat: ClassVar[dict[str, str]] = {}  # flat name -> its stage argument

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._flat = {
            f.name: stage for stage, dc in cls._stages.items() for f in dataclasses.fields(dc)
        }

    @classmethod
    def flat_param_names(cls) -> list[str]:
        """What :func:`init_param_names` lists: the names the configs use."""
        return [*cls._own_params[:1], *cls._flat, *cls._own_params[1:]]

    def _set_stages(self, given: Mapping[str, object], flat: Mapping[str, Any]) -> None:
        """Store each stage (its dataclass, a table of its fields, or ``None`` for the
        defaults), then the flat overrides. A name that is neither raises ``TypeError``, as a
        misspelt keyword argument would (the registry turns it into a one-line error)."""
        owner = type(self).__name__
        unknown = sorted(set(flat) - set(self._flat))
        if unknown:
            known = [*self._own_params, *self._stages, *self._flat]
            near = difflib.get_close_matches(unknown[0], known, n=3)
            hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
            raise TypeError(
                f"{owner} has no parameter {', '.join(map(repr, unknown))}{hint}; it takes "
                f"{', '.join([*self._own_params, *self._stages])} or a field of a stage by "
                "its own name."
            )
        for stage, cls in self._stages.items():
            value: Any = given.get(stage)
            if value is None:
                value = cls()
            elif isinstance(value, Mapping):
                names = {f.name for f in dataclasses.fields(cls)}
                bad = sorted(set(value) - names)
                if bad:
                    raise TypeError(
                        f"{owner} has no parameter {', '.join(map(repr, bad))} in {stage}; it "
                        f"takes {', '.join(sorted(names))}."
                    )
                value = cls(**value)
            elif not isinstance(value, cls):
                raise TypeError(
                    f"{owner}'s {stage} must be a {cls.__name__} or a table of its fields. "
                    f"Got {type(value).__name__} instead."
                )
            mine = {k: v for k, v in flat.items() if self._flat[k] == stage}
            object.__setattr__(self, stage, dataclasses.replace(value, **mine) if mine else value)
        object.__setattr__(self, "_params_checked", False)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names not set on the instance: the flat parameter names.
        stage = type(self)._flat.get(name)
        held = object.__getattribute__(self, "__dict__").get(stage) if stage else None
        if held is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(held, name)

    def __setattr__(self, name: str, value: Any) -> None:
        stage = type(self)._flat.get(name)
        if stage is not None:  # a flat name: replace its (frozen) stage
            name, value = stage, dataclasses.replace(getattr(self, stage), **{name: value})
        super().__setattr__(name, value)
