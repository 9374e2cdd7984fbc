"""Undo one-letter edits towards the question: the typo-robust view of a retrieved passage.

Example::

    from ragshield.defenses.ragdefender.typos import normalise_to_question

    text, changed = normalise_to_question(
        "What is the capital of Australia?", "Waht is teh captial of Australia. Sydney ...",
        vocabulary,  # the encoder's whole WordPiece words
    )   # -> "What is teh capital of Australia. Sydney ...", 2 ("teh": < 4 letters, kept)

Why: an attacker who has read the filter puts a few typos in the question he prefixes
(GARAG-style noise, ``prefix-typo``). MiniLM is not typo-robust: one edit in a quarter of
the prefix's words moves the planted passages apart and away from the question, so both
the embedding echo and the planted-group density miss them (HotpotQA test: the group
signal flagged 0.72 of the PoisonedRAG passages and 0.00 of their typo'd copies). The
question itself tells which spelling was meant: a passage word that is *not* a whole word
of the encoder's WordPiece vocabulary (a misspelling almost never is,
:func:`~ragshield.defenses.ragdefender.evidence.oov_rate`) and lies one edit (optimal
string alignment: swap, drop, insert, substitute; ``rapidfuzz``) from a question word is
read as that word. The passage is then judged as if it were spelt right: the verbatim
restatement, the echo and the group density see through the typos. A natural passage has
few such words (rare names spelt differently); it is changed only there and then judged by
the same rules as every other passage, so the view costs no clean traffic by itself.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from rapidfuzz.distance import OSA

#: Question words shorter than this are never targets: one edit turns most short words
#: into other words (``form``/``from``), and the prefix typos edit words of >= 4 letters
#: (GARAG's and :func:`ragshield.attacks.rewrite.typos`' rule); a passage word may be one
#: letter shorter (a dropped letter).
MIN_LETTERS = 4

_WORD = re.compile(r"[^\W\d_]+")


def question_words(query: str) -> frozenset[str]:
    """The question's lower-cased words of at least :data:`MIN_LETTERS` letters."""
    return frozenset(w for w in _WORD.findall(query.lower()) if len(w) >= MIN_LETTERS)


def normalise_to_question(
    query: str, text: str, vocabulary: Collection[str], max_edits: int = 1
) -> tuple[str, int]:
    """``text`` with every out-of-vocabulary word within ``max_edits`` OSA edits of a
    question word replaced by that word, and how many words were replaced."""
    targets = question_words(query)
    if not targets:
        return text, 0
    changed = 0

    def fix(m: re.Match[str]) -> str:
        nonlocal changed
        word = m.group(0)
        low = word.lower()
        if len(low) < MIN_LETTERS - max_edits or low in targets or low in vocabulary:
            return word
        for q in targets:
            if OSA.distance(low, q, score_cutoff=max_edits) <= max_edits:
                changed += 1
                return q.capitalize() if word[0].isupper() else q
        return word

    out = _WORD.sub(fix, text)
    return out, changed
