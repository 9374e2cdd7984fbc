"""Index-side novelty: how much of a passage's rare vocabulary its index neighbours lack.

Example::

    from ragshield.store.calibration_novelty import passage_novelty

    table = passage_novelty(ids, texts, vectors)      # over the whole index, planted or not
    table["p17"]                                      # Novelty(share=0.71, rare=14)
    ragdefender.use_novelty(table)                    # the ``derivative`` stage reads it

    index = NoveltyIndex(ids, texts, vectors)         # once; then per set of added passages
    ragdefender.use_novelty(index.with_added(new_ids, new_texts, new_vectors))

Why: the retrieval-time filter sees ten passages and the index profile; the index itself
holds every passage's neighbourhood, which a rewording of the question cannot change. A
genuine paragraph *brings* something: most of its rare words (used by at most
:data:`RARE_SHARE` of the passages) appear in none of its ten nearest index passages
(median share 0.65-0.72 on HotpotQA and SQuAD dev, benign and gold alike). A passage an
attacker writes *about* a question is put together from what the index already says about
it — the question's entities, the gold page's names — plus the answer it plants: its rare
words are nearly all in its neighbourhood (HotpotQA / SQuAD dev: meta-epistemic notes
median 0.23 / 0.14, answer-spread 0.34 / 0.37, PoisonedRAG 0.30). Measured in
docs/results-poisoning.md (section "index-side support").

It was meant the other way round (the brief's hypothesis: a planted claim lacks support
from its neighbourhood, a genuine one has it); on both encyclopedias the genuine paragraphs
are the *less* supported ones, so the statistic is read as novelty, and a passage close to
the question with almost none is the suspect.

Honest by construction: the table is computed over the index as it is when the filter
runs, planted passages included (an attacker's passage is in the index it poisons; the
benchmarks and the scan compute it over their planted copy). Neighbours at embedding cosine
>= :data:`COPY_COSINE` are copies (mirrors, an edited copy and its original) and lend no
support either way. Evaded by an attacker who pads a passage with rare words of his own
(invented names, numbers); that costs him the closeness to the question the other stages
measure, not retrieval.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragshield.embed.base import l2_normalize
from ragshield.errors import InputError
from ragshield.store.profile import neighbour_blocks

NEIGHBOURS = 10  # a top-10 neighbourhood, the retrieval default k
RARE_SHARE = 0.01  # as profile.COMMON_SHARE: a word in < 1 % of passages is rare
COPY_COSINE = 0.85  # as EchoParams.paraphrase_semantic: closer neighbours are copies
COPY_WORDS = 0.5  # word-set Jaccard: GARAG's typo'd copies of a page keep most of its words
DERIVED_SHARE = 0.5  # half a neighbour's rare words are this passage's: written from it
SOURCE_SHARE = 0.3  # a neighbour lends support when it brings this much itself (dev median 0.65+)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Novelty:
    """One passage's novelty: ``share`` of its ``rare`` words that none of its
    :data:`NEIGHBOURS` nearest index passages (copies aside) uses."""

    share: float
    rare: int


def _words(text: str) -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(w for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS)


def passage_novelty(
    ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, **bars: Any
) -> dict[str, Novelty]:
    """:class:`Novelty` of every passage of an index (:class:`NoveltyIndex`; ``bars``: its
    keyword arguments)."""
    return NoveltyIndex(ids, texts, vectors, **bars).table


class NoveltyIndex:
    """The novelty of every passage of an index against its ``neighbours`` nearest passages
    (exact cosine, blockwise: memory ``block × n`` floats), and of passages added to it.

    A word is rare when at most ``max(2, rare_share × n)`` passages use it. Copies lend no
    support: neighbours at embedding cosine >= ``copy_cosine`` or word-set Jaccard >=
    ``copy_words`` (a typo'd copy of a page), or whose own rare words are at least
    ``derived_share`` this passage's words (written from it: a note about the gold page
    supports nothing *in* the gold page, while the gold page, whose many rare words the note
    does not repeat, supports the note's borrowed ones). Two passes: the second counts
    support only from neighbours whose own first-pass novelty is at least ``source_share``
    — a passage that brings nothing lends nothing, so twenty notes written from the gold
    page do not make the gold page look written from them.
    """

    def __init__(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        vectors: np.ndarray,
        *,
        neighbours: int = NEIGHBOURS,
        rare_share: float = RARE_SHARE,
        copy_cosine: float = COPY_COSINE,
        copy_words: float = COPY_WORDS,
        source_share: float = SOURCE_SHARE,
        derived_share: float = DERIVED_SHARE,
        block: int = 1024,
    ) -> None:
        self.x = l2_normalize(np.asarray(vectors, dtype=np.float32))
        n = self.x.shape[0]
        if not (len(ids) == len(texts) == n):
            raise InputError(
                f"novelty needs one id and text per vector ({len(ids)}, {len(texts)}, {n})"
            )
        self.neighbours, self.rare_share, self.source_share = neighbours, rare_share, source_share
        self.bars = (copy_cosine, copy_words, derived_share)
        self.words = [_words(t) for t in texts]
        self.df: Counter[str] = Counter(w for ws in self.words for w in ws)
        bar = max(2.0, rare_share * n)
        rare = [frozenset(w for w in ws if self.df[w] <= bar) for ws in self.words]
        support = _supporters(self.x, self.words, rare, min(neighbours, n - 1), self.bars, block)
        self.first = np.array([_share(rare[i], self.words, support[i]) for i in range(n)])
        self.table: dict[str, Novelty] = {}
        for i in range(n):
            sources = [j for j in support[i] if self.first[j] >= source_share]
            self.table[ids[i]] = Novelty(round(_share(rare[i], self.words, sources), 4),
                                         len(rare[i]))  # fmt: skip

    def with_added(
        self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray
    ) -> dict[str, Novelty]:
        """The table with passages added to the index (a scan's or an attacker's planted
        ones), each judged against the index and the other added passages. The index's own
        passages keep their values: what a handful of added passages change in them is
        second-order (and a note written from a page lends it nothing, see the class)."""
        if not len(ids):
            return self.table
        new = l2_normalize(np.asarray(vectors, dtype=np.float32))
        words = [*self.words, *(_words(t) for t in texts)]
        df = self.df.copy()
        for ws in words[len(self.words) :]:
            df.update(ws)
        bar = max(2.0, self.rare_share * len(words))
        x = np.vstack([self.x, new])
        m = len(self.words)
        rows = list(range(m, len(words)))
        rare = {i: frozenset(w for w in words[i] if df[w] <= bar) for i in rows}
        k = min(self.neighbours, len(words) - 1)
        support, first = {}, {}
        for i in rows:
            sim = x @ x[i]
            sim[i] = -np.inf
            top = np.argpartition(-sim, k - 1)[:k] if k > 0 else np.zeros(0, int)
            support[i] = [
                j for j in top.tolist()
                if _lends(words[i], words[j], rare.get(j) or frozenset(
                    w for w in words[j] if df[w] <= bar), float(sim[j]), self.bars)
            ]  # fmt: skip
            first[i] = _share(rare[i], words, support[i])
        out = dict(self.table)
        for i in rows:
            sources = [j for j in support[i]
                       if (first[j] if j >= m else self.first[j]) >= self.source_share]  # fmt: skip
            out[ids[i - m]] = Novelty(round(_share(rare[i], words, sources), 4), len(rare[i]))
        return out


def _lends(
    a: frozenset[str], b: frozenset[str], rare_b: frozenset[str], sim: float,
    bars: tuple[float, float, float],
) -> bool:  # fmt: skip
    """Whether a passage of words ``b`` (rare ones ``rare_b``) at cosine ``sim`` may support
    one of words ``a``: no copy of it (``bars``: cosine, word Jaccard), not written from it
    (derived share of its rare words)."""
    copy_cosine, copy_words, derived_share = bars
    jac = len(a & b) / len(a | b) if a or b else 1.0
    derived = len(rare_b & a) / len(rare_b) if rare_b else 0.0
    return sim < copy_cosine and jac < copy_words and derived < derived_share


def _share(rare: frozenset[str], words: Sequence[frozenset[str]], sources: Sequence[int]) -> float:
    """Share of ``rare`` no passage of ``sources`` uses (1.0 for no rare word)."""
    if not rare:
        return 1.0
    seen: set[str] = set()
    for j in sources:
        seen |= words[j]
    return len(rare - seen) / len(rare)


def _supporters(
    x: np.ndarray, words: Sequence[frozenset[str]], rare: Sequence[frozenset[str]], k: int,
    bars: tuple[float, float, float], block: int,
) -> list[list[int]]:  # fmt: skip
    """Per passage, its ``k`` nearest passages that are neither a copy of it nor written
    from it (``bars``: copy cosine, copy word Jaccard, derived share)."""
    n = x.shape[0]
    out: list[list[int]] = []
    if k <= 0:
        return [[] for _ in range(n)]
    for rows, sim in neighbour_blocks(x, np.arange(n), block):
        top = np.argpartition(-sim, k - 1, axis=1)[:, :k]
        for r, i in enumerate(rows.tolist()):
            out.append([j for j in top[r].tolist()
                        if _lends(words[i], words[j], rare[j], float(sim[r, j]), bars)])  # fmt: skip
    return out
