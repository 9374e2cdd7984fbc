"""Provenance as an extra layer: of two retrieved near-copies, the one the index held first
is the original (issue #28).

Example::

    from ragshield.defenses.ragdefender import RAGDefender

    f = RAGDefender(encoder=enc, provenance="restore")
    res = f.filter(question, retrieved)       # passages read from a managed index
    res.details["provenance"]                 # [{"original": 0, "copy": 3, "restored": True}]

Why: an attacker who edits a fact into a copy of a genuine page (the ``near-duplicate``
attack) plants a pair that nothing *retrieved* can order — the group and near-copy stages
then often remove both, and the victim page goes with its copy (SQuAD test: gold in the
context 0.540 against 0.857 clean). The index can order them: ``ragshield index`` builds
passages without an ``added_at``, and ``ragshield add`` stamps every passage it appends
with ``added_at`` (UTC, ISO 8601; :func:`ragshield.ingest.with_provenance` overwrites
whatever the record itself said). So a passage without ``added_at`` precedes every passage
with one, and two ``added_at`` compare as instants.

The rule only ever acts on a *pair of retrieved lexical near-copies* (character 3-gram
cosine at the shipped near-copy bar, ``group_lexical``) whose order is known — or on a later
passage that is an *excerpt* of an earlier one (at least :data:`CONTAINED` of its word
3-shingles stand in it, :func:`shingle_containment`). The excerpt test is the answer to
``excerpt-edit`` (:mod:`ragshield.attacks.excerpt_edit`), the attacker who read the cosine
bar and cut the copy under it (dev: ragdefender's reach on it 0.411 HotpotQA / 0.553 SQuAD
with the cosine test alone); containment does not fall with the share of the page kept.
An excerpt is judged only by what it adds (a quote that changes nothing stays):

* ``"restore"``: when the filter removed the earlier passage and a later near-copy of it
  was retrieved, the earlier one is kept and the later ones are removed ("added after the
  page it copies");
* ``"facts"``: that, and also a later near-copy *with a changed fact* (a few content words
  outside the question that the earlier passage lacks) of an earlier passage the filter
  kept is removed.

The same order settles two smaller questions for the other stages, on sentences rather
than whole passages (:func:`unquoted`, :func:`quoted_sources`): a sentence of a later
passage whose content words stand in an earlier retrieved one is a *quote* of it. Quotes do
not make an added passage long (the lone-claim stage's short test), and the page a later
passage quotes is not taken down by that passage's evidence (the paraphrase-pair and
dense-group stages keep it, and it links no group of the next level).

What it cannot do, by design: passages without provenance (no ``added_at`` on either side,
or equal instants, or an unreadable value) are left exactly as the other stages decided —
the filter must hold on passages that carry no metadata the corpus lacks. An attacker
cannot forge an earlier instant: ``add`` overwrites ``added_at``, and a record of the
original build that wrote its own ``added_at`` only makes itself *later*. The cost is
on genuine updates: a corrected version of a page added beside the old one is a later
near-copy and loses to it (``"restore"``: when the filter removed the old one;
``"facts"``: always, since an update changes facts). ``ragshield add`` refuses an id the
index already holds (and ragshield has no command that deletes an indexed page), so an
update cannot replace its page in place: rebuild the index with ``ragshield index`` (the
new version is then built in, with no ``added_at``, and the old one gone).
"""

from __future__ import annotations

import datetime as _dt
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ragshield.defenses.ragdefender.evidence import _TOKEN, content_words

Provenance = Literal["off", "restore", "facts"]

#: The order of a passage built with the index (no ``added_at``): before any added one.
BUILT = _dt.datetime.min.replace(tzinfo=_dt.UTC)


def added_at(metadata: Mapping[str, Any]) -> _dt.datetime | None:
    """When ``ragshield add`` added the passage (UTC), ``BUILT`` when it came with the
    index (no ``added_at``), ``None`` when the value is unreadable (no order at all)."""
    raw = metadata.get("added_at")
    if raw is None:
        return BUILT
    if not isinstance(raw, str):
        return None
    try:
        t = _dt.datetime.fromisoformat(raw)
    except ValueError:
        return None
    return t.replace(tzinfo=_dt.UTC) if t.tzinfo is None else t.astimezone(_dt.UTC)


#: A later passage at least this share of whose word 3-shingles stand in an earlier retrieved
#: page is copied *from* it (an excerpt), whatever the two passages' lengths. Dev (HotpotQA,
#: SQuAD): ``excerpt-edit`` median 0.71 / 0.92 (p5 0.34 / 0.76; the low ones are the
#: inserted claim sentence alone), while of the ordered pairs of genuine passages in a clean
#: top-10, 19 of 5,040 / 3 of 11,880 reach 0.5 (the corpora's own mirrors).
CONTAINED = 0.5


def _shingles(text: str, n: int = 3) -> frozenset[tuple[str, ...]]:
    w = _TOKEN.findall(text.lower())  # the tokens content_words reads
    return frozenset(tuple(w[i : i + n]) for i in range(len(w) - n + 1))


def _contained(part: frozenset[tuple[str, ...]], whole: frozenset[tuple[str, ...]]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def shingle_containment(part: str, whole: str, n: int = 3) -> float:
    """The share of ``part``'s word ``n``-shingles that stand in ``whole``: 1.0 for an
    excerpt, whatever its length — where the symmetric 3-gram cosine of an excerpt with
    its page falls with the share of the page it keeps (an attacker cuts under the bar)."""
    return _contained(_shingles(part, n), _shingles(whole, n))


#: A sentence whose content words stand in one earlier retrieved passage at this share or
#: more is quoted from it (word bags, so dropped or reordered words still count as quoted).
#: Dev, every sentence of >= 4 content words of a genuine retrieved passage against the
#: other genuine ones of its top-10: SQuAD 36 of 5,284 reach 0.8, HotpotQA 94 of 1,871 (its
#: mirrors); the gold-page sentences that pad ``meta-epistemic-long``: all.
QUOTED = 0.8
_QUOTE_MIN = 4  # content words a sentence needs before it can count as a quote
_DIGIT = re.compile(r"\d")


class _Quotes:
    """Which strictly earlier retrieved passages each sentence of a passage quotes (a
    sentence of >= :data:`_QUOTE_MIN` content words, ``quoted`` or more of them in that
    passage, and every number of it). Shared by :func:`unquoted` and
    :func:`quoted_sources`; content-word bags made once per passage."""

    def __init__(
        self, texts: Sequence[str], stamps: Sequence[_dt.datetime | None], quoted: float
    ) -> None:
        self.texts, self.stamps, self.quoted = texts, stamps, quoted
        self._bags: dict[int, frozenset[str]] = {}

    def bag(self, j: int) -> frozenset[str]:
        if j not in self._bags:
            self._bags[j] = content_words(self.texts[j])
        return self._bags[j]

    def earlier(self, i: int) -> list[int]:
        a = self.stamps[i]
        return [j for j, b in enumerate(self.stamps)
                if j != i and a is not None and b is not None and b < a]  # fmt: skip

    def sources(self, sentence: str, earlier: Sequence[int]) -> list[int]:
        """The passages of ``earlier`` that ``sentence`` quotes (a number it changes is its
        own fact)."""
        c = content_words(sentence)
        if len(c) < _QUOTE_MIN:
            return []
        return [j for j in earlier
                if len(c & self.bag(j)) >= self.quoted * len(c)
                and all(w in self.bag(j) for w in c if _DIGIT.search(w))]  # fmt: skip


def unquoted(
    texts: Sequence[str],
    stamps: Sequence[_dt.datetime | None],
    which: Iterable[int],
    quoted: float = QUOTED,
) -> dict[int, str]:
    """Per passage in ``which``, its sentences that quote no strictly earlier retrieved
    passage (a sentence of >= 4 content words, ``quoted`` or more of them in that
    passage), joined. Why: how much a passage says, as a signal that it was written for a
    question, must not grow with text the attacker copied from the pages around it — the
    padded note (``meta-epistemic-long``) is a short note plus the gold page's own
    sentences. A sentence that changes a number of the earlier passage is no quote: the
    pages of a series share their template sentences but not their numbers ("the 47th
    season" / "the 48th season"; HotpotQA's VCU Rams season pages, as in
    :func:`~.claims.number_conflicts`). Equal or unknown instants quote nothing (nothing
    says which came first)."""
    from ragshield.text import split_sentences

    q = _Quotes(texts, stamps, quoted)
    out: dict[int, str] = {}
    for i in which:
        earlier = q.earlier(i)
        out[i] = " ".join(s for s in split_sentences(texts[i]) if not q.sources(s, earlier))
    return out


def quoted_sources(
    texts: Sequence[str],
    stamps: Sequence[_dt.datetime | None],
    quoted: float = QUOTED,
) -> dict[int, frozenset[int]]:
    """``{earlier passage: the later retrieved passages that quote a sentence of it}``
    (:func:`unquoted`'s test), over the passages with a readable instant. Why: a planted
    note that copies a sentence of the gold page (for retrieval, or to look sourced) sits
    next to that page in embedding space, so the pair and group stages took the page down
    with the note (SQuAD, ``meta-epistemic-long``: the gold page removed as the note's
    paraphrase partner or fellow group member). The index orders them: the copy's evidence
    is the copy's, and the page it quotes was there first. Only added passages can quote
    (a built passage has no earlier one), so an index with none added gets ``{}``."""
    from ragshield.text import split_sentences

    q = _Quotes(texts, stamps, quoted)
    out: dict[int, set[int]] = {}
    for i, t in enumerate(stamps):
        if not is_later(t):
            continue
        earlier = q.earlier(i)
        if not earlier:
            continue
        for s in split_sentences(texts[i]):
            for j in q.sources(s, earlier):
                out.setdefault(j, set()).add(i)
    return {j: frozenset(v) for j, v in out.items()}


def is_later(stamp: _dt.datetime | None) -> bool:
    """A readable ``added_at`` (:func:`added_at`'s value): the passage came through
    ``ragshield add``, not with the index's build."""
    return stamp is not None and stamp != BUILT


#: The share of an index's passages that came through ``ragshield add`` above which the
#: scrutiny of added passages costs genuine additions. Clean, SQuAD test, gold kept with
#: 0 / 10 / 20 / 50 % added: 0.857 / 0.857 / 0.825 / 0.746 (no defense 0.865;
#: docs/results-adaptive-attacks.md, stop 41).
ADDED_SHARE_WARN = 0.1
_WARNED: set[str] = set()  # indexes already reported (one line each)
log = logging.getLogger(__name__)


def added_share(metadatas: Iterable[Mapping[str, Any]]) -> float:
    """The share of passages that came through ``ragshield add`` (:func:`entered_later`)."""
    flags = [entered_later(m) for m in metadatas]
    return sum(flags) / len(flags) if flags else 0.0


def warn_if_mostly_added(defense: object, passages: Sequence[Any] | None, where: object) -> None:
    """One log line per index when more than :data:`ADDED_SHARE_WARN` of ``passages`` came
    through ``ragshield add`` and a RAGDefender of ``defense`` scrutinises added passages.

    Why a warning and no switch: an index-level switch would be the attacker's to flip (add
    enough harmless passages and the scrutiny is off); the operator can rebuild instead
    (``ragshield index`` over the sources), after which every passage counts as built."""
    parts = [p for p in getattr(defense, "filters", [defense])
             if getattr(p, "scrutinises_added", False)]  # fmt: skip
    if not parts or not passages or str(where) in _WARNED:
        return
    share = added_share(getattr(p, "metadata", {}) or {} for p in passages)
    if share > ADDED_SHARE_WARN:
        _WARNED.add(str(where))
        log.warning(
            "%.0f %% of index %s came through 'ragshield add': RAGDefender scrutinises added "
            "passages (only passages the index was built with vouch for a claim), which costs "
            "genuine additions at this share; rebuild it from its sources ('ragshield index') "
            "to count them as built", 100 * share, where or "(in memory)",
        )  # fmt: skip


def entered_later(metadata: Mapping[str, Any]) -> bool:
    """The passage came through ``ragshield add`` (a readable ``added_at``), not with the
    index's build: what the lone-claim stage scrutinises harder (``lone_claim_added``)."""
    return is_later(added_at(metadata))


@dataclass(frozen=True)
class LaterCopy:
    """``copy`` is a retrieved near-copy (or, ``excerpt``, a copied excerpt) of
    ``original`` that entered the index after it."""

    original: int
    copy: int
    lexical: float
    excerpt: bool = False


def later_copies(
    stamps: Sequence[_dt.datetime | None],
    lex: np.ndarray,
    bar: float,
    texts: Sequence[str] | None = None,
    contained: float = CONTAINED,
) -> list[LaterCopy]:
    """Every ordered pair of near-copies (``lex`` >= ``bar``) with a strictly earlier
    ``original``; equal or unknown instants give no pair (nothing says which came first).
    With ``texts``, also a later passage whose word 3-shingles stand in an earlier one at
    ``contained`` or more (:func:`shingle_containment`: an excerpt of it)."""
    out: list[LaterCopy] = []
    n = len(stamps)
    shingles: dict[int, frozenset[tuple[str, ...]]] = {}  # each text's, made once

    def sh(i: int) -> frozenset[tuple[str, ...]]:
        if i not in shingles:
            shingles[i] = _shingles(texts[i]) if texts is not None else frozenset()
        return shingles[i]

    for i in range(n):
        for j in range(i + 1, n):
            a, b = stamps[i], stamps[j]
            if a is None or b is None or a == b:
                continue
            first, later = (i, j) if a < b else (j, i)
            if lex[i, j] >= bar:
                out.append(LaterCopy(first, later, float(lex[i, j])))
            elif texts is not None and _contained(sh(later), sh(first)) >= contained:
                out.append(LaterCopy(first, later, float(lex[i, j]), excerpt=True))
    return out


def changes_a_fact(
    original: str, copy: str, query: str, max_diff: int, *, excerpt: bool = False
) -> bool:
    """``copy`` states content words (outside the question) that ``original`` lacks, and
    the two differ in at most ``max_diff`` such words each way: an edited fact, not a
    longer version of the page. An ``excerpt`` drops what it likes: only what it adds
    counts."""
    q = content_words(query)
    a, b = content_words(original) - q, content_words(copy) - q
    added, dropped = b - a, a - b
    return bool(added) and len(added) <= max_diff and (excerpt or len(dropped) <= max_diff)


def spare_originals(
    mode: Provenance,
    query: str,
    texts: Sequence[str],
    stamps: Sequence[_dt.datetime | None],
    lex: np.ndarray,
    bar: float,
    removed: np.ndarray,
    max_diff: int,
) -> tuple[list[int], dict[int, str], list[dict[str, Any]]]:
    """What the rule changes: (originals to keep again, copies to remove with their
    reason, the details rows). ``stamps``: each passage's :func:`added_at`; ``removed`` is
    the other stages' decision (not modified)."""
    if mode == "off" or len(texts) < 2:
        return [], {}, []
    pairs = later_copies(stamps, lex, bar, texts)
    restore: list[int] = []
    drop: dict[int, str] = {}
    rows: list[dict[str, Any]] = []
    for p in pairs:
        if removed[p.original]:
            why = "the filter had removed it"
        elif mode == "facts" and changes_a_fact(
            texts[p.original], texts[p.copy], query, max_diff, excerpt=p.excerpt
        ):
            why = "it states a fact the page does not"
        else:
            continue
        restored = bool(removed[p.original])
        if restored and p.original not in restore:
            restore.append(p.original)
        how = "an excerpt of it" if p.excerpt else f"3-gram cosine {p.lexical:.2f}"
        drop.setdefault(
            p.copy,
            f"added after the page it copies (passage {p.original}, {how}; "
            f"the index held that page first, {why})",
        )
        rows.append({"original": p.original, "copy": p.copy, "restored": restored})
    restore = [i for i in restore if i not in drop]  # a copy of something earlier stays out
    return restore, drop, rows
