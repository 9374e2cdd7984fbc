"""One error family for user mistakes.

The CLI turns any :class:`RagshieldError` into a one-line message and exit code 2;
everything else is a bug and keeps its traceback (``RAGSHIELD_DEBUG=1`` shows it always).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from contextvars import ContextVar

#: The longest question :func:`check_query` accepts (characters): 50x the service's
#: ``max_question_chars`` (2,000). Kept here, not in :mod:`ragshield.limits` (which
#: imports this module), so every defense's own query check bounds it; ``limits.use_limits``
#: sets it with the rest of :class:`~ragshield.limits.InputLimits`.
DEFAULT_MAX_QUERY_CHARS = 100_000
MAX_QUERY_CHARS: ContextVar[int] = ContextVar(
    "ragshield_max_query_chars", default=DEFAULT_MAX_QUERY_CHARS
)


class RagshieldError(Exception):
    """Base class for errors caused by input, configuration or environment."""


class InputError(RagshieldError, ValueError):
    """Bad argument or bad data handed to the library (empty query, k out of range...)."""


class InputTooLargeError(InputError):
    """An input beyond :class:`ragshield.limits.InputLimits`: refused before any work,
    because a defense's cost grows with it (minutes and gigabytes past the limit)."""


class DataFormatError(InputError):
    """A file could not be parsed; says where."""

    def __init__(self, path: object, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class ModelNotFoundError(RagshieldError):
    """A model path or packaged model is missing; the message says how to get it."""


class NotFittedError(RagshieldError, RuntimeError):
    """Learned state (``labels_``, ``encoder_``) was used before it was computed."""


def lone_surrogate(text: str) -> int | None:
    """Index of the first lone UTF-16 surrogate in ``text`` (None if there is none).

    JSON's ``"\\ud800"`` escapes and undecodable command-line bytes both produce them; no
    tokenizer or UTF-8 writer accepts them, so they must be caught where text comes in.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def is_blank(text: str) -> bool:
    """True when nothing is left after whitespace, control and format characters
    (zero-width spaces and joiners, BOMs, direction marks) are removed."""
    return all(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf") for ch in text)


def text_problem(value: object, *, allow_blank: bool = False) -> str | None:
    """Why ``value`` is not usable text, or None when it is: the one check behind every
    reader of user text (corpus records, questions, filter inputs, service requests)."""
    if value is None:
        return "is null; expected a string"
    if not isinstance(value, str):
        return f"is a {type(value).__name__}, not a string"
    pos = lone_surrogate(value)
    if pos is not None:
        return (
            f"holds a lone surrogate (U+{ord(value[pos]):04X} at character {pos}), "
            "which is not valid Unicode"
        )
    if not allow_blank and is_blank(value):
        return "is blank (only whitespace or invisible characters)"
    return None


def check_text(value: object, what: str, *, allow_blank: bool = False) -> str:
    """Return ``value`` if it is a valid, non-blank string; else raise InputError naming
    ``what`` (e.g. "the question", "passages.jsonl:3 field 'text'")."""
    problem = text_problem(value, allow_blank=allow_blank)
    if problem is not None:
        raise InputError(f"{what} {problem}")
    return value  # type: ignore[return-value]


def check_query(query: object, *, what: str = "question") -> str:
    """Reject empty, invisible-only, non-string or non-Unicode queries, with the same
    message everywhere."""
    if not isinstance(query, str):
        raise InputError(f"The {what} must be a string. Got {type(query).__name__} instead.")
    if is_blank(query):
        raise InputError(f"The {what} is empty: pass a non-blank {what}.")
    limit = MAX_QUERY_CHARS.get()
    if len(query) > limit:  # a 10 MB question kept RAGDefender busy past a minute (#27)
        raise InputTooLargeError(
            f"The {what}: its length ({len(query):,}) exceeds InputLimits.max_query_chars = "
            f"{limit:,}; pass less, or raise the limit with "
            "ragshield.limits.use_limits(InputLimits(...))."
        )
    return check_text(query, f"The {what}")


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


def check_names(
    value: object, name: str, owner: str, *, what: str, known: Collection[str] | None = None
) -> None:
    """Validate a list-of-names hyper-parameter (an attacker's operators or families): a
    non-empty list, not a bare string (which would iterate letter by letter), and, when
    ``known`` is given, only names from it."""
    if isinstance(value, str) or not isinstance(value, Collection) or not value:
        raise InputError(
            f"The '{name}' parameter of {owner} must be a non-empty list of {what}. "
            f"Got {value!r} instead."
        )
    if known is not None and (unknown := [v for v in value if v not in known]):
        raise InputError(f"unknown {name} {unknown} for {owner}; available: {', '.join(known)}.")


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
