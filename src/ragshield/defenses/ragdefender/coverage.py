"""How much of the question a passage spells out, letter by letter, allowing edits.

Example::

    from ragshield.defenses.ragdefender.coverage import question_coverage

    question_coverage("What is the capital city of Australia?",
                      ["Waht is teh capitl city of Australia. Sydney is ...", "Canberra ..."])
    # -> array([93.3, 41.2])   (0-100: the best-aligned stretch of each passage)

Why: a poisoning passage must win retrieval for *one* question, so the attacker writes the
question into it; PoisonedRAG does so verbatim (``restates_question``), an attacker who has
read the filter rewords, reorders, drops words or puts typos in. Each edit costs him
retrieval rank, and most of the question's letters stay in order. rapidfuzz's
``partial_ratio`` (the normalised Indel similarity of the question and the passage's
best-aligned substring of its length) scores that directly, typo- and edit-tolerant.
Natural passages do not spell out a question: on the dev splits no benign top-10 passage
reaches 85 (HotpotQA non-targets max 80.6), while typo'd / word-dropped / statement-form
prefixes score >= 85 for 0.97-1.00 of the planted passages (synonyms 0.91, CorruptRAG's
meta-epistemic passage 1.00). Questions shorter than ``min_chars`` are skipped: a few
words occur in natural text by chance.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from rapidfuzz import fuzz

_TOKEN = re.compile(r"[^\W_]+")


def _plain(text: str) -> str:
    """Lower-cased word tokens joined by one space (punctuation and case ignored)."""
    return " ".join(_TOKEN.findall(text.lower()))


def question_coverage(query: str, texts: Sequence[str], min_chars: int = 20) -> np.ndarray:
    """Per passage, ``partial_ratio`` (0-100) of the question against the passage, both
    reduced to lower-cased words; 0 for every passage when the question has fewer than
    ``min_chars`` characters so reduced."""
    q = _plain(query)
    out = np.zeros(len(texts), dtype=np.float64)
    if len(q) < min_chars:
        return out
    for i, t in enumerate(texts):
        out[i] = fuzz.partial_ratio(q, _plain(t))
    return out
