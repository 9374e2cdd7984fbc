"""The meta-epistemic note padded past RAGDefender's short-passage bar: the adaptive answer
to ``lone_claim_short``, and to the quote rule that answered it.

Example::

    from ragshield.attacks.adaptive import AttackTarget
    from ragshield.attacks.registry import build_attack

    (t,) = build_attack("meta-epistemic-long").craft_for(target, 1)
    t.text    # CorruptRAG-AK's note, then the gold page's own sentences until 60+ words
    (t,) = build_attack("meta-epistemic-own").craft_for(target, 1)
    t.text    # the note, then sentences of the attacker's own (the bodies) until 60+ words

Why: RAGDefender holds an *added* passage shorter than ``short_words`` (60) words that
claims what no built passage says to a lower closeness bar (``lone_claim_short``), because
planted passages are short by design (PoisonedRAG's V = 30). An attacker who has read that
rule writes longer. What it pads with decides what else it trips, so the padding is the
most plausible text it has: the gold page's sentences that do not state the right answer,
in the page's order (a quote of the page around the note, as a summary box or a scraped
snippet would hold), else the template bodies stating the wrong answer. The note itself is
:class:`~ragshield.attacks.adaptive.MetaEpistemicAttack`'s, so the two rows differ only in
length.

``meta-epistemic-own`` is the attacker who has also read the next rule: RAGDefender counts
only the words a passage does not quote from an earlier retrieved page
(:func:`~ragshield.defenses.ragdefender.provenance.own_words`), so the padding must be text
no page holds — here the PoisonedRAG bodies (published, else the templates), which restate
the wrong answer in words of their own.
"""

from __future__ import annotations

from ragshield.attacks.adaptive import (
    AdaptiveAttack,
    AdaptiveText,
    AttackTarget,
    MetaEpistemicAttack,
    bodies_of,
    check_target,
)
from ragshield.text import contains_answer, split_sentences

#: RAGDefender's short-passage bar (``CoverageParams.short_words``), the rule this attack read.
SHORT_WORDS = 60


class PaddedMetaEpistemicAttack(AdaptiveAttack):
    """CorruptRAG-AK's one passage, padded to at least ``min_words`` words (module docstring)."""

    name = "meta-epistemic-long"

    def __init__(self, min_words: int = SHORT_WORDS, padding: str = "page") -> None:
        self.min_words = min_words
        self.padding = padding  # "page": the gold page's sentences; "own": the bodies

    def craft_for(self, target: AttackTarget, n: int, *, seed: int = 0) -> list[AdaptiveText]:
        check_target(target, n, type(self).__name__)
        if n == 0:
            return []
        (note,) = MetaEpistemicAttack().craft_for(target, 1, seed=seed)
        wrong = target.incorrect.strip()
        if self.padding != "own" and target.gold.strip():
            pad = [s for s in split_sentences(target.gold)
                   if not any(contains_answer(s, c) for c in target.correct)]  # fmt: skip
            body = "genuine"
        else:
            pad, body = bodies_of(target)
        parts = [note.text]
        for s in pad:
            if len(" ".join(parts).split()) >= self.min_words:
                break
            parts.append(s.strip())
        return [AdaptiveText(" ".join(parts), wrong, "rule", body, self.name)]


class OwnPaddedMetaEpistemicAttack(PaddedMetaEpistemicAttack):
    """The note padded with the attacker's own sentences, quoted from no page (module
    docstring)."""

    name = "meta-epistemic-own"

    def __init__(self, min_words: int = SHORT_WORDS) -> None:
        super().__init__(min_words, padding="own")
