"""The meta-epistemic note padded past RAGDefender's short-passage bar: the adaptive answer
to ``lone_claim_short``.

Example::

    from ragshield.attacks.adaptive import AttackTarget
    from ragshield.attacks.registry import build_attack

    (t,) = build_attack("meta-epistemic-long").craft_for(target, 1)
    t.text    # CorruptRAG-AK's note, then the gold page's own sentences until 60+ words

Why: RAGDefender holds an *added* passage shorter than ``short_words`` (60) words that
claims what no built passage says to a lower closeness bar (``lone_claim_short``), because
planted passages are short by design (PoisonedRAG's V = 30). An attacker who has read that
rule writes longer. What it pads with decides what else it trips, so the padding is the
most plausible text it has: the gold page's sentences that do not state the right answer,
in the page's order (a quote of the page around the note, as a summary box or a scraped
snippet would hold), else the template bodies stating the wrong answer. The note itself is
:class:`~ragshield.attacks.adaptive.MetaEpistemicAttack`'s, so the two rows differ only in
length.
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

    def __init__(self, min_words: int = SHORT_WORDS) -> None:
        self.min_words = min_words

    def craft_for(self, target: AttackTarget, n: int, *, seed: int = 0) -> list[AdaptiveText]:
        check_target(target, n, type(self).__name__)
        if n == 0:
            return []
        (note,) = MetaEpistemicAttack().craft_for(target, 1, seed=seed)
        wrong = target.incorrect.strip()
        if target.gold.strip():
            pad = [s for s in split_sentences(target.gold)
                   if not any(contains_answer(s, c) for c in target.correct)]  # fmt: skip
            body = "genuine"
        else:
            pad, body = bodies_of(target)[0], "template"
        parts = [note.text]
        for s in pad:
            if len(" ".join(parts).split()) >= self.min_words:
                break
            parts.append(s.strip())
        return [AdaptiveText(" ".join(parts), wrong, "rule", body, self.name)]
