"""One error family for user mistakes.

The CLI turns any :class:`RagshieldError` into a one-line message and exit code 2;
everything else is a bug and keeps its traceback (``RAGSHIELD_DEBUG=1`` shows it always).
"""

from __future__ import annotations


class RagshieldError(Exception):
    """Base class for errors caused by input, configuration or environment."""


class InputError(RagshieldError, ValueError):
    """Bad argument or bad data handed to the library (empty query, k out of range...)."""


class DataFormatError(InputError):
    """A file could not be parsed; says where."""

    def __init__(self, path: object, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ModelNotFoundError(RagshieldError):
    """A model path or packaged model is missing; the message says how to get it."""


class NotFittedError(RagshieldError, RuntimeError):
    """Learned state (``labels_``, ``encoder_``) was used before it was computed."""


def check_query(query: object, *, what: str = "question") -> str:
    """Reject empty or non-string queries with the same message everywhere."""
    if not isinstance(query, str):
        raise InputError(f"The {what} must be a string. Got {type(query).__name__} instead.")
    if not query.strip():
        raise InputError(f"The {what} is empty: pass a non-blank {what}.")
    return query


def check_int(value: object, name: str, owner: str, *, low: int, high: int | None = None) -> int:
    """Validate an integer hyper-parameter with scikit-learn's message template."""
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value >= low
        and (high is None or value <= high)
    ):
        return value
    rng = f"[{low}, {high}]" if high is not None else f">= {low}"
    raise InputError(
        f"The '{name}' parameter of {owner} must be an int {rng}. Got {value!r} instead."
    )


def check_float(
    value: object, name: str, owner: str, *, low: float, high: float, low_open: bool = False
) -> float:
    """Validate a float hyper-parameter with scikit-learn's message template."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if (v > low if low_open else v >= low) and v <= high:
            return v
    bracket = "(" if low_open else "["
    raise InputError(
        f"The '{name}' parameter of {owner} must be a float in {bracket}{low}, {high}]. "
        f"Got {value!r} instead."
    )
