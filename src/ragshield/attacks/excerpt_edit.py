"""An edited excerpt of the genuine page, cut below the near-copy bar: the adaptive answer to
RAGDefender's provenance stage.

Example::

    from ragshield.attacks.adaptive import AttackTarget
    from ragshield.attacks.registry import build_attack

    (t,) = build_attack("excerpt-edit").craft_for(target, 1)   # needs target.gold
    t.text    # the gold page's answer sentence (fact changed) and as few others as it takes

Why: ``near-duplicate`` (arXiv 2604.00387) plants the gold page with one fact changed. The
provenance stage (:mod:`ragshield.defenses.ragdefender.provenance`) removes an *added*
passage that is a lexical near-copy (character 3-gram cosine >= 0.8, RAGDefender's
``group_lexical``) of a page the index held first. An attacker who has read that rule keeps
the part of the page retrieval needs — the sentence that answers the question, with the
answer changed — and drops whole sentences until the copy is no longer a near-copy of the
page by that measure: an excerpt is what a quote, a summary box or a scraped snippet of a
page looks like anyway. Nothing is reworded, so every sentence it keeps is the page's own
(the body label is ``genuine``); the answer sentence stays, so the passage still ranks.

Sentences go in the page's order, nearest the answer sentence first, while the 3-gram
cosine to the page stays under the bar; a page too short to cut under it gives its answer
sentence alone. Nothing is made when the gold page is unknown.
"""

from __future__ import annotations

from ragshield.attacks.adaptive import (
    AdaptiveAttack,
    AdaptiveText,
    AttackTarget,
    check_target,
    edit_genuine,
)
from ragshield.defenses.ragdefender.evidence import char_trigram_cosine
from ragshield.text import contains_answer, split_sentences

#: RAGDefender's near-copy bar (``KnnParams.group_lexical``), the rule this attack read.
NEAR_COPY_BAR = 0.8


class ExcerptEditAttack(AdaptiveAttack):
    """One excerpt of the gold page with the right answer swapped for the wrong one, cut to
    a 3-gram cosine with the page below ``bar`` (module docstring)."""

    name = "excerpt-edit"

    def __init__(self, bar: float = NEAR_COPY_BAR) -> None:
        self.bar = bar

    def craft_for(self, target: AttackTarget, n: int, *, seed: int = 0) -> list[AdaptiveText]:
        check_target(target, n, type(self).__name__)
        if not target.gold or n == 0:
            return []
        wrong = target.incorrect.strip()
        edited = split_sentences(edit_genuine(target, wrong, seed=seed))
        hit = next((i for i, s in enumerate(edited) if contains_answer(s, wrong)), 0)
        keep = {hit}
        order = sorted(range(len(edited)), key=lambda i: (abs(i - hit), i))
        for i in order[1:]:
            trial = " ".join(edited[j] for j in sorted(keep | {i}))
            if char_trigram_cosine(trial, target.gold) >= self.bar:
                break
            keep.add(i)
        text = " ".join(edited[j] for j in sorted(keep))
        return [AdaptiveText(text, wrong, "rule", "genuine", self.name)]
