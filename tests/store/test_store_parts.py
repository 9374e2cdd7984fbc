"""The store floor's shared checks (:mod:`ragshield.store.base`) and its kind registry
(:mod:`ragshield.store.registry`), without a server or a model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragshield.errors import DataFormatError, InputError
from ragshield.store.base import check_batch, check_k, check_queries
from ragshield.store.faiss_store import FaissStore
from ragshield.store.registry import STORES, store_class
from ragshield.types import Passage


@pytest.mark.parametrize(
    ("k", "n", "message"),
    [
        (0, None, "k must be an int >= 1. Got 0"),
        (True, None, "Got True"),
        ("5", None, "Got '5'"),
        (1, 0, "the index is empty"),
        (6, 5, r"k \(6\) must be at most the number of passages in the index \(5\)"),
    ],
)
def test_check_k_refuses(k: object, n: int | None, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_k(k, n)


def test_check_k_accepts() -> None:
    assert check_k(5, 5) == 5 and check_k(3) == 3


def test_check_batch() -> None:
    ps = [Passage("a", "x"), Passage("b", "y")]
    out = check_batch(ps, np.ones((2, 4), dtype=np.float64), 4)
    assert out.dtype == np.float32 and out.flags["C_CONTIGUOUS"]
    with pytest.raises(InputError, match=r"shape \(n, 4\); got \(2, 3\)"):
        check_batch(ps, np.ones((2, 3)), 4)
    with pytest.raises(InputError, match="2 passages but 3 vectors"):
        check_batch(ps, np.ones((3, 4)), 4)


def test_check_queries() -> None:
    assert check_queries(np.ones(4), 4).shape == (1, 4)  # one vector becomes one row
    with pytest.raises(InputError, match="must have 4 columns; got 3"):
        check_queries(np.ones((2, 3)), 4)


@pytest.mark.parametrize("kind", sorted(STORES))
def test_every_registered_kind_opens_from_meta(kind: str) -> None:
    if kind == "pgvector":
        pytest.importorskip("psycopg")
    assert callable(store_class(kind).from_meta)


def test_store_class_unknown_kind_names_the_file() -> None:
    with pytest.raises(DataFormatError, match="unknown store kind 'chroma'; known: faiss"):
        store_class("chroma", Path("idx/meta.json"))
    assert store_class("faiss") is FaissStore
