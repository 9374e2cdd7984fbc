"""Attack texts and questions written for *this* index by ragshield's generators.

Example::

    from ragshield.attacks.writer import TextWriter
    from ragshield.eval.scan_writer import AttackTextWriter, llm_questions

    writer = TextWriter()                             # packaged Qwen2.5-0.5B, disk-cached
    qs = llm_questions(store.passages, 20, writer, seed=0)
    cases = AttackTextWriter(writer, encoder).fill(cases, questions, golden_text)

Why: the published attack texts exist only for the papers' own questions, so on a user's
index :mod:`ragshield.eval.plant` would otherwise fall back to fixed template wordings. This
fills each question's ``QACase.attack_texts`` the way the papers made theirs — a target
answer from the LLM (the user's ``target`` wins), PoisonedRAG black-box passages (question
prefixed), misleading passages (no prefix, Tan et al.) and GARAG-style typo copies of the
gold passage (genetic search with the index's own encoder) — and labels them
``attack_source="llm"``, so every table says where its texts came from. Every LLM reply
goes through the writer's disk cache (:class:`~ragshield.generate.cache.CachedGenerator`),
so a stopped scan resumes where it was.

An LLM attack may return fewer passages than asked (a reply that does not state the target
is dropped, never padded); :mod:`ragshield.eval.plant` then tops a setting up with its
template texts, labelled ``template``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from ragshield.attacks.garag import TypoAttack
from ragshield.attacks.misleading import MisleadingPassageAttack
from ragshield.attacks.poisonedrag import PoisonedRAGAttack
from ragshield.attacks.targets import TargetAnswerWriter, differs
from ragshield.attacks.writer import TextWriter
from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.eval.ontopic import QACase
from ragshield.eval.scan_questions import ScanQuestion
from ragshield.types import Passage

#: ``--writer`` values: ``llm`` = the generators below, ``template`` = plant.py's wordings.
WRITERS: tuple[str, ...] = ("llm", "template")
LLM_SOURCE = "llm"


def llm_questions(
    passages: Sequence[Passage], n: int, writer: TextWriter, seed: int = 0
) -> list[ScanQuestion]:
    """``n`` self-checked questions written by the LLM from sampled passages
    (:class:`ragshield.eval.questions.QuestionWriter`: the answer must occur in the
    passage); an error when none passes the check."""
    from ragshield.eval.questions import QuestionWriter

    if n < 1:
        raise InputError(f"--generate must be >= 1. Got {n} instead.")
    written = QuestionWriter(writer).generate(passages, n, seed=seed)
    if not written:
        raise InputError(
            "the LLM wrote no question that passed the self-check; "
            "use --writer template or a --questions file"
        )
    return [ScanQuestion(q.question, q.answers, q.target_answer or "") for q in written]


class AttackTextWriter:
    """Writes every question's attack texts (see the module docstring).

    Parameters
    ----------
    writer: the :class:`~ragshield.attacks.writer.TextWriter` (an LLM; not ``template``).
    encoder: the index's encoder, which the typo search keeps the copies close under.
    n_poisonedrag: PoisonedRAG passages per question (Zou et al. 2025: N = 5).
    n_misleading: misleading passages per question (ours: 3, so ``mixed-2x``'s 10 slots
        are filled by 5 + 3 + typo copies without template text).
    n_typos: GARAG typo copies of the gold passage per question (ours).
    """

    def __init__(
        self,
        writer: TextWriter,
        encoder: Encoder,
        *,
        n_poisonedrag: int = 5,  # Zou et al. 2025: N = 5 passages per target question
        n_misleading: int = 3,
        n_typos: int = 3,
    ) -> None:
        if writer.is_template:
            raise InputError("AttackTextWriter needs an LLM writer; 'template' has none")
        self.writer = writer
        self.encoder = encoder
        self.n_poisonedrag = n_poisonedrag
        self.n_misleading = n_misleading
        self.n_typos = n_typos
        self.stats: dict[str, float] = {}

    def fill(
        self,
        cases: Sequence[QACase],
        questions: Sequence[ScanQuestion],
        golden_text: Mapping[str, str],
        *,
        seed: int = 0,
        on_case: Callable[[QACase], None] | None = None,
    ) -> list[QACase]:
        """``cases`` with ``target_answer`` and ``attack_texts`` written, in order.

        A target the LLM proposes that is some *other* question's right answer is replaced
        by the case's decoy target (``cases[i].target_answer``): all targets are planted
        into one index, see :func:`ragshield.eval.scan_questions.decoy_targets`."""
        targets = TargetAnswerWriter(self.writer)
        pr = PoisonedRAGAttack(self.writer)
        misleading = MisleadingPassageAttack(self.writer)
        typos = TypoAttack(self.encoder)
        every_right = [a for q in questions for a in q.answers]
        stats = {"target_llm": 0, "target_file": 0, "target_decoy": 0, "poisonedrag": 0,
                 "blind": 0, "garag": 0, "seconds": 0.0}  # fmt: skip
        out: list[QACase] = []
        for i, (case, q) in enumerate(zip(cases, questions, strict=True)):
            t0 = time.perf_counter()
            s = seed + i
            t = targets.target_for(case.question, case.answers, given=q.target or None, seed=s)
            target = t.target
            if t.generated_by == "file":
                stats["target_file"] += 1
            elif t.generated_by.startswith("llm") and differs(target, every_right):
                stats["target_llm"] += 1
            else:
                target = case.target_answer
                stats["target_decoy"] += 1
            texts: dict[str, tuple[str, ...]] = {}
            if target:
                texts["poisonedrag"] = tuple(
                    pr.craft(case.question, target, self.n_poisonedrag, seed=s)
                )
                texts["blind"] = tuple(
                    misleading.craft(case.question, target, self.n_misleading, seed=s)
                )
            gold = golden_text.get(case.id, "")
            if gold.strip() and self.n_typos:
                texts["garag"] = tuple(
                    typos.craft_from(case.question, gold, self.n_typos, seed=s,
                                     answers=case.answers)
                )  # fmt: skip
            for kind, made in texts.items():
                stats[kind] += len(made)
            stats["seconds"] += time.perf_counter() - t0
            new = dataclasses.replace(
                case, target_answer=target, attack_texts=texts, attack_source=LLM_SOURCE
            )
            out.append(new)
            if on_case is not None:
                on_case(new)
        self.stats = stats
        return out
