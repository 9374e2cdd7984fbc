"""Index-side novelty: how much of a passage's rare vocabulary its index neighbours lack.

Example::

    from ragshield.store.calibration_novelty import passage_novelty

    table = passage_novelty(ids, texts, vectors)      # over the whole index, planted or not
    table["p17"]                                      # Novelty(share=0.71, rare=14)
    ragdefender.use_novelty(table)                    # the ``derivative`` stage reads it

    index = NoveltyIndex(ids, texts, vectors, index=faiss_index)  # `ragshield index`
    ragdefender.use_novelty(index.with_added(new_ids, new_texts, new_vectors))
    index.extended(new_ids, new_texts, new_vectors)   # `ragshield add`: the stored table grows

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

Honest by construction: an attacker's passage is in the index it poisons, so the table
holds it — the way a deployment gets it there: ``ragshield add`` (and the scan, ``eval
retrieval`` and the filter-aware oracle, which plant into a copy) judges each added passage
against the index (:meth:`NoveltyIndex.with_added`), while the index's own passages keep the
values they were built with. (The benchmarks of poisoning-8 recomputed the whole table over
each planted copy instead, so planted passages could lower a genuine page's novelty: the
gold pages that run lost on HotpotQA test. A corpus poisoned *before* ``ragshield index`` is
in that case still; the sibling count below is what keeps a series page then.)
Neighbours at embedding cosine >= :data:`COPY_COSINE` are copies (mirrors, an edited copy
and its original) and lend no support either way. A passage with several template
*siblings* (neighbours present when the index was built sharing >= :data:`SIBLING_WORDS` of
its words: a year's honours list, a league's events) owes its low novelty to its series,
and RAGDefender keeps it (``derivative_siblings``). Evaded by an attacker who pads a passage
with rare words of his own (invented names, numbers); that costs him the closeness to the
question the other stages measure, not retrieval.

A product part: ``ragshield index`` computes the table beside the vectors
(:data:`NOVELTY_FILE`, one row per passage in the store's order, recorded in ``meta.json``
under ``novelty``), ``ragshield add`` extends it (:meth:`NoveltyIndex.extended`), and every
pipeline that opens the index hands it to RAGDefender (:func:`use_index_novelty`). Each
passage's neighbours come from the index's own search
(:func:`ragshield.store.neighbours.knn`, the search the index profile uses too: FAISS, k per
passage), so building it costs what k searches per passage cost (exact flat search: the
same neighbours as the all-pairs loop it replaces, pinned in a test). Added passages are an
overlay: only their rows are computed, the index's are read in place.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.embed.base import l2_normalize
from ragshield.errors import DataFormatError, InputError
from ragshield.store.neighbours import knn, nearest

log = logging.getLogger(__name__)
_WARNED: set[str] = set()  # indexes already reported without a table (one line each)

NEIGHBOURS = 10  # a top-10 neighbourhood, the retrieval default k
RARE_SHARE = 0.01  # as profile.COMMON_SHARE: a word in < 1 % of passages is rare
COPY_COSINE = 0.85  # as EchoParams.paraphrase_semantic: closer neighbours are copies
COPY_WORDS = 0.5  # word-set Jaccard: GARAG's typo'd copies of a page keep most of its words
DERIVED_SHARE = 0.5  # half a neighbour's rare words are this passage's: written from it
SOURCE_SHARE = 0.3  # a neighbour lends support when it brings this much itself (dev median 0.65+)
# a supporting neighbour sharing this much of a passage's vocabulary (word-set Jaccard) is a
# sibling of its template (dev, HotpotQA: the series pages at the bar, e.g. a surf league's
# events, a game's adventures, have 3-5 such neighbours; planted notes 0-2)
SIBLING_WORDS = 0.15
NOVELTY_FILE = "novelty.npy"  # float32 (n, 4): share, rare words, first-pass share, siblings
FORMAT_VERSION = 1
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Novelty:
    """One passage's novelty: ``share`` of its ``rare`` words that none of its
    :data:`NEIGHBOURS` nearest index passages (copies aside) uses; ``siblings``: how many of
    those neighbours that were in the index when it was built share its template (word-set
    Jaccard >= :data:`SIBLING_WORDS`, copies aside)."""

    share: float
    rare: int
    siblings: int = 0


def _words(text: str) -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(w for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS)


def passage_novelty(
    ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, **bars: Any
) -> dict[str, Novelty]:
    """:class:`Novelty` of every passage of an index (:class:`NoveltyIndex`; ``bars``: its
    keyword arguments)."""
    return NoveltyIndex(ids, texts, vectors, **bars).table


def store_novelty(store: Any, texts: Sequence[str] | None = None) -> NoveltyIndex:
    """The table ``ragshield index`` stores for a FAISS ``store`` (its passages' ids, its
    vectors, neighbours from its own index): ``texts`` are the passages' plain texts, by
    default the stored ones without their canaries (the vectors are those of the plain
    texts, so the words must be too). :func:`ragshield.indexing.record_statistics` (``index``,
    ``reindex``) and the evaluations that stand in for an index build it here, so they
    cannot build it two ways."""
    passages = store.passages
    if texts is None:
        from ragshield.defenses.canary_marks import strip_canaries

        texts = [strip_canaries(p.text) for p in passages]
    return NoveltyIndex(
        [p.id for p in passages], texts, store.vectors, index=store.neighbour_index()
    )


class NoveltyTable(dict[str, Novelty]):
    """``{passage id: Novelty}`` (what RAGDefender reads) that also answers ``uses(word)``:
    how many passages of the index — and of the passages added to it — use a word (the
    tokens :func:`_words` makes). Why: RAGDefender's lone-claim stage asks whether the index
    holds a claim word outside the retrieved set; the counts are the ones the table was
    built from, read in place, so handing them over costs nothing."""

    def __init__(self, rows: Mapping[str, Novelty], uses: Callable[[str], int]) -> None:
        super().__init__(rows)
        self.uses = uses


class _Uses:
    """``uses(word)``: the sum of one or more word counts, an index's counted on first call.

    A class, not a lambda, so a :class:`NoveltyTable` pickles (a benchmark caches the tables
    of its planted indexes); it pickles with its counts counted."""

    def __init__(self, *parts: Counter[str] | NoveltyIndex) -> None:
        self._parts = parts

    def _counters(self) -> tuple[Counter[str], ...]:
        return tuple(p if isinstance(p, Counter) else p._counts() for p in self._parts)

    def __call__(self, word: str) -> int:
        return sum(c[word] for c in self._counters())

    def __reduce__(self) -> tuple[type[_Uses], tuple[Counter[str], ...]]:
        return (_Uses, self._counters())


class NoveltyIndex:
    """The novelty of every passage of an index against its ``neighbours`` nearest passages
    (:func:`knn`: the index's own search, ``index`` = its FAISS index when given), and of
    passages added to it.

    A word is rare when at most ``max(2, rare_share × n)`` passages use it. Copies lend no
    support: neighbours at embedding cosine >= ``copy_cosine`` or word-set Jaccard >=
    ``copy_words`` (a typo'd copy of a page), or whose own rare words are at least
    ``derived_share`` this passage's words (written from it: a note about the gold page
    supports nothing *in* the gold page, while the gold page, whose many rare words the note
    does not repeat, supports the note's borrowed ones). Two passes: the second counts
    support only from neighbours whose own first-pass novelty is at least ``source_share``
    — a passage that brings nothing lends nothing, so twenty notes written from the gold
    page do not make the gold page look written from them.

    State (``values_``, one row per passage: share, rare words, first-pass share) is what
    ``ragshield index`` stores (:func:`write_novelty`); :meth:`restore` reopens it.
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
        sibling_words: float = SIBLING_WORDS,
        index: Any = None,
        _values: np.ndarray | None = None,
    ) -> None:
        self._vectors = vectors
        self._x: np.ndarray | None = None  # unit rows, made when first needed
        n = int(np.shape(vectors)[0])
        if not (len(ids) == len(texts) == n):
            raise InputError(
                f"novelty needs one id and text per vector ({len(ids)}, {len(texts)}, {n})"
            )
        self.ids, self._texts = list(ids), list(texts)
        self.neighbours, self.rare_share, self.source_share = neighbours, rare_share, source_share
        self.bars = (copy_cosine, copy_words, derived_share)
        self.sibling_words = sibling_words
        self._words: list[frozenset[str]] | None = None
        self._df: Counter[str] | None = None
        self._table: NoveltyTable | None = None
        if _values is not None:  # restored: the words are read only when passages are added
            self.values_ = np.asarray(_values, dtype=np.float32).reshape(n, 4)
            return
        words = self.words
        df = self._counts()
        bar = max(2.0, rare_share * n)
        rare = [frozenset(w for w in ws if df[w] <= bar) for ws in words]
        sims, rows = knn(self.x, neighbours, index)
        support = [
            [j for j, s in zip(rows[i].tolist(), sims[i].tolist(), strict=True)
             if j >= 0 and _lends(words[i], words[j], rare[j], s, self.bars)]
            for i in range(n)
        ]  # fmt: skip
        first = np.array([_share(rare[i], words, support[i]) for i in range(n)])
        share = [
            _share(rare[i], words, [j for j in support[i] if first[j] >= source_share])
            for i in range(n)
        ]
        siblings = [_siblings(words, i, support[i], sibling_words) for i in range(n)]
        values: list[Any] = [np.round(share, 4), [len(r) for r in rare], first, siblings]
        self.values_ = (
            np.column_stack(values).astype(np.float32) if n else np.zeros((0, 4), np.float32)
        )

    @property
    def params(self) -> dict[str, float | int]:
        """The constructor's bars (recorded in ``meta.json`` beside the table)."""
        copy_cosine, copy_words, derived_share = self.bars
        return {"neighbours": self.neighbours, "rare_share": self.rare_share,
                "copy_cosine": copy_cosine, "copy_words": copy_words,
                "source_share": self.source_share, "derived_share": derived_share,
                "sibling_words": self.sibling_words}  # fmt: skip

    @classmethod
    def restore(
        cls, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray, values: np.ndarray,
        **params: Any,
    ) -> NoveltyIndex:  # fmt: skip
        """The table a build stored (``values``: :attr:`values_`), over the same passages."""
        return cls(ids, texts, vectors, _values=values, **params)

    @property
    def x(self) -> np.ndarray:
        if self._x is None:
            self._x = l2_normalize(np.asarray(self._vectors, dtype=np.float32))
        return self._x

    @property
    def words(self) -> list[frozenset[str]]:
        if self._words is None:
            self._words = [_words(t) for t in self._texts]
        return self._words

    @property
    def df(self) -> Counter[str]:
        """How many passages use each word (a copy: callers extend it)."""
        return self._counts().copy()

    def _counts(self) -> Counter[str]:
        if self._df is None:
            self._df = Counter(w for ws in self.words for w in ws)
        return self._df

    @property
    def first(self) -> np.ndarray:
        return self.values_[:, 2]

    @property
    def table(self) -> NoveltyTable:
        """``{passage id: Novelty}``, what RAGDefender's ``derivative`` stage reads, with the
        index's word counts (:class:`NoveltyTable`; counted on first use)."""
        if self._table is None:
            self._table = NoveltyTable(
                {pid: Novelty(round(float(v[0]), 4), int(v[1]), int(v[3]))
                 for pid, v in zip(self.ids, self.values_.tolist(), strict=True)},
                _Uses(self),
            )  # fmt: skip
        return self._table

    def __len__(self) -> int:
        return len(self.ids)

    def with_added(
        self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray
    ) -> NoveltyTable:
        """The table with passages added to the index (a scan's or an attacker's planted
        ones), each judged against the index and the other added passages. The index's own
        passages keep their values: what a handful of added passages change in them is
        second-order (and a note written from a page lends it nothing, see the class).

        An overlay: only the added rows are computed, the index's words, counts and vectors
        are read in place (the filter-aware oracle calls this once per black-box call); the
        result is the index's table merged with them (one dict merge, < 1 ms at 100k
        passages, where a ``ChainMap`` would cost its reader 75 ms to copy); its word
        counts are the index's plus the added passages'."""
        if not len(ids):
            return self.table
        values, words, _ = self._judge(ids, texts, vectors)
        added = {pid: Novelty(round(float(v[0]), 4), int(v[1]), int(v[3]))
                 for pid, v in zip(ids, values.tolist(), strict=True)}  # fmt: skip
        return NoveltyTable(self.table | added, _Uses(self, Counter(w for ws in words for w in ws)))

    def extended(
        self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray
    ) -> NoveltyIndex:
        """A new index holding these passages too (:meth:`with_added`'s rule, the same
        values), for ``ragshield add`` to store."""
        values, words, new = self._judge(ids, texts, vectors)
        x = np.vstack([self.x, new]) if len(self.ids) else new
        out = NoveltyIndex.restore([*self.ids, *ids], [*self._texts, *texts], x,
                                   np.vstack([self.values_, values]), **self.params)  # fmt: skip
        out._words = [*self.words, *words]
        return out

    def _judge(
        self, ids: Sequence[str], texts: Sequence[str], vectors: np.ndarray
    ) -> tuple[np.ndarray, list[frozenset[str]], np.ndarray]:
        """The rows of passages added to the index, ``(n_added, 4)`` as :attr:`values_`,
        with their words and unit vectors. Each is judged against its :attr:`neighbours`
        nearest of the index and the other added passages (:func:`nearest` among each, the
        best of both), word counts over both; the index's own rows are read, not copied."""
        new = l2_normalize(np.asarray(vectors, dtype=np.float32))
        if not (len(ids) == len(texts) == new.shape[0]):
            raise InputError(
                f"novelty needs one id and text per vector ({len(ids)}, {len(texts)}, "
                f"{new.shape[0]})"
            )
        n, m = len(self.ids), new.shape[0]
        added = [_words(t) for t in texts]
        words = _Joined(self.words, added)
        base_df, add_df = self._counts(), Counter(w for ws in added for w in ws)
        bar = max(2.0, self.rare_share * (n + m))

        def rare(ws: frozenset[str]) -> frozenset[str]:
            return frozenset(w for w in ws if base_df[w] + add_df[w] <= bar)

        k = min(self.neighbours, n + m - 1)
        in_base = nearest(new, min(k, n), self.x)
        in_added = knn(new, k)
        sims = np.hstack([in_base[0], in_added[0]])
        rows = np.hstack([in_base[1], np.where(in_added[1] >= 0, in_added[1] + n, -1)])
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        sims, rows = np.take_along_axis(sims, order, axis=1), np.take_along_axis(rows, order, 1)
        rares = [rare(ws) for ws in added]
        support = [
            [j for j, s in zip(rows[i].tolist(), sims[i].tolist(), strict=True)
             if j >= 0 and _lends(added[i], words[j], rare(words[j]), s, self.bars)]
            for i in range(m)
        ]  # fmt: skip
        first = [_share(rares[i], words, support[i]) for i in range(m)]
        out = []
        for i in range(m):
            sources = [j for j in support[i]
                       if (first[j - n] if j >= n else self.first[j]) >= self.source_share]  # fmt: skip
            base = [j for j in support[i] if j < n]  # siblings: the index's own passages
            out.append((round(_share(rares[i], words, sources), 4), len(rares[i]), first[i],
                        _siblings(words, n + i, base, self.sibling_words)))  # fmt: skip
        return np.asarray(out, np.float32).reshape(-1, 4), added, new


class _Joined(Sequence[frozenset[str]]):
    """The index's words followed by the added passages', read in place (no copy)."""

    def __init__(self, base: Sequence[frozenset[str]], added: Sequence[frozenset[str]]) -> None:
        self.base, self.added = base, added

    def __len__(self) -> int:
        return len(self.base) + len(self.added)

    def __getitem__(self, j: int) -> frozenset[str]:  # type: ignore[override]
        n = len(self.base)
        return self.base[j] if j < n else self.added[j - n]


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


def _siblings(words: Sequence[frozenset[str]], i: int, support: Sequence[int], bar: float) -> int:
    """How many of ``support`` share at least ``bar`` of passage ``i``'s words (Jaccard)."""
    a = words[i]
    return sum(1 for j in support if a and len(a & words[j]) / len(a | words[j]) >= bar)


def _share(rare: frozenset[str], words: Sequence[frozenset[str]], sources: Sequence[int]) -> float:
    """Share of ``rare`` no passage of ``sources`` uses (1.0 for no rare word)."""
    if not rare:
        return 1.0
    seen: set[str] = set()
    for j in sources:
        seen |= words[j]
    return len(rare - seen) / len(rare)


# ---- stored beside the vectors -------------------------------------------------------------


def write_novelty(folder: Path, novelty: NoveltyIndex) -> dict[str, Any]:
    """Write :data:`NOVELTY_FILE` into the (temporary) index folder; returns the
    ``meta.json`` entry that records it."""
    np.save(folder / NOVELTY_FILE, novelty.values_.astype(np.float32))
    return {"file": NOVELTY_FILE, "format_version": FORMAT_VERSION, "count": len(novelty),
            **novelty.params}  # fmt: skip


def read_novelty(
    folder: Path, meta: Mapping[str, Any], ids: Sequence[str], texts: Sequence[str],
    vectors: np.ndarray,
) -> NoveltyIndex | None:  # fmt: skip
    """The table an index folder stores, ``None`` when its ``meta.json`` records none (an
    index built before the table existed: the stage is off, :func:`use_index_novelty` says
    so). A recorded table that is missing, unreadable or of another length is a damaged
    index (one line naming the file)."""
    entry = meta.get("novelty")
    if not isinstance(entry, Mapping):
        return None
    file = folder / NOVELTY_FILE
    rebuild = "rebuild the index with 'ragshield index CORPUS --out DIR'"
    try:
        values = np.load(file, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise DataFormatError(file, None, f"unreadable novelty table ({exc}); {rebuild}") from None
    if values.ndim != 2 or values.shape != (len(ids), 4):
        raise DataFormatError(
            file, None, f"holds {values.shape} values for {len(ids)} passages; {rebuild}"
        )
    params = {k: entry[k] for k in ("neighbours", "rare_share", "copy_cosine", "copy_words",
                                    "source_share", "derived_share", "sibling_words")
              if k in entry}  # fmt: skip
    from ragshield.defenses.canary_marks import strip_canaries  # stored chunks may carry one

    return NoveltyIndex.restore(ids, [strip_canaries(t) for t in texts], vectors, values, **params)


def use_index_novelty(
    defense: object, novelty: NoveltyIndex | Mapping[str, Novelty] | None, where: object = ""
) -> None:
    """Hand ``novelty``'s table (or a ready ``{id: Novelty}``) to every part of ``defense``
    that reads one (RAGDefender's ``use_novelty``). Without a table, the stage stays off and
    one log line per index says why."""
    takers = [p for p in getattr(defense, "filters", [defense]) if hasattr(p, "use_novelty")]
    if not takers:
        return
    if novelty is None and str(where) not in _WARNED:
        _WARNED.add(str(where))
        log.warning(
            "index %s has no novelty table (built before ragshield stored one, or not a FAISS "
            "index): RAGDefender's derivative stage is off; rebuild it with 'ragshield index "
            "CORPUS --out DIR' to switch it on", where or "(in memory)",
        )  # fmt: skip
    table = novelty.table if isinstance(novelty, NoveltyIndex) else novelty
    for part in takers:
        part.use_novelty(table)


def use_added_novelty(
    defenses: Iterable[object],
    table0: NoveltyIndex | None,
    ids: Sequence[str],
    texts: Sequence[str],
    vectors: np.ndarray,
    where: object = "",
) -> None:
    """Hand every defense the table of an index that got ``texts`` added: ``table0`` plus
    each added passage judged against the index as ``ragshield add`` judges it
    (:meth:`NoveltyIndex.with_added`, an overlay); ``table0`` None hands none (the stage
    off). The one step a planted copy (``eval.real_retrieval``) and the filter-aware
    oracle's call (``attacks.filter_aware``) share."""
    table = None if table0 is None else table0.with_added(list(ids), list(texts), vectors)
    for defense in defenses:
        if defense is not None:
            use_index_novelty(defense, table, where)
