"""Test doubles shared by several test folders: encoders and filters with no model (and
the one JSONL writer of the tests' small corpora).

Imported as ``from fakes import ...``: pytest puts ``tests/`` on ``sys.path`` for the root
``conftest.py``. Each double is deterministic, so a test's outcome does not depend on a model.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ragshield.defenses.base import check_retrieved
from ragshield.defenses.injection.head import InjectionHead
from ragshield.embed.base import l2_normalize
from ragshield.types import Decision, FilterResult, Generation, RetrievedPassage


class HashEncoder:
    """Deterministic bag-of-words hashing encoder (test-only): counts its calls."""

    def __init__(self, name: str = "hash-16", dim: int = 16) -> None:
        self.name = name
        self._dim = dim
        self.calls: list[list[str]] = []

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        self.calls.append(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % self._dim] += 1.0
        return l2_normalize(out + 1e-3)


class WordHashEncoder:
    """Bag-of-words hashing on CRC-32 of each word (punctuation stripped): similar words,
    similar vectors; the planting and filter-aware tests tune their texts to it."""

    name = "hash-test"
    dim = 64

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, zlib.crc32(w.strip(".,?").encode()) % self.dim] += 1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


class KeywordFilter:
    """Removes passages containing ``word`` (test-only stand-in for a poisoning defense)."""

    def __init__(self, word: str = "POISON", name: str = "keyword") -> None:
        self.word = word
        self.name = name
        self.seen: list[list[RetrievedPassage]] = []

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        items = check_retrieved(retrieved, "KeywordFilter")
        self.seen.append(items)
        bad = [self.word in r.text for r in items]
        return FilterResult(
            name=self.name,
            kept=tuple(r for r, b in zip(items, bad, strict=True) if not b),
            removed=tuple(r for r, b in zip(items, bad, strict=True) if b),
            decisions=tuple(
                Decision(i, r.id, f"contains {self.word}", {"suspicion": 0.9, "hits": 1.0})
                for i, r in enumerate(items)
                if bad[i]
            ),
        )


#: The audit metadata an adapter attaches to a passage :class:`KeywordFilter` removed.
KEYWORD_REMOVED = {
    "kept": False,
    "reason": "contains POISON",
    "defense": "keyword",
    "stage": "keyword",
    "suspicion": pytest.approx(0.9),
    "scores": {"suspicion": pytest.approx(0.9), "hits": 1.0},
    "rewritten": False,
}


class SentenceTrimFilter:
    """Sentence-level (EcoSafeRAG-shaped, test-only): drops sentences containing ``word``."""

    name = "trim"

    def __init__(self, word: str = "IGNORE") -> None:
        self.word = word

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        items = check_retrieved(retrieved, "SentenceTrimFilter")
        kept: list[RetrievedPassage] = []
        removed: list[RetrievedPassage] = []
        decisions: list[Decision] = []
        for i, r in enumerate(items):
            sentences = [s.strip() + "." for s in r.text.split(".") if s.strip()]
            bad = [s for s in sentences if self.word in s]
            decisions += [
                Decision(i, r.id, "bait-like sentence", {"suspicion": 0.7}, "sentence", s)
                for s in bad
            ]
            text = " ".join(s for s in sentences if s not in bad)
            if not text:
                removed.append(r)
            else:  # always re-joined, like a real sentence-level defense
                kept.append(replace(r, passage=replace(r.passage, text=text)))
        return FilterResult(self.name, tuple(kept), tuple(removed), tuple(decisions))


class EchoGenerator:
    """A generator answering every question with one fixed text (test-only): output checks
    are what such a test exercises. Its details carry ``{"model": "echo"}`` so a test can
    see that a wrapper keeps the inner generator's details."""

    name = "echo"

    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation(self.text, details={"model": "echo"})

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def unit_vector(seed: int, dim: int) -> np.ndarray:
    """A seeded random unit vector: near-orthogonal to any other seed's in 32+ dimensions."""
    v = np.random.default_rng(seed).standard_normal(dim)
    return v / np.linalg.norm(v)


def near_vector(base: np.ndarray, cosine: float, seed: int) -> np.ndarray:
    """A unit vector at exactly ``cosine`` to the unit vector ``base`` (a seeded direction)."""
    noise = unit_vector(seed, len(base))
    noise -= (noise @ base) * base
    noise /= np.linalg.norm(noise)
    return cosine * base + math.sqrt(1 - cosine * cosine) * noise


class QuestionEncoder:
    """Maps a text to a fixed vector: the question itself, chosen sentences at a chosen
    cosine to it, anything else to a seeded random (near-orthogonal) vector. Counts calls,
    so a test can tell whether a filter re-encoded what it had already seen."""

    name = "fake"

    def __init__(self, question: str, close: dict[str, float], dim: int = 64) -> None:
        self.question = question
        self.dim = dim
        self.q = unit_vector(0, dim)
        self.close = close
        self.calls = 0
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        self.calls += 1
        self.seen.extend(texts)
        out = []
        for t in texts:
            if t == self.question:
                out.append(self.q)
            elif t in self.close:
                out.append(near_vector(self.q, self.close[t], sum(map(ord, t))))
            else:
                out.append(unit_vector(sum(map(ord, t)) + 7, self.dim))
        return np.asarray(out, dtype=np.float32)


class CueEncoder:
    """4-d vectors ``[instruction cues, other words, 1, 0]`` (unit-normalised), so an
    injection head's score follows how many of ``cues`` a text uses; records what it saw."""

    name = "keywords"
    dim = 4

    def __init__(self, cues: Sequence[str]) -> None:
        self.cues = frozenset(cues)
        self.seen: list[str] = []

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        self.seen.extend(texts)
        rows = []
        for t in texts:
            words = t.lower().replace(".", " ").split()
            cue = sum(w in self.cues for w in words)
            rows.append([cue, len(words) - cue, 1.0, 0.0])
        x = np.asarray(rows, dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True)


def stamped_retrieved(
    q: np.ndarray, texts: Sequence[str], cosine: float, stamped: Sequence[int],
    metadata: dict[str, str],
) -> list[RetrievedPassage]:  # fmt: skip
    """``texts`` as a retrieved set at ``cosine`` to the question vector ``q`` (seeded), the
    ``stamped`` positions carrying ``metadata`` (e.g. ``ragshield add``'s ``added_at``)."""
    from ragshield.types import Passage

    vecs = [near_vector(q, cosine, 10 + i) for i in range(len(texts))]
    return [RetrievedPassage(Passage(f"p{i}", t, metadata=metadata if i in stamped else {}),
                             float(v @ q), i, v.astype(np.float32))
            for i, (t, v) in enumerate(zip(texts, vecs, strict=True))]  # fmt: skip


def cue_head(threshold: float = 0.5, *, boost: float = 0.0) -> InjectionHead:
    """A linear injection head over :class:`CueEncoder` vectors: cues push the score up."""
    w = np.array([[8.0], [-4.0], [-1.0], [0.0]], dtype=np.float32)
    return InjectionHead(
        ((w, np.zeros(1, np.float32)),), "keywords", {"fpr1": threshold, "fpr0.1": 0.9},
        offtopic_boost=boost,
    )  # fmt: skip


def write_jsonl(path: Path, records: Sequence[dict[str, str]]) -> Path:
    """A corpus or question file, one JSON object per line (what the CLI reads)."""
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path
