"""The index profile: how similar a passage's nearest neighbours naturally are.

Example::

    from ragshield.store.profile import profile_vectors
    from ragshield.defenses.calibration import calibrate

    profile = profile_vectors(store.vectors)          # once, when the index is built
    calibrate(chain, profile)                         # RAGDefender reads natural_similarity

It lives on the store floor because it is a statistic of the stored vectors, written into
``meta.json`` beside them; the defenses read it (``defenses/calibration.calibrate``) and
never the other way round.

Why: a retrieval-time defense that judges "too similar to be natural" needs to know what
natural is *for this index and this encoder*. Paragraphs of one Wikipedia article under
MiniLM have a median nearest-neighbour cosine of 0.69 and a 99.9th percentile of 0.90;
HotpotQA's corpus (which holds near-duplicate paragraphs) reaches 0.996. A fixed threshold
is wrong for one of them. The profile is computed from the corpus a user indexes (before an
attacker plants anything later) and kept in the index metadata (``meta.json`` →
``profile``), so every pipeline that opens the index calibrates the same way.

The same pass records the *group* statistic (``group_similarity``): the p99.9 of each
passage's 2nd, 3rd and 4th nearest-neighbour cosine. Planted passages come as a group of
several mutually similar texts; natural near-duplicates (mirrors, versions) mostly come as
pairs, so the 1-NN bar is broken by them (HotpotQA 0.996) while the m-th-NN bar is not as
much (HotpotQA 2nd/3rd/4th: 0.968 / 0.954 / 0.944; SQuAD: 0.843 / 0.819 / 0.807).

It also records ``question_share``: the share of passages that hold a question (a sentence
ending in "?"). A passage restating the user's question is PoisonedRAG's retrieval trick in
an encyclopedia (SQuAD and HotpotQA: 0.010 / 0.011 of passages hold a question) and the
normal shape of an FAQ, support or Q&A knowledge base (ChatDoctor: 0.72, every chunk a
patient's question and a doctor's answer), where it is the gold entry itself.

And ``common_words``: the words at least one passage in a hundred uses (:data:`COMMON_SHARE`),
the corpus's own vocabulary. Several passages agreeing on a word the rest of the retrieved
set lacks is a planted answer when the word is rare in the index, and a template when it is
common: ChatDoctor's doctors all write "based on", "confirm", "diagnosis", so three answers
about one symptom share words the other retrieved chunks lack.

And ``neighbourhood_similarity``: the median cosine of each passage's 9th nearest neighbour,
the edge of a top-10 neighbourhood. It says how tight a retrieved set of ten is *by nature*
in this index: HotpotQA 0.295, SQuAD 0.532, ChatDoctor 0.613 (patients ask alike, doctors
answer from one template). RAGDefender's group and paraphrase bars were chosen on the two
encyclopedias; on an index whose neighbourhoods are tighter than its loose-group bar, every
retrieved set is a "group" and one piece of evidence took a whole neighbourhood with it
(``GroupingParams.neighbourhood_bars``).

Caveat (documented, not hidden): a corpus that is *already* heavily poisoned when it is
indexed raises its own natural level; ragshield's other evidence (a restated question, typo
copies, the answer signature) does not depend on it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ragshield.embed.base import l2_normalize
from ragshield.errors import InputError
from ragshield.store.neighbours import knn

QUANTILES = (0.5, 0.9, 0.99, 0.999)
NATURAL_QUANTILE = 0.999  # the densest 0.1 % of natural neighbourhoods still pass
# an index where at least one passage in ten holds a question is a Q&A corpus (SQuAD /
# HotpotQA 0.010 / 0.011, ChatDoctor 0.72: module docstring); the defenses then read a
# passage restating the question as normal, not as PoisonedRAG's retrieval trick
QA_SHARE = 0.1
COMMON_SHARE = 0.01  # a word in >= 1 % of passages is the corpus's vocabulary, not a claim
COMMON_LIMIT = 5000  # most frequent words kept (meta.json stays small)
GROUP_MIN_SAMPLE = 200  # below this, the group bar is just above the largest m-th-NN cosine
# the 9th neighbour is the edge of a top-10 neighbourhood (k = 10, the retrieval default)
NEIGHBOURHOOD_RANK = 9
GROUP_RANKS: tuple[int, ...] = (
    2,
    3,
    4,
)  # m-th neighbours of the group statistic (groups of 3, 4, 5)


@dataclass(frozen=True)
class IndexProfile:
    """Nearest-neighbour cosine statistics of an index's passages, and the passage ids the
    operator vouched for when building it (``ragshield index --trusted-ids FILE``)."""

    n: int
    sampled: int
    quantiles: dict[str, float]
    natural_similarity: float
    trusted_ids: tuple[str, ...] = ()
    #: p99.9 of the m-th nearest-neighbour cosine for m in ``GROUP_RANKS`` (``()`` for an
    #: index profiled before this field existed: the filter then uses its defaults).
    group_similarity: tuple[float, ...] = ()
    #: share of passages holding a question sentence (module docstring; ``None`` for an
    #: index profiled before this field existed, or from vectors alone).
    question_share: float | None = None
    #: words used by >= COMMON_SHARE of the passages (``()`` when not recorded).
    common_words: tuple[str, ...] = ()
    #: median cosine of the :data:`NEIGHBOURHOOD_RANK`-th nearest neighbour (module
    #: docstring; ``None`` for an index profiled before this field existed, or too small).
    neighbourhood_similarity: float | None = None

    @property
    def qa_corpus(self) -> bool | None:
        """Whether the index's passages hold questions (an FAQ / Q&A corpus); ``None``
        when not recorded."""
        return None if self.question_share is None else self.question_share >= QA_SHARE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IndexProfile:
        try:
            return cls(
                n=int(data["n"]),
                sampled=int(data["sampled"]),
                quantiles={str(k): float(v) for k, v in dict(data["quantiles"]).items()},
                natural_similarity=float(data["natural_similarity"]),
                trusted_ids=_str_tuple(data.get("trusted_ids", ())),
                group_similarity=tuple(float(v) for v in data.get("group_similarity", ())),
                question_share=_optional_float(data.get("question_share")),
                common_words=_str_tuple(data.get("common_words", ())),
                neighbourhood_similarity=_optional_float(data.get("neighbourhood_similarity")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"unreadable index profile ({exc}); rebuild the index") from exc


def _str_tuple(value: object) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError("trusted_ids must be a list of strings")
    return tuple(value)


def profile_vectors(
    vectors: np.ndarray, *, sample: int = 5000, seed: int = 0, block: int = 1024
) -> IndexProfile | None:
    """1-NN (and 2nd-4th-NN, 9th-NN) cosine of (a seeded sample of) the passages against the
    whole index (exact: :func:`~ragshield.store.neighbours.knn`, ``block`` queries a call). ``None`` for fewer than 3
    passages; the group statistic needs more than ``max(GROUP_RANKS)`` passages, the
    neighbourhood statistic more than :data:`NEIGHBOURHOOD_RANK`."""
    x = l2_normalize(np.asarray(vectors, dtype=np.float32))
    n = x.shape[0]
    if n < 3:
        return None
    rows = np.arange(n)
    if n > sample:
        rows = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    deepest = max(*GROUP_RANKS, NEIGHBOURHOOD_RANK)
    ranks = deepest if n > deepest else max(GROUP_RANKS) if n > max(GROUP_RANKS) else 1
    sims, _ = knn(x, ranks, rows=rows, block=block)  # the same search as the novelty table's
    nn = sims.astype(np.float64)
    qs = {f"p{q * 100:g}": float(np.quantile(nn[:, 0], q)) for q in QUANTILES}
    natural = float(np.clip(np.quantile(nn[:, 0], NATURAL_QUANTILE), -1.0, 1.0))
    group: tuple[float, ...] = ()
    if ranks > 1:
        group = tuple(_group_bar(nn[:, m - 1]) for m in GROUP_RANKS)
    neighbourhood = None
    if ranks >= NEIGHBOURHOOD_RANK:
        neighbourhood = round(float(np.median(nn[:, NEIGHBOURHOOD_RANK - 1])), 4)
    return IndexProfile(
        n=n,
        sampled=int(rows.size),
        quantiles=qs,
        natural_similarity=natural,
        group_similarity=group,
        neighbourhood_similarity=neighbourhood,
    )


_QUESTION = re.compile(r"\?(?:\s|$|[\"')\]])")


def question_share(texts: Sequence[str]) -> float | None:
    """Share of ``texts`` holding a question (a "?" that ends a sentence); ``None`` for none."""
    if not texts:
        return None
    return round(sum(bool(_QUESTION.search(t)) for t in texts) / len(texts), 4)


_WORD = re.compile(r"[a-z0-9]+")


def common_words(texts: Sequence[str]) -> tuple[str, ...]:
    """Lower-cased words (``[a-z0-9]+``, the claim rule's tokens) used by at least
    :data:`COMMON_SHARE` of ``texts``, most frequent first, at most :data:`COMMON_LIMIT`."""
    if not texts:
        return ()
    df: Counter[str] = Counter()
    for t in texts:
        df.update(set(_WORD.findall(t.lower())))
    bar = COMMON_SHARE * len(texts)
    return tuple(w for w, c in df.most_common(COMMON_LIMIT) if c >= bar)


def text_statistics(texts: Sequence[str]) -> dict[str, Any]:
    """The profile's fields read from the passages' text (the rest are from vectors)."""
    return {"question_share": question_share(texts), "common_words": common_words(texts)}


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _group_bar(values: np.ndarray) -> float:
    """The p99.9 of one m-th-NN column, rounded *up* (a rounded-down bar would flag the
    passage that sets it). With fewer than ``GROUP_MIN_SAMPLE`` passages the tail cannot be
    estimated (the quantile is an interpolation towards the largest value, which the
    passage holding it then reaches): the bar is just above the largest value, which no
    natural passage of the index can reach among its retrieved neighbours."""
    if values.size < GROUP_MIN_SAMPLE:
        bar = float(values.max()) + 1e-4
    else:
        bar = float(np.quantile(values, NATURAL_QUANTILE))
    return float(np.clip(np.ceil(bar * 1e4) / 1e4, -1.0, 1.0))
