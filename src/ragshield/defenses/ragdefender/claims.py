"""What retrieved passages *claim*, and how they resemble each other: the two evidence kinds
of ragshield's RAGDefender that do not depend on an attack's wording.

Example::

    from ragshield.defenses.ragdefender.claims import near_copy_conflicts, paraphrase_partners

    lex = trigram_cosine_matrix(texts)                       # character 3-gram cosine
    partners = paraphrase_partners(sim, lex, 0.9, 0.6)       # generated-kind density
    conflicts = near_copy_conflicts(texts, lex, 0.8, query)  # one-fact edits of a passage

Why two kinds of density: a real index holds *lexical* near-copies by nature (mirrors,
versions, boilerplate: HotpotQA's corpus reaches a nearest-neighbour cosine of 0.996), so
"too similar" is not evidence. What a generator produces is different: several passages
that say the same thing in different words — close in embedding space, far apart in
character 3-grams. :func:`paraphrase_partners` counts those. A lexical near-copy is
evidence only when the two copies *disagree* on a fact (arXiv 2604.00387: a genuine page
with one number changed, cosine 0.9997 with the original): :func:`near_copy_conflicts`
finds the words in which two near-copies differ and which side the rest of the retrieved
set supports.

Pure functions over texts and similarity matrices; unit-tested in
``tests/test_ragdefender_claims.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ragshield.defenses.ragdefender.evidence import content_words

_TOKEN = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"\d+")


def paraphrase_partners(
    sim: np.ndarray, lex: np.ndarray, semantic: float, lexical: float
) -> np.ndarray:
    """Per passage, how many other passages say nearly the same thing (embedding cosine
    >= ``semantic``) in different words (character 3-gram cosine < ``lexical``)."""
    close = (sim >= semantic) & (lex < lexical)
    np.fill_diagonal(close, False)
    return close.sum(axis=1)


def number_conflicts(texts: Sequence[str], query: str) -> np.ndarray:
    """Pairs of passages that each state a number the other does not (the question's own
    numbers aside): they disagree on a fact, so they are no paraphrase of one claim.

    Why: the pages of a series (seasons, editions, honours lists) are written from one
    template, so they sit as close in embedding space as generated paraphrases do, but each
    carries its own years, scores and counts (HotpotQA test: a question about the 2011-12
    VCU Rams season retrieves eight season pages, all "paraphrases" of each other). Passages
    generated to push one answer repeat the same numbers, or none (HotpotQA dev: 7 of
    ~2,700 planted paraphrase pairs differ both ways)."""
    q = set(_NUMBER.findall(query))
    nums = [set(_NUMBER.findall(t)) - q for t in texts]
    n = len(texts)
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1, n):
            out[i, j] = out[j, i] = bool(nums[i] - nums[j]) and bool(nums[j] - nums[i])
    return out


@dataclass(frozen=True)
class Conflict:
    """Two lexical near-copies that differ in a few words: ``suspect`` is the copy whose own
    words the rest of the retrieved set supports less (the edited one), ``other`` the
    original; ``words`` are the suspect's differing words."""

    suspect: int
    other: int
    words: tuple[str, ...]
    support: tuple[int, int]  # (suspect's, other's) support among the rest


def near_copy_conflicts(
    texts: Sequence[str],
    lex: np.ndarray,
    lexical: float,
    query: str,
    max_diff: int = 6,
    witnesses: np.ndarray | None = None,
) -> list[Conflict]:
    """Pairs of passages sharing >= ``lexical`` of their character 3-grams (near-copies)
    that differ in 1..``max_diff`` content words outside the question: an edit of a fact.

    Which copy was edited: the one whose differing words fewer of the *other* retrieved
    passages contain (an attacker's answer has no support in the genuine text around it; the
    right one often has). On a tie the copy that adds more words is the suspect (an edit
    that inserts a claim sentence), then the later one in the list. Identical texts and
    copies differing only in stop words or the question's own words are not conflicts.
    ``witnesses`` (a boolean mask) limits who counts as support, e.g. to the passages not
    already found adversarial: an attacker who spreads his answer over planted passages
    must not make the genuine copy look unsupported.
    """
    n = len(texts)
    out: list[Conflict] = []
    ii, jj = np.nonzero(np.triu(lex >= lexical, k=1))
    if ii.size == 0:
        return out
    q = content_words(query)
    words = [content_words(t) - q for t in texts]
    for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
        a, b = words[i] - words[j], words[j] - words[i]
        if not a and not b:
            continue
        if len(a) + len(b) > 2 * max_diff:
            continue
        rest = [
            words[k] for k in range(n)
            if k not in (i, j) and (witnesses is None or witnesses[k])
            and lex[k, i] < lexical and lex[k, j] < lexical  # another copy is no witness
        ]  # fmt: skip
        sa = sum(bool(a & w) for w in rest)
        sb = sum(bool(b & w) for w in rest)
        if (sa, -len(a)) < (sb, -len(b)) or ((sa, len(a)) == (sb, len(b)) and i > j):
            out.append(Conflict(i, j, tuple(sorted(a)), (sa, sb)))
        else:
            out.append(Conflict(j, i, tuple(sorted(b)), (sb, sa)))
    return out


def agreeing(group: Sequence[int], disagree: np.ndarray) -> list[int]:
    """The members of ``group`` left once the one that disagrees with most others is
    dropped, again and again, until none disagree (a greedy largest agreeing subset: one
    passage that conflicts with every other does not break up a group that agrees)."""
    g = list(group)
    while len(g) > 1:
        counts = disagree[np.ix_(g, g)].sum(axis=1)
        if not counts.any():
            break
        g.pop(int(np.argmax(counts)))
    return g


@dataclass(frozen=True)
class Consensus:
    """Passages that agree on words nothing else retrieved says: ``members`` (indices) and
    the ``words`` they share beyond the question."""

    members: tuple[int, ...]
    words: tuple[str, ...]


def claim_words(
    query: str, texts: Sequence[str], vocabulary: frozenset[str] = frozenset()
) -> list[frozenset[str]]:
    """Per text, the words that can carry a claim: content words outside the question and
    the index's common ``vocabulary``; a lone letter (the "s" of "Brumfeld's") is none."""
    q = content_words(query)
    return [frozenset(w for w in content_words(t) - q - vocabulary if len(w) > 1 or w.isdigit())
            for t in texts]  # fmt: skip


def unsupported_consensus(
    query: str,
    texts: Sequence[str],
    echo: np.ndarray,
    echo_bar: float,
    min_group: int,
    lex: np.ndarray,
    lexical: float,
    vocabulary: frozenset[str] = frozenset(),
    disagree: np.ndarray | None = None,
    words: Sequence[frozenset[str]] | None = None,
    candidates: np.ndarray | None = None,
    witnesses: np.ndarray | None = None,
    alike: Callable[[Sequence[int]], bool] | None = None,
) -> Consensus:
    """Passages written *about the question* (question echo >= ``echo_bar``) that push the
    same claim the rest of the retrieved set does not make: a content word outside the
    question that at least ``min_group`` distinct such passages use (lexical near-copies at
    >= ``lexical`` 3-gram cosine count once: mirrors of one page are one witness) and no
    other retrieved passage contains. Why: an attacker needs several passages near the
    question to hold the context, and they must all carry his answer; the genuine passages
    around a question name its answer among other things, and the passages that do not
    answer it closely still mention the entities it is about. No wording is assumed: the
    question may be restated, reworded or absent.

    ``vocabulary``: the index's common words (``IndexProfile.common_words``), which are no
    claim: passages of one template share them (ChatDoctor's answers: *based*, *confirm*).

    ``disagree`` (pairs of passages, e.g. :func:`number_conflicts`): a passage that
    disagrees with another of the group on a fact is not part of its consensus. The
    templated pages of a series share their template's words, which the one page about the
    question's subject may lack, but each states its own years and scores (HotpotQA test:
    seven season pages "agreed" on *atlantic*, *championship*, *defeated*).

    ``words``: :func:`claim_words` of ``texts``, when the caller runs several rules over
    one retrieved set (the group and the pair rule) and has them already.

    ``candidates`` / ``witnesses`` (boolean masks, default every passage): who may be in a
    group, and whose use of a word counts as the rest of the evidence saying it — e.g.
    passages added after the index was built, vouched for only by passages it was built
    with (provenance as scrutiny).

    ``alike`` (a test of one word's group, e.g. its members' mean pairwise cosine): a group
    that fails it is no consensus. Judged per word, not over the union of the groups, so
    passages added beside a group on some other word cannot dilute it."""
    close = echo >= echo_bar
    hi: list[int] = np.flatnonzero(close if candidates is None else close & candidates).tolist()
    if len(hi) < min_group:
        return Consensus((), ())
    if words is None:
        words = claim_words(query, texts, vocabulary)
    members: set[int] = set()
    pushed: list[str] = []
    for w in sorted(set().union(*(words[i] for i in hi))):
        group = [i for i in hi if w in words[i]]
        if disagree is not None:
            group = agreeing(group, disagree)
        if len(group) < min_group:
            continue
        distinct: list[int] = []
        for i in group:
            if all(lex[i, j] < lexical for j in distinct):
                distinct.append(i)
        if len(distinct) < min_group:
            continue
        if any(w in words[k] for k in range(len(texts))
               if k not in group and (witnesses is None or witnesses[k])):  # fmt: skip
            continue  # the rest of the retrieved evidence says it too
        if alike is not None and not alike(group):
            continue
        members.update(group)
        pushed.append(w)
    return Consensus(tuple(sorted(members)), tuple(pushed))


def lone_claims(
    words: Sequence[frozenset[str]],
    candidates: np.ndarray,
    lex: np.ndarray,
    lexical: float,
    witnesses: np.ndarray | None = None,
) -> dict[int, tuple[str, ...]]:
    """Per candidate passage (``candidates``, a boolean mask): its claim words
    (``words``: :func:`claim_words` of every passage) that no witness uses; candidates
    with none are left out. ``witnesses`` (a boolean mask, default every other passage)
    names who can support a claim: an attacker who plants several passages near the
    question must not make them vouch for each other. A lexical near-copy (3-gram cosine
    >= ``lexical``) is no witness either: a mirror of a page repeats its claim."""
    out: dict[int, tuple[str, ...]] = {}
    for i in np.flatnonzero(candidates).tolist():
        claim = set(words[i])
        for k in range(len(words)):
            if k != i and lex[i, k] < lexical and (witnesses is None or witnesses[k]):
                claim -= words[k]
        if claim:
            out[i] = tuple(sorted(claim))
    return out


def union_consensus(found: Sequence[Consensus]) -> Consensus:
    """Every member and pushed word of several :func:`unsupported_consensus` results (the
    group rule and the pair rule of RAGDefender's consensus stage), in order, once each."""
    members = sorted({i for c in found for i in c.members})
    words = list(dict.fromkeys(w for c in found for w in c.words))
    return Consensus(tuple(members), tuple(words))
