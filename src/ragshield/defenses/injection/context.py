"""A sentence's relation to its passage (how much less on-topic it is than its neighbours)
and to the question (does it restate it, word for word or in other words, and where?).

Example::

    from ragshield.defenses.injection.context import offtopic

    off = offtopic(unit_sentence_vectors)   # one value per sentence, >= 0

Why (issue #23, "signals, not signatures"): an instruction planted in a genuine paragraph
addresses the reader and is off-topic for the paragraph, while the paragraph's own
sentences are on-topic for each other — and so are the sentences of a security article
*about* injections, which is where a classifier of single sentences raises false alarms.
So the signal is relative: each sentence's cosine to the centroid of the passage's other
sentences (its *coherence*) against the median coherence of those other sentences; a
sentence that fits its passage as well as the others do scores 0. It needs at least three
sentences (with two, each is the other's only neighbour and both have the same
coherence). The detector combines ``head.offtopic_boost`` times this with a sentence's
score as a noisy-OR (:func:`ragshield.defenses.injection.scoring.pair_scores`) before the
threshold; calibration on the index's own passages applies the same, so the index keeps
its calibrated flag rate. :class:`Removal` holds the guard's parameters for the question
side: what a flag removes, and the bars at which a passage restates the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote_plus

import numpy as np
from rapidfuzz.distance import OSA
from rapidfuzz.process import cdist
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

__all__ = [
    "SCOPES", "Removal", "Scope", "coherence", "echo", "offtopic", "restates", "restating_span",
    "without_span",
]  # fmt: skip

Scope = Literal["sentence", "passage", "restated"]
SCOPES: tuple[str, ...] = ("sentence", "passage", "restated")


@dataclass(frozen=True)
class Removal:
    """What a flag removes, and when a passage counts as restating the question (the
    ``InjectionGuard`` parameters of the same names; the guard documents each).

    scope: the flagged ``"sentence"``, its whole ``"passage"``, or ``"restated"``: the
        whole passage when it restates the question (verbatim, :func:`restates`, or edited:
        the three bars below), else the sentence.
    restated_coverage, restated_echo: with ``"restated"``, the question's letter-level
        coverage and the sentence echo at which a flagged passage restates it (``None``:
        not read); restated_span: the share of the question's content words one stretch
        must restate for the passage to be read again with it cut off (:func:`restating_span`).

    Why one group: the three bars are read only under ``scope="restated"``, and all four
    decide one thing, how much of a passage a flag takes with it.
    """

    # a hijacked page keeps its facts; a passage restating the question goes whole once
    # flagged (dev, bench_injection_dev_checks.py --section prefixed: held-out prefixed
    # 0.942 -> 0.979, split 0.820 -> 0.951, other placements unchanged)
    scope: Scope = "restated"
    # an edited prefix keeps most of the question's letters in order (RAGDefender's
    # coverage bar: no benign dev top-10 passage reaches 85; dev: --section reworded)
    restated_coverage: float | None = 85.0
    restated_echo: float | None = None  # gold pages echo the question too (p95 0.83)
    # dev (--section reworded): reworded prefixed 0.742 -> 0.916, split 0.878 -> 0.978 at
    # 0.5-0.7 alike; 0.7 finds a stretch in fewest genuine top-10 passages (2 %) and
    # removes no more benign sentences than coverage alone (97 of 5,113)
    restated_span: float | None = 0.7


def coherence(vectors: np.ndarray) -> np.ndarray:
    """Per row of ``vectors`` (unit vectors of one passage's sentences): the cosine to the
    normalised sum of the other rows (1.0 for a passage of one sentence)."""
    v = np.asarray(vectors, dtype=np.float64)
    n = len(v)
    if n < 2:
        return np.ones(n, dtype=np.float64)
    rest = v.sum(axis=0, keepdims=True) - v
    norms = np.linalg.norm(rest, axis=1)
    norms[norms == 0] = 1.0
    out: np.ndarray = np.einsum("ij,ij->i", v, rest) / norms
    return out


def offtopic(vectors: np.ndarray) -> np.ndarray:
    """Per sentence: ``max(0, median coherence of the other sentences - its own)``; zeros
    for passages of fewer than three sentences."""
    n = len(vectors)
    if n < 3:
        return np.zeros(n, dtype=np.float64)
    coh = coherence(vectors)
    others = np.array([np.median(np.delete(coh, i)) for i in range(n)])
    out: np.ndarray = np.maximum(0.0, others - coh)
    return out


_WORD = re.compile(r"\w+")


def restates(sentences: Sequence[str], query: str, min_words: int = 3) -> np.ndarray:
    """Mask of sentences that contain the question's words verbatim, in order (case and
    punctuation ignored): what PoisonedRAG-style attacks write so their passage is
    retrieved ("<question>. <payload>"), inside a sentence or as one, or URL-encoded in a
    link (``?q=Which+group+...``, exfiltration). Questions shorter
    than ``min_words`` words never match (too common to mean anything).
    """
    q = " ".join(_WORD.findall(query.lower()))
    out = np.zeros(len(sentences), dtype=bool)
    if len(q.split()) < min_words:
        return out
    for i, s in enumerate(sentences):
        out[i] = f" {q} " in f" {' '.join(_WORD.findall(unquote_plus(s).lower()))} "
    return out


def echo(question_vector: np.ndarray, sentence_vectors: np.ndarray) -> float:
    """The highest cosine between the question and any sentence of a passage (unit vectors;
    ``-1.0`` for a passage without sentences).

    Why beside :func:`restates`: an attacker who has read the verbatim test rewords the
    question his passage carries (words dropped or replaced, reordered, a statement), which
    keeps it retrieved *because* it stays close to the question in embedding space — the
    closeness this measures (RAGDefender's ``echo`` stage reads the same: 0.84-1.00 for every
    prefix rewrite on the HotpotQA dev split, p95 0.73 for benign passages).
    """
    v = np.asarray(sentence_vectors, dtype=np.float64)
    if not len(v):
        return -1.0
    return float(np.max(v @ np.asarray(question_vector, dtype=np.float64)))


_TOKEN = re.compile(r"[^\W_]+")
_MIN_CONTENT = 3
# a rewrite's leading words the question lacks ("Which", "Regarding", "The person"); dev
# (--section reworded, stop 38 second round): reworded prefixed 0.916 -> 0.951, benign cost same
_LEAD = 3


def _matches(tokens: Sequence[str], question: Sequence[str]) -> np.ndarray:
    """``(len(tokens), len(question))`` mask: the same word, or (both of 4+ letters) one
    edit apart (swap, drop, double, substitute: a typo, :func:`ragshield.attacks.rewrite.
    typos`'s shape). Each distinct word is compared once, in rapidfuzz's C loop."""
    uniq = list(dict.fromkeys(tokens))
    at = {t: i for i, t in enumerate(uniq)}
    dist = cdist(uniq, list(question), scorer=OSA.distance, score_cutoff=1, workers=1)
    long_t = np.array([len(t) >= 4 for t in uniq], dtype=bool)
    long_q = np.array([len(q) >= 4 for q in question], dtype=bool)
    same = (dist == 0) | ((dist <= 1) & long_t[:, None] & long_q[None, :])
    out: np.ndarray = same[[at[t] for t in tokens]]
    return out


def restating_span(
    text: str, query: str, min_cover: float = 0.7, lead: int = _LEAD
) -> tuple[int, int] | None:
    """Character span ``(start, end)`` of ``text`` that restates the question in other words,
    or ``None``: the stretch of words that best aligns with the question's words (a word of
    the question, or one typo from it, counts +1; any other word -1; the best-scoring
    stretch, Kadane's maximum subarray) when it holds at least ``min_cover`` of the question's
    distinct content words (not sklearn's English stop words) and at least three of them
    (two content words, "Where does the Rhine flow?", are restated by any sentence on the
    topic).

    Why: an attacker who has read :func:`restates` rewords the question his passage
    carries (words dropped or replaced, reordered, a statement, typos:
    :mod:`ragshield.attacks.rewrite`), and without its question mark it runs into the
    instruction's first sentence ("The capital of Australia is Ignore ..."), whose vector
    the question's words then dilute. The alignment reads which words stand where, not a
    wording; :func:`without_span` cuts the stretch off so the instruction is scored alone.

    The stretch reaches back to the start of its sentence when at most ``lead`` words stand
    between (``0``: never): a rewrite leads with a word the question does not have
    ("Which is ..." for "What is ...", "Regarding ...", "The person who ..."), which the
    alignment leaves out and the cut would leave glued to the instruction.
    """
    q_words = _TOKEN.findall(query.lower())
    content = sorted({w for w in q_words if w not in ENGLISH_STOP_WORDS})
    if len(content) < _MIN_CONTENT:
        return None
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    if not tokens:
        return None
    q_all = sorted(set(q_words))
    hit = _matches(tokens, q_all)
    is_content = np.array([w in content for w in q_all], dtype=bool)
    if int(hit[:, is_content].any(axis=0).sum()) < max(_MIN_CONTENT, min_cover * len(content)):
        return None  # the whole text does not cover enough: no stretch of it can
    gain = np.where(hit.any(axis=1), 1.0, -1.0)
    best, best_at, run, start = 0.0, (0, -1), 0.0, 0
    for i, g in enumerate(gain):
        if run <= 0:
            run, start = 0.0, i
        run += g
        if run > best:
            best, best_at = run, (start, i)
    a, b = best_at
    if b < a:
        return None
    covered = hit[a : b + 1][:, is_content].any(axis=0)
    if int(covered.sum()) < max(_MIN_CONTENT, min_cover * len(content)):
        return None
    found = list(_TOKEN.finditer(text))  # the same tokens, with their places
    return found[_sentence_lead(text, found, a, lead)].start(), found[b].end()


def _sentence_lead(text: str, found: Sequence[re.Match[str]], a: int, lead: int) -> int:
    """Index of the token the stretch starting at token ``a`` should start at: the first of
    its sentence when at most ``lead`` tokens come before it there, else ``a``."""
    begins = max(text.rfind(c, 0, found[a].start()) for c in ".!?\n") + 1
    first = a
    while first > 0 and a - first <= lead and found[first - 1].start() >= begins:
        first -= 1
    return first if a - first <= lead else a


def without_span(text: str, span: tuple[int, int]) -> str:
    """``text`` with ``span`` cut out, and the punctuation the cut leaves at its edge (the
    comma or colon after a restated question)."""
    head, tail = text[: span[0]].rstrip(), text[span[1] :].lstrip(" ,;:-?.!")
    return f"{head} {tail}".strip()
