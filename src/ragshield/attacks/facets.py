"""The wrong answer planted beside a different part of the gold page in each passage: the
adaptive answer to RAGDefender's ``consensus_added_alike``.

Example::

    from ragshield.attacks.adaptive import AttackTarget
    from ragshield.attacks.registry import build_attack

    texts = build_attack("facet-spread").craft_for(target, 5)
    texts[0].text   # one sentence of the gold page, then "<the question as a statement> <wrong>."
    texts[1].text   # the next sentence of the page, the claim worded with another variant

Why: RAGDefender removes passages added after the index's build that agree on a word no
built passage uses only when they are *alike* (mean pairwise cosine, ``consensus_added_alike``),
because the pages of one article added later share its topic words but each tells its own
part. An attacker who has read that rule makes his passages unalike the way those pages
are: each carries a different sentence of the gold page (the facet), so no two sit close in
embedding space, and the claim sentence — the question in statement form and the wrong
answer, worded differently per passage (:func:`~ragshield.attacks.rewrite.answer_variants`)
— keeps every one close enough to the question to be retrieved and to count. What it gives
up: each facet is a quote of the gold page, which the quote rule does not count toward a
passage's own words (:func:`~ragshield.defenses.ragdefender.provenance.unquoted`), so each
passage says little of its own. Without a gold page the facets are the bodies' sentences
(published, else the templates).
"""

from __future__ import annotations

import random

from ragshield.attacks.adaptive import (
    AdaptiveAttack,
    AdaptiveText,
    AttackTarget,
    bodies_of,
    check_target,
)
from ragshield.attacks.rewrite import answer_variants, statement_form
from ragshield.text import contains_answer, split_sentences


class FacetSpreadAttack(AdaptiveAttack):
    """``n`` passages, each one facet (a sentence of the gold page that does not state the
    right answer) and the wrong answer's claim sentence, facet first or claim first by turns
    (module docstring)."""

    name = "facet-spread"

    def craft_for(self, target: AttackTarget, n: int, *, seed: int = 0) -> list[AdaptiveText]:
        check_target(target, n, type(self).__name__)
        if n == 0:
            return []
        facets, body = [], "genuine"
        if target.gold.strip():
            facets = [s.strip() for s in split_sentences(target.gold)
                      if not any(contains_answer(s, c) for c in target.correct)]  # fmt: skip
        if len(facets) < n:  # too short a page (or none): the bodies' sentences fill in
            bodies, body = bodies_of(target)
            facets += [s.strip() for b in bodies for s in split_sentences(b)]
        rng = random.Random(f"{seed}:{self.name}:{target.question}")
        variants = answer_variants(target.incorrect)
        claim = statement_form(target.question)
        out: list[AdaptiveText] = []
        start = rng.randrange(len(facets))
        for i in range(min(n, len(facets))):
            facet = facets[(start + i) % len(facets)]
            v = variants[i % len(variants)]
            said = f"{claim} {v}."
            text = f"{facet} {said}" if i % 2 == 0 else f"{said} {facet}"
            out.append(AdaptiveText(text, v, "rule", body, self.name))
        return out
