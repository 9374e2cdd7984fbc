"""Unbounded library inputs are refused before any work (issue #27, minor list: 10,000
passages to ``RAGDefender.filter`` ran 154 s and took 3.9 GB; a 10 MB passage or
question went through). The bounds live in :mod:`ragshield.limits` and are checked where
every caller passes (``check_retrieved``, ``check_query``, ``FilterChain``,
``RAGPipeline.retrieve_many``); each refusal is an :class:`InputTooLargeError`, a
``ValueError``, in one line. The properties below check the rule itself: refused exactly
when a bound is passed, otherwise the input comes back unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragshield.defenses.base import check_retrieved
from ragshield.defenses.compose import FilterChain
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.errors import InputError, InputTooLargeError, check_query
from ragshield.limits import DEFAULT_LIMITS, InputLimits, check_query_size, current, use_limits
from ragshield.pipeline import RAGPipeline
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage, RetrievedPassage

DIM = 4


class TinyEncoder:
    """Deterministic 4-d vectors from the text's length (unit tests only)."""

    name = "tiny"
    dim = DIM

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        self.calls += 1
        x = np.array([[len(t) % 7 + 1.0, 1.0, 0.5, 0.0] for t in texts], dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def passages(n: int, chars: int = 20, big: int | None = None) -> list[RetrievedPassage]:
    v = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    out = []
    for i in range(n):
        text = "x" * (big if big is not None and i == n - 1 else chars)
        out.append(RetrievedPassage(Passage(f"p{i}", text), 1.0 - i / (n + 1), i, v))
    return out


def one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg and "InputLimits." in msg, msg
    return msg


# the three bounds a retrieval set can pass, each one past the default by one unit
OVER = [
    pytest.param(passages(DEFAULT_LIMITS.max_passages + 1), "max_passages", id="1001-passages"),
    pytest.param(passages(3, big=DEFAULT_LIMITS.max_passage_chars + 1), "max_passage_chars",
                 id="1M+1-char-passage"),
    pytest.param(passages(6, chars=DEFAULT_LIMITS.max_total_chars // 5), "max_total_chars",
                 id="5M+-chars-in-all"),
]  # fmt: skip


@pytest.mark.parametrize(("items", "field"), OVER)
def test_ragdefender_filter_refuses_before_work(
    items: list[RetrievedPassage], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    enc = TinyEncoder()
    f = RAGDefender(enc)
    with pytest.raises(InputTooLargeError, match=rf"RAGDefender.filter: .*{field}") as info:
        f.filter("What is the capital of Australia?", items)
    one_line(info.value)
    assert enc.calls == 0  # nothing was encoded


@pytest.mark.parametrize(("items", "field"), OVER)
def test_chain_refuses_before_the_first_stage(items: list[RetrievedPassage], field: str) -> None:
    seen: list[int] = []

    class Spy:
        name = "spy"

        def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> Any:
            seen.append(len(retrieved))
            raise AssertionError("the stage ran")

    for call in ("run", "filter"):
        with pytest.raises(InputTooLargeError, match=rf"FilterChain.filter: .*{field}"):
            getattr(FilterChain([Spy()]), call)("a question", items)
    assert seen == []


def test_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match="max_passages"):
        FilterChain([]).run("q", passages(DEFAULT_LIMITS.max_passages + 1))
    assert issubclass(InputTooLargeError, InputError)


def test_long_question_refused_by_the_chain() -> None:
    q = "why " * (DEFAULT_LIMITS.max_query_chars // 4 + 1)
    with pytest.raises(InputTooLargeError, match=r"FilterChain: .*max_query_chars") as info:
        FilterChain([]).run(q, passages(2))
    one_line(info.value)


def test_limits_can_be_raised_for_one_block() -> None:
    items = passages(DEFAULT_LIMITS.max_passages + 1)
    with use_limits(InputLimits(max_passages=2_000)):
        assert len(FilterChain([]).filter("q", items).kept) == len(items)
    assert current() is DEFAULT_LIMITS  # restored after the block
    chain = FilterChain([], limits=InputLimits(max_passages=2_000))
    assert len(chain.run("q", items)) == 0
    assert len(chain.filter("q", items).kept) == len(items)
    with pytest.raises(InputTooLargeError):
        FilterChain([], limits=InputLimits(max_passages=10)).run("q", passages(11))


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"max_passages": 0}, "max_passages"), ({"max_query_chars": -1}, "max_query_chars"),
     ({"max_total_chars": 1.5}, "max_total_chars"), ({"max_passage_chars": True}, "max_passage")],
)  # fmt: skip
def test_limits_themselves_are_checked(kw: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        InputLimits(**kw)


class _CountingStore(FaissStore):
    searches = 0

    def search(self, query_vectors: np.ndarray, k: int) -> list[list[RetrievedPassage]]:
        type(self).searches += 1
        return super().search(query_vectors, k)


def _pipeline(limits: InputLimits | None = None) -> tuple[RAGPipeline, _CountingStore]:
    enc = TinyEncoder()
    store = _CountingStore(DIM)
    docs = [Passage(f"d{i}", f"document number {i} " * (i + 1)) for i in range(30)]
    store.add(docs, enc.encode([d.text for d in docs]))
    return RAGPipeline(enc, store, limits=limits), store


def test_pipeline_refuses_before_searching() -> None:
    rag, store = _pipeline(InputLimits(max_passages=10))
    with pytest.raises(InputTooLargeError, match=r"RAGPipeline.retrieve: k \(11\)"):
        rag.answer("a question", k=11)
    with pytest.raises(InputTooLargeError, match="max_query_chars"):
        rag.retrieve("a" * (DEFAULT_LIMITS.max_query_chars + 1))
    with pytest.raises(InputTooLargeError, match="max_passages"):
        rag.answer_many(["q"], retrieved=[passages(11)])
    assert store.searches == 0
    assert rag.answer("document number 3", k=10).passages  # within the limits: answered


# ---- properties: refused exactly when a bound is passed -------------------------------

small = st.integers(min_value=1, max_value=40)


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=0, max_value=60), max_size=12),
    max_passages=small,
    max_chars=small,
    max_total=st.integers(min_value=1, max_value=300),
)
def test_check_retrieved_property(
    lengths: list[int], max_passages: int, max_chars: int, max_total: int
) -> None:
    items = [
        RetrievedPassage(Passage(f"p{i}", "y" * n), 0.5, i, None) for i, n in enumerate(lengths)
    ]
    limits = InputLimits(
        max_passages=max_passages, max_passage_chars=max_chars, max_total_chars=max_total
    )
    over = (
        len(lengths) > max_passages
        or any(n > max_chars for n in lengths)
        or sum(lengths) > max_total
    )
    with use_limits(limits):
        if over:
            with pytest.raises(InputTooLargeError) as info:
                check_retrieved(items, "Prop")
            one_line(info.value)
        else:
            assert check_retrieved(items, "Prop") == items


@settings(max_examples=200, deadline=None)
@given(text=st.text(min_size=1, max_size=80), limit=small)
def test_check_query_property(text: str, limit: int) -> None:
    """Any string: the text checks first, then refused as too long iff it is."""
    with use_limits(InputLimits(max_query_chars=limit)):
        try:
            out = check_query(text)
            check_query_size(out)
        except InputTooLargeError:
            assert len(text) > limit
        except InputError as exc:  # blank or a lone surrogate: the text checks, not size
            assert not isinstance(exc, InputTooLargeError)
        else:
            assert out == text and len(text) <= limit


@settings(max_examples=50, deadline=None)
@given(
    items=st.lists(st.integers(min_value=0, max_value=30), max_size=8).map(
        lambda ls: [RetrievedPassage(Passage(f"p{i}", "z" * n), 0.1, i, None)
                    for i, n in enumerate(ls)]
    ),
)  # fmt: skip
def test_empty_chain_passes_what_is_within_the_limits(items: list[RetrievedPassage]) -> None:
    assert list(FilterChain([]).filter("q", items).kept) == items
