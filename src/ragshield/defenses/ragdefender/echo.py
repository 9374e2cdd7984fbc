"""How close each retrieved passage comes to the *question*, sentence by sentence, in
embedding space.

Example::

    from ragshield.defenses.ragdefender.echo import EchoVectors, echo_scores

    cache = EchoVectors()
    qv, sentence_vecs, owner = cache.embed(encoder, question, [r.text for r in retrieved])
    echo, focus = echo_scores(qv, sentence_vecs, owner, len(retrieved))

Why: a poisoning passage must win retrieval for one question, so the attacker writes it
*about* that question — PoisonedRAG prefixes the question word for word, an adaptive
attacker rewords, moves or drops it, but some sentence still says what the question asks
(cosine 0.84–1.00 to the question for every prefix rewrite on the HotpotQA dev split,
vs p95 0.73 for benign passages and 0.83 for gold ones). A string match
(``restates_question``) misses every rewording; the cosine of the closest sentence does
not. ``focus`` (the mean over sentences) says how much of the passage is about the question:
a genuine paragraph carries one answering sentence among others.

The sentence vectors are cached by a hash of the passage text (a real index returns the same
passages again and again) and the question vector by its text, so a warm filter call
encodes nothing.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ragshield.embed.base import Encoder, l2_normalize
from ragshield.text import split_sentences

#: Passages (and questions) whose vectors one filter keeps, oldest first out (ours: a few
#: MB of float32 at 384-d, several times a busy index's working set of top-k passages).
CACHE_SIZE = 20000


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EchoVectors:
    """Per-passage sentence vectors and per-question vectors, LRU-cached."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self.cache_size = cache_size
        self._passages: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._queries: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._whole: OrderedDict[bytes, np.ndarray] = OrderedDict()

    def whole(self, encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of whole texts (the typo view's re-read passages), cached like the
        sentences: the same planted passages come back for every question they target."""
        keys = [_key(t) for t in texts]
        found = self._hits(self._whole, keys)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            text_of = dict(zip(keys, texts, strict=True))
            vecs = l2_normalize(np.asarray(encoder.encode([text_of[k] for k in todo]), np.float32))
            for k, v in zip(todo, vecs, strict=True):
                found[k] = v
                self._put(self._whole, k, v)
        return np.vstack([found[k] for k in keys])

    @staticmethod
    def _hits(
        store: OrderedDict[bytes, np.ndarray], keys: Sequence[bytes]
    ) -> dict[bytes, np.ndarray]:
        """The cached entries of ``keys``, marked most recently used. Held apart from the
        store: entries put later in the same call may evict them (a full cache used to
        raise ``KeyError`` on a set mixing cached and new passages)."""
        found = {k: store[k] for k in keys if k in store}
        for k in found:
            store.move_to_end(k)
        return found

    def _put(self, store: OrderedDict[bytes, np.ndarray], key: bytes, value: np.ndarray) -> None:
        store[key] = value
        while len(store) > self.cache_size:
            store.popitem(last=False)

    def embed(
        self, encoder: Encoder, query: str, texts: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(question vector, sentence vectors, owner)``: ``owner[j]`` is the passage of
        sentence ``j``. Everything not cached is encoded in one call."""
        qk = _key(query)
        keys = [_key(t) for t in texts]
        found = self._hits(self._passages, keys)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        text_of = dict(zip(keys, texts, strict=True))
        pieces = [split_sentences(text_of[k]) or [text_of[k]] for k in todo]
        flat = [s for p in pieces for s in p]
        head = [] if qk in self._queries else [query]
        if head or flat:
            vecs = l2_normalize(np.asarray(encoder.encode([*head, *flat]), dtype=np.float32))
            if head:
                self._put(self._queries, qk, vecs[0])
            at = len(head)
            for k, p in zip(todo, pieces, strict=True):
                found[k] = vecs[at : at + len(p)]
                self._put(self._passages, k, found[k])
                at += len(p)
        self._queries.move_to_end(qk)
        per = [found[k] for k in keys]
        owner = np.repeat(np.arange(len(per)), [v.shape[0] for v in per])
        dim = self._queries[qk].shape[0]
        sv = np.vstack(per) if per else np.zeros((0, dim), dtype=np.float32)
        return self._queries[qk], sv, owner


def echo_scores(
    query_vector: np.ndarray, sentence_vectors: np.ndarray, owner: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per passage: ``echo`` = cosine of its sentence closest to the question, ``focus`` =
    mean cosine of its sentences to the question (0 for a passage with no sentence)."""
    echo = np.zeros(n)
    focus = np.zeros(n)
    if owner.size == 0:
        return echo, focus
    cos = sentence_vectors @ query_vector
    echo[np.unique(owner)] = -np.inf
    np.maximum.at(echo, owner, cos)
    counts = np.bincount(owner, minlength=n)
    focus = np.bincount(owner, weights=cos, minlength=n) / np.maximum(counts, 1)
    echo[counts == 0] = 0.0
    return echo, focus
