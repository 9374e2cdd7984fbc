"""LLM-written attack texts for the questions that have no published ones (``--writer``).

Example::

    cases = llm_written(data, data.split("dev"), encoder, "qwen2.5-0.5b", seed=0)

Why: the published texts (PoisonedRAG's bodies, Tan et al.'s ``blind`` passages) exist
only for the shared poisoning targets, which are HotpotQA's *test* split. Tuning a defense
on dev therefore saw only ragshield's template bodies, and a signal tuned that way met
the published bodies for the first time on test (stop 40: the no-question row did not
move). With ``--writer`` each question without published texts gets its own, written the
way the papers wrote theirs by the packaged LLM (:class:`ragshield.scan.writer.AttackTextWriter`:
five PoisonedRAG bodies, five misleading background passages without the question, Tan
et al.), labelled ``llm`` in every table. The target answer is the LLM's too, as
PoisonedRAG's were (an LLM asked for a plausible wrong answer): the template targets of a
dev question ("Paris", "1850", "John Smith" where its article offers no other answer)
appear in no genuine passage, while the published ones are the other entity of a
comparison, the other half of a yes/no, a real place or name the genuine passages may
mention. Where the LLM's answer is some question's right answer, planting's own pick
(:func:`ragshield.eval.plant.pick_target`) stands in. Replies are greedy and disk-cached:
a rerun writes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

KINDS = ("poisonedrag", "blind")


def llm_written(data: Any, cases: Sequence[Any], encoder: Any, spec: str | None,
                seed: int, *, replace: bool = False) -> list[Any]:  # fmt: skip
    """``cases``, those without published attack texts given LLM-written ones (unchanged
    without ``spec``); with ``replace``, every case's texts are the LLM's (planting fills in
    template bodies where it wrote fewer than it plants; the
    leave-one-family-out table's "LLM-written" family on the split whose questions have
    published ones)."""
    if not spec:
        return list(cases)
    from ragshield.attacks.writer import TextWriter
    from ragshield.eval.plant import pick_target
    from ragshield.scan.questions import ScanQuestion
    from ragshield.scan.writer import AttackTextWriter

    bare = [
        dataclasses.replace(c, target_answer=pick_target(c, cases, seed))  # the LLM's fallback
        for c in cases if replace or not c.attack_texts
    ]  # fmt: skip
    if not bare:
        return list(cases)
    golden = data.golden_text(bare)
    questions = [ScanQuestion(c.question, c.answers, id=c.id) for c in bare]
    written = AttackTextWriter(TextWriter(spec), encoder).fill(
        bare, questions, golden, seed=seed, kinds=KINDS
    )
    by_id = {c.id: c for c in written}
    return [by_id.get(c.id, c) for c in cases]
