"""Bounds on what one library call accepts, checked before any work starts.

Why: a defense's cost grows with its input (RAGDefender compares every pair of passages:
16 s for 1,000 passages, 154 s and 3.9 GB for 10,000 — issue #27), and nothing upstream
stops a caller from handing a filter a whole corpus or a 10 MB passage. The service has
its own, tighter limits (``[limits]`` in the server config); these are the library's,
generous enough for every retrieval the papers run (k ≤ 100) and refused with one
:class:`~ragshield.errors.InputTooLargeError` line saying how to raise them::

    from ragshield.limits import InputLimits, use_limits
    with use_limits(InputLimits(max_passages=5_000)):
        chain.run(question, retrieved)          # or RAGPipeline(..., limits=...)

The checks sit where every caller passes: :func:`ragshield.defenses.base.check_retrieved`
(each defense's ``filter`` and :class:`~ragshield.defenses.compose.FilterChain`),
:class:`~ragshield.pipeline.RAGPipeline` (``k`` and the question, before the index is
searched). A defense called directly reads a long question in linear time (RAGDefender:
0.8 s for 10 MB), so only the chain and the pipeline bound it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ragshield.errors import InputError, InputTooLargeError, check_int


@dataclass(frozen=True)
class InputLimits:
    """The largest input one call accepts.

    Parameters
    ----------
    max_passages: passages per filter call, and ``k`` per retrieval. 1,000 = 10× the
        largest k of the evaluations we reproduce; RAGDefender takes ~16 s there on one
        core (measured, docs/results-reliability.md).
    max_passage_chars: characters of one passage: 50× ``ragshield index``'s chunk size
        (20,000, ``--max-chars``), so only a passage no index of ours would hold is refused.
    max_total_chars: characters of all passages of one call (a context no generator
        reads: 5 M characters ≈ 1.2 M tokens).
    max_query_chars: characters of one question: 50× the service's ``max_question_chars``
        (2,000); every encoder we ship reads at most 512 tokens of it.
    """

    max_passages: int = 1_000  # see above: 10x the papers' largest k
    max_passage_chars: int = 1_000_000  # 50x ragshield index --max-chars (20,000)
    max_total_chars: int = 5_000_000  # ~1.2 M tokens: no context window reads more
    max_query_chars: int = 100_000  # 50x the service's max_question_chars (2,000)

    def __post_init__(self) -> None:
        for name in ("max_passages", "max_passage_chars", "max_total_chars", "max_query_chars"):
            check_int(getattr(self, name), name, "InputLimits", low=1)


DEFAULT_LIMITS = InputLimits()
_ACTIVE: ContextVar[InputLimits] = ContextVar("ragshield_input_limits", default=DEFAULT_LIMITS)


def current() -> InputLimits:
    """The limits in force here (the default, or the innermost :func:`use_limits`)."""
    return _ACTIVE.get()


@contextmanager
def use_limits(limits: InputLimits | None) -> Iterator[InputLimits]:
    """Run the block under ``limits`` (``None`` keeps the ones in force)."""
    if limits is None:
        yield current()
        return
    token = _ACTIVE.set(limits)
    try:
        yield limits
    finally:
        _ACTIVE.reset(token)


def _refuse(owner: str, what: str, got: int, field: str, limit: int) -> InputTooLargeError:
    return InputTooLargeError(
        f"{owner}: {what} ({got:,}) exceeds InputLimits.{field} = {limit:,}; pass less, or "
        "raise the limit with ragshield.limits.use_limits(InputLimits(...))."
    )


def check_query_size(query: str, owner: str = "The question") -> None:
    """Refuse a question longer than ``max_query_chars``."""
    lim = current()
    if len(query) > lim.max_query_chars:
        raise _refuse(owner, "its length", len(query), "max_query_chars", lim.max_query_chars)


def check_k(k: int, owner: str) -> None:
    """Refuse a retrieval depth above ``max_passages`` before the index is searched."""
    lim = current()
    if k > lim.max_passages:
        raise _refuse(owner, "k", k, "max_passages", lim.max_passages)


def check_passages_size(texts: Sequence[str], owner: str) -> None:
    """Refuse too many passages, one too long, or too many characters in all."""
    lim = current()
    if len(texts) > lim.max_passages:
        raise _refuse(owner, "the passage count", len(texts), "max_passages", lim.max_passages)
    total = 0
    for i, text in enumerate(texts):
        if not isinstance(text, str):  # sized before any filter reads it, so typed here too
            raise InputError(
                f"{owner}: the text of passage {i} must be a string. "
                f"Got {type(text).__name__} instead."
            )
        n = len(text)
        if n > lim.max_passage_chars:
            raise _refuse(
                owner, f"the length of passage {i}", n, "max_passage_chars", lim.max_passage_chars
            )
        total += n
    if total > lim.max_total_chars:
        raise _refuse(
            owner, "the passages' total length", total, "max_total_chars", lim.max_total_chars
        )
