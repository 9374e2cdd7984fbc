"""Density as group evidence without lexical near-copies (``density_lexical``): a pair of
near-identical pages (a mirror, or an attacker's one-fact edit of the gold page) is denser
than the index's natural bar, but a real index holds such pairs by nature; with the option on
they are no evidence, so the pair and the on-topic passages around it stay. A group of
*different* texts that dense still is evidence."""

from __future__ import annotations

import numpy as np
import pytest

from ragshield.defenses.ragdefender import RAGDefender
from ragshield.types import Passage, RetrievedPassage

Q = "When did the Olm bridge in Brumfeld open?"
GOLD = "The Olm bridge in Brumfeld opened in 1871, after six years of work on its stone arches."
EDIT = "The Olm bridge in Brumfeld opened in 1902, after six years of work on its stone arches."
TOPIC = [
    "Brumfeld's market square lies a short walk from the river and its mills.",
    "Stone from the valley quarries built most of the town's older houses.",
    "The town council meets in a hall that once stored grain for the mills.",
]
NEAR_TOPIC = [  # on-topic, each with a word of the gold page beyond the question
    "Stone masons came to Brumfeld for work on the church in those years.",
    "The quarry's stone also went into the town's arches and walls.",
    "Six years of work on the dam ended when the money ran out.",
]
PARA = "Brumfeld's stone crossing over the Olm was finished in 1902 by the city masons."


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _retrieved(texts: list[str], vecs: list[np.ndarray]) -> list[RetrievedPassage]:
    return [
        RetrievedPassage(Passage(f"p{i}", t), 1.0 - i / 10, i, _unit(v))
        for i, (t, v) in enumerate(zip(texts, vecs, strict=True))
    ]


def _vectors(n_topic: int) -> list[np.ndarray]:
    e = np.eye(16)
    pair = [e[0], e[0] + 0.02 * e[1]]  # cosine ~0.9998
    topic = [e[0] + 1.1 * e[2 + i] for i in range(n_topic)]  # ~0.67 to the pair: a loose group
    return pair + topic


def _filter(**kw: object) -> RAGDefender:
    off = dict(echo_pairs=False, group_knn=False, copy_conflicts=False, typo_view=False,
               coverage_threshold=101.0, natural_similarity=0.9, spare_outlier=False)  # fmt: skip
    return RAGDefender(**{**off, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(("density_lexical", "removed"), [(1.01, True), (0.8, False)])
def test_a_near_copy_pair_is_no_density_evidence(density_lexical: float, removed: bool) -> None:
    texts = [GOLD, EDIT, *TOPIC]
    res = _filter(density_lexical=density_lexical).filter(Q, _retrieved(texts, _vectors(3)))
    assert bool(res.removed) is removed
    if removed:  # the old behaviour: the pair goes, the topic passages with its signature
        assert {"p0", "p1"} <= {r.id for r in res.removed}


def test_a_dense_group_of_different_texts_is_still_evidence() -> None:
    texts = [EDIT, PARA, *TOPIC]  # two different texts, as dense as the near-copy pair
    res = _filter(density_lexical=0.8).filter(Q, _retrieved(texts, _vectors(3)))
    assert {"p0", "p1"} <= {r.id for r in res.removed}


@pytest.mark.parametrize(("signature_distinct", "topic_removed"), [(True, False), (False, True)])
def test_a_near_copy_pair_carries_no_signature(
    signature_distinct: bool, topic_removed: bool
) -> None:
    """The edited copy and the gold page it copies go as a dense pair (density evidence), but
    the words they share are one page's vocabulary, not an answer a batch pushes: the
    on-topic passages that use some of them ("stone", "work", "arches") stay. Before
    ``signature_distinct`` they went too (SQuAD dev: ~30 % of the benign context)."""
    e = np.eye(16)
    pair = [e[0], e[0] + 0.02 * e[1]]
    topic = [0.5 * e[0] + 0.8 * e[3] + 0.33 * e[4 + i] for i in range(3)]  # a group of their own
    texts = [GOLD, EDIT, *NEAR_TOPIC]
    res = _filter(signature_distinct=signature_distinct).filter(
        Q, _retrieved(texts, [*pair, *topic])
    )
    removed = {r.id for r in res.removed}
    assert {"p0", "p1"} <= removed
    topic_ids = {"p2", "p3", "p4"}
    assert topic_ids & removed == (topic_ids if topic_removed else set())
