"""Whether the index holds a claim word outside the retrieved set: the lone-claim stage's
second witness.

Example::

    from ragshield.defenses.ragdefender.index_support import unheld_words

    table = novelty_index.with_added(ids, texts, vectors)   # a NoveltyTable: .uses(word)
    unheld_words(("cassini", "1997"), table.uses, [content_words(t) for t in texts], in_index)
    # ("cassini",): no indexed passage but the retrieved ones uses it

Why: the lone-claim stage's witnesses are the retrieved passages below its bar, and every
genuine page that close to the question has a word none of them uses (poisoning-11: 28 of
28 dev gold pages). The index knows more: a word a planted passage introduces (a made-up
answer) should occur nowhere else in the index, while a genuine page's words should occur in
its siblings and in other pages of its topic. Counted over the whole index (the passages
added to it included, as ``ragshield add`` adds them) minus the retrieved passages, which
the stage already read: an attacker's passages in the top-k cannot vouch for each other
here either. Needs the index's word counts (``NoveltyTable.uses``,
:mod:`ragshield.store.calibration_novelty`); without them the check is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: A word at most this share of the index's passages use is rare there: it names something
#: (SQuAD dev, 1,888 passages: genuine retrieved passages hold p1 / p5 8 / 12 such words
#: outside the question that another passage also uses, template-written planted notes p90
#: 5; HotpotQA, 991: p5 3, p90 2).
RARE_SHARE = 0.01


def unheld_words(
    claim: Sequence[str],
    uses: Callable[[str], int],
    retrieved: Sequence[frozenset[str]],
    in_index: Sequence[bool],
) -> tuple[str, ...]:
    """The words of ``claim`` that no indexed passage outside the retrieved set uses:
    ``uses(w)`` (how many indexed passages use ``w``) is no more than how many of the
    ``retrieved`` passages' word sets that are ``in_index`` hold it."""
    out = []
    for w in claim:
        inside = sum(1 for ws, ok in zip(retrieved, in_index, strict=True) if ok and w in ws)
        if uses(w) <= inside:
            out.append(w)
    return tuple(out)
