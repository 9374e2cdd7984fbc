"""Sentence vectors for EcoSafeRAG (:mod:`ragshield.defenses.ecosaferag`), cached.

Why a cache of its own: on a real index the same passages are retrieved again and again,
and encoding their sentences is nearly all of the filter's cost (0.1–0.7 s per query at
k = 10 on one core before issue #17; the paper's budget is 1.2x vanilla latency). Each
passage's sentences and vectors are kept by a hash of its text (and the segmentation
settings), the bait skeletons once per template set, and the query-free sentences of
per-query baits once per filter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ragshield.defenses.ecosaferag.stages import Segmentation, segment_passages, skeleton
from ragshield.embed.base import Encoder, l2_normalize

_FIXED_CACHE = 4096  # query-free bait sentences kept per filter
Entry = tuple[tuple[str, ...], np.ndarray]


class SentenceVectors:
    """The caches one filter keeps; ``cache_size`` bounds the passages (oldest first out)."""

    def __init__(self) -> None:
        self.passages: dict[bytes, Entry] = {}
        self.skeletons: dict[tuple[object, ...], tuple[Segmentation, np.ndarray]] = {}
        self.fixed: dict[str, np.ndarray] = {}

    @staticmethod
    def key(text: str, language: str, split_clauses: bool) -> bytes:
        raw = f"{language}\x00{int(split_clauses)}\x00{text}".encode()
        return hashlib.blake2b(raw, digest_size=16).digest()

    def embed(
        self,
        encoder: Encoder,
        query: str | None,
        texts: Sequence[str],
        language: str,
        split_clauses: bool,
        cache_size: int,
    ) -> tuple[np.ndarray | None, Segmentation, np.ndarray]:
        """``(query vector, segmentation, sentence vectors)`` of ``texts``: cached passages
        are looked up, the rest segmented and encoded with the query in one call."""
        keys = [self.key(t, language, split_clauses) for t in texts]
        text_of = dict(zip(keys, texts, strict=True))
        todo = list(dict.fromkeys(k for k in keys if k not in self.passages))
        seg = segment_passages([text_of[k] for k in todo], language, split_clauses=split_clauses)
        head = [query] if query is not None else []
        vecs = l2_normalize(encoder.encode([*head, *seg.sentences]))
        fresh: dict[bytes, Entry] = {}
        for j, k in enumerate(todo):
            rows = seg.of(j)
            fresh[k] = (tuple(seg.sentences[r] for r in rows), vecs[len(head) + rows])
        entries = [fresh[k] if k in fresh else self.passages[k] for k in keys]
        for k, v in fresh.items():
            if cache_size <= 0:
                break
            while len(self.passages) >= cache_size:
                self.passages.pop(next(iter(self.passages)))
            self.passages[k] = v
        sizes = [len(e[0]) for e in entries]
        owner = np.repeat(np.arange(len(entries), dtype=np.int64), sizes)
        position = np.concatenate([np.zeros(0, np.int64)] + [np.arange(n) for n in sizes])
        sentences = tuple(s for e in entries for s in e[0])
        dim = vecs.shape[1]
        emb = np.vstack([e[1] for e in entries]) if sentences else np.zeros((0, dim), np.float32)
        out = Segmentation(sentences, owner, position.astype(np.int64), len(texts))
        return (vecs[0] if head else None), out, emb.astype(np.float32, copy=False)

    def skeleton_baits(
        self, encoder: Encoder, templates: Sequence[str], language: str, split_clauses: bool
    ) -> tuple[Segmentation, np.ndarray]:
        """Bait templates without their ``{query}`` slot, segmented and encoded once."""
        key = (tuple(templates), language, split_clauses)
        if key not in self.skeletons:
            texts = [skeleton(t) for t in templates]
            seg = segment_passages(texts, language, split_clauses=split_clauses)
            emb = (
                l2_normalize(encoder.encode(list(seg.sentences)))
                if seg.sentences
                else np.zeros((0, 0), dtype=np.float32)
            )
            self.skeletons[key] = (seg, emb)
        return self.skeletons[key]

    def query_baits(
        self,
        encoder: Encoder,
        texts: Sequence[str],
        needle: str,
        language: str,
        split_clauses: bool,
    ) -> tuple[Segmentation, np.ndarray]:
        """Baits instantiated with the query (the paper preset): sentences without the
        query (``needle``) are encoded once per filter, the others every query."""
        seg = segment_passages(texts, language, split_clauses=split_clauses)
        fresh = [s for s in dict.fromkeys(seg.sentences) if needle in s or s not in self.fixed]
        lookup = dict(zip(fresh, l2_normalize(encoder.encode(fresh)), strict=True)) if fresh else {}
        for s, v in lookup.items():
            if needle not in s and len(self.fixed) < _FIXED_CACHE:
                self.fixed[s] = v
        if not seg.sentences:
            return seg, np.zeros((0, 0), dtype=np.float32)
        return seg, np.vstack([lookup[s] if s in lookup else self.fixed[s] for s in seg.sentences])
