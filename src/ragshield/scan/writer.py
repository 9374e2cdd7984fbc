"""Attack texts and questions written for *this* index by ragshield's generators.

Example::

    from ragshield.attacks.writer import TextWriter, write_in_batches
    from ragshield.scan.writer import AttackTextWriter, llm_questions

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
so a stopped scan resumes where it was. Each stage (targets, then passages) is first run
dry over all questions and its replies written in batches
(:func:`ragshield.attacks.writer.write_in_batches`): on a CPU a batch of 16 replies
decodes in about the time of two.

An LLM attack may return fewer passages than asked (a reply that does not state the target
is dropped, never padded); :mod:`ragshield.eval.plant` then tops a setting up with its
template texts, labelled ``template``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from ragshield.attacks.garag import TypoAttack
from ragshield.attacks.misleading import MisleadingPassageAttack
from ragshield.attacks.poisonedrag import PoisonedRAGAttack, without_question_prefix
from ragshield.attacks.targets import TargetAnswerWriter, differs
from ragshield.attacks.writer import TextWriter, write_in_batches
from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.eval.ontopic import QACase
from ragshield.generate.cache import wrapper_chain
from ragshield.generate.engine_options import usable_cores
from ragshield.scan.questions import ScanQuestion
from ragshield.types import Passage

#: ``--writer`` values: ``llm`` = the generators below, ``template`` = plant.py's wordings.
WRITERS: tuple[str, ...] = ("llm", "template")
LLM_SOURCE = "llm"

#: What :class:`AttackTextWriter` writes per question besides the target.
TEXT_KINDS: tuple[str, ...] = ("poisonedrag", "blind", "garag")
#: Setting shapes (:mod:`ragshield.attacks.settings`) that plant no written text: the
#: injection instructions and families (templates), the clean index, extraction.
_NO_TEXTS = frozenset({"none", "instruction", "hijack", "family", "query"})
#: Shapes that plant only the PoisonedRAG passages: the suffix's carrier, white-box
#: prefixes over the PoisonedRAG bodies.
_PR_ONLY = frozenset({"suffix", "precomputed"})


def texts_for(settings: Sequence[str]) -> tuple[str, ...]:
    """The attack texts ``settings`` plant (in :data:`TEXT_KINDS` order).

    Why: the misleading passages and the GARAG typo copies are planted by the mixed
    settings and the adaptive attacks only, and writing them is about half the writer's
    decoded tokens and all of the typo search; a scan of other settings need not pay for
    them. Any shape not known to need less gets every kind."""
    from ragshield.attacks.settings import resolve

    kinds: set[str] = set()
    for name in settings:
        try:
            row = resolve(name)
        except InputError:  # not a planted setting (the scan checks its names itself)
            kinds.update(TEXT_KINDS)
            continue
        if row.shape in _NO_TEXTS:
            continue
        if row.shape in _PR_ONLY or (
            row.shape == "pool" and row.attacks == ("poisonedrag-blackbox",)
        ):
            kinds.add("poisonedrag")
        else:
            kinds.update(TEXT_KINDS)
    return tuple(k for k in TEXT_KINDS if k in kinds)


def llm_questions(
    passages: Sequence[Passage], n: int, writer: TextWriter, seed: int = 0
) -> list[ScanQuestion]:
    """``n`` self-checked questions written by the LLM from sampled passages
    (:class:`ragshield.scan.question_writer.QuestionWriter`: the answer must occur in the
    passage); an error when none passes the check."""
    from ragshield.scan.question_writer import QuestionWriter

    if n < 1:
        raise InputError(f"--generate must be >= 1. Got {n} instead.")
    written = QuestionWriter(writer).generate(passages, n, seed=seed)
    if not written:
        raise InputError(
            "the LLM wrote no question that passed the self-check; "
            "use --writer template or a --questions file"
        )
    return written


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
    tries: extra asks per LLM passage whose reply lacks the target answer (ours: 1, a CPU
        budget — PoisonedRAG re-asks up to L = 50 times; short lists are topped up with
        labelled template texts by :mod:`ragshield.eval.plant`).
    typo_population, typo_generations: the GARAG search size (ours: 10 × 8 ≈ 90 encodes
        per question, a scan-sized budget; :class:`~ragshield.attacks.garag.TypoAttack`
        defaults to 16 × 12 — each encode of a typo-ridden paragraph costs ~45 ms here).
    overlap: run the typo search in a second thread while the LLM writes the targets and
        passages (ours): neither needs the other's output, and on two cores each gets one
        (the search is ~30 % of the stage's CPU, results round 7). ``None`` = when the
        process may use two cores or more (:func:`usable_cores`); the texts are the same
        either way (same calls, same seeds, only the thread differs). While the search
        runs, a llama.cpp writer computes with one thread fewer (:func:`_yield_a_core`).
    """

    def __init__(
        self,
        writer: TextWriter,
        encoder: Encoder,
        *,
        n_poisonedrag: int = 5,  # Zou et al. 2025: N = 5 passages per target question
        n_misleading: int = 3,
        n_typos: int = 3,
        tries: int = 1,
        typo_population: int = 10,
        typo_generations: int = 8,
        overlap: bool | None = None,
    ) -> None:
        if writer.is_template:
            raise InputError("AttackTextWriter needs an LLM writer; 'template' has none")
        self.writer = writer
        self.encoder = encoder
        self.n_poisonedrag = n_poisonedrag
        self.n_misleading = n_misleading
        self.n_typos = n_typos
        self.tries = tries
        self.typo_population = typo_population
        self.typo_generations = typo_generations
        self.overlap = overlap
        self.stats: dict[str, float] = {}
        #: called with the number of replies each batched chunk wrote (progress bars)
        self.on_chunk: Callable[[int], None] | None = None

    def fill(
        self,
        cases: Sequence[QACase],
        questions: Sequence[ScanQuestion],
        golden_text: Mapping[str, str],
        *,
        seed: int = 0,
        on_case: Callable[[QACase], None] | None = None,
        kinds: Sequence[str] = TEXT_KINDS,
    ) -> list[QACase]:
        """``cases`` with ``target_answer`` and the ``kinds`` of ``attack_texts`` written
        (:func:`texts_for`: what the scan's settings plant), in order.

        A target the LLM proposes that is some *other* question's right answer is replaced
        by the case's decoy target (``cases[i].target_answer``): all targets are planted
        into one index, see :func:`ragshield.scan.questions.decoy_targets`."""
        targets = TargetAnswerWriter(self.writer)
        pr = PoisonedRAGAttack(self.writer, tries=self.tries)
        misleading = MisleadingPassageAttack(self.writer, tries=self.tries)
        typos = TypoAttack(
            self.encoder, population=self.typo_population, generations=self.typo_generations
        )
        every_right = [a for q in questions for a in q.answers]
        pairs = list(zip(cases, questions, strict=True))
        stats = {
            "target_llm": 0,
            "target_file": 0,
            "target_decoy": 0,
            "poisonedrag": 0,
            "blind": 0,
            "garag": 0,
            "seconds": 0.0,
        }
        t_start = time.perf_counter()
        stop = threading.Event()

        def search_typos(beside: bool = False) -> tuple[dict[int, tuple[str, ...]], float]:
            """Every question's GARAG copies of its gold passage, and this thread's CPU s.
            ``beside`` the LLM, the encoder gets one torch thread (a per-thread setting):
            the LLM's threads keep the other cores."""
            torch = sys.modules.get("torch")
            if beside and torch is not None:
                torch.set_num_threads(1)
            c0, made = time.thread_time(), {}
            for i, (case, _) in enumerate(pairs):
                gold = golden_text.get(case.id, "")
                if stop.is_set() or not (gold.strip() and self.n_typos and "garag" in kinds):
                    continue
                made[i] = tuple(
                    typos.craft_from(
                        case.question, gold, self.n_typos, seed=seed + i, answers=case.answers
                    )
                )
            return made, time.thread_time() - c0

        overlap = usable_cores() >= 2 if self.overlap is None else self.overlap
        overlap = overlap and "garag" in kinds  # no search, no second thread
        pool = ThreadPoolExecutor(1, thread_name_prefix="typo-search") if overlap else None
        try:
            typo_job = pool.submit(search_typos, True) if pool is not None else None
            if typo_job is not None:
                _yield_a_core(self.writer, typo_job)
            chosen, written = self._write(
                pairs, targets, pr, misleading, every_right, seed, stats, kinds
            )
            typo_texts, typo_cpu = typo_job.result() if typo_job else search_typos()
        except BaseException:
            stop.set()  # a failed LLM stage ends the search after its current question
            raise
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        stats["typo_overlap"] = float(overlap)
        stats["cpu_typos"] = typo_cpu
        out: list[QACase] = []
        for i, ((case, _), (target, how), texts) in enumerate(
            zip(pairs, chosen, written, strict=True)
        ):
            stats[how] += 1
            if i in typo_texts:
                texts["garag"] = typo_texts[i]
            for kind, made in texts.items():
                stats[kind] += len(made)
            new = dataclasses.replace(
                case, target_answer=target, attack_texts=texts, attack_source=LLM_SOURCE
            )
            out.append(new)
            if on_case is not None:
                on_case(new)
        stats["seconds"] = time.perf_counter() - t_start
        self.stats = stats
        return out

    def _write(
        self,
        pairs: Sequence[tuple[QACase, ScanQuestion]],
        targets: TargetAnswerWriter,
        pr: PoisonedRAGAttack,
        misleading: MisleadingPassageAttack,
        every_right: Sequence[str],
        seed: int,
        stats: dict[str, float],
        kinds: Sequence[str],
    ) -> tuple[list[tuple[str, str]], list[dict[str, tuple[str, ...]]]]:
        """The LLM's part: each question's target (and where it came from), then its
        PoisonedRAG and misleading passages."""
        t_start = time.perf_counter()

        def pick_targets() -> list[tuple[str, str]]:
            picked = []
            for i, (case, q) in enumerate(pairs):
                t = targets.target_for(
                    case.question, case.answers, given=q.target or None, seed=seed + i
                )
                if t.generated_by == "file":
                    picked.append((t.target, "target_file"))
                elif t.generated_by.startswith("llm") and differs(t.target, every_right):
                    picked.append((t.target, "target_llm"))
                else:
                    picked.append((case.target_answer, "target_decoy"))
            return picked

        # Stage by stage over all questions, so each stage's replies are written in
        # batches first (write_in_batches) and then read back from the cache.
        write_in_batches(self.writer, pick_targets, on_chunk=self.on_chunk)
        chosen = pick_targets()
        stats["seconds_targets"] = time.perf_counter() - t_start

        def passages() -> list[dict[str, tuple[str, ...]]]:
            texts = []
            for i, ((case, _), (target, _)) in enumerate(zip(pairs, chosen, strict=True)):
                made: dict[str, tuple[str, ...]] = {}
                if target and "poisonedrag" in kinds:
                    made["poisonedrag"] = tuple(
                        pr.craft(case.question, target, self.n_poisonedrag, seed=seed + i)
                    )
                if target and "blind" in kinds:
                    made["blind"] = tuple(
                        misleading.craft(case.question, target, self.n_misleading, seed=seed + i)
                    )
                texts.append(made)
            return texts

        write_in_batches(self.writer, passages, on_chunk=self.on_chunk)
        written = passages()
        stats["seconds_passages"] = time.perf_counter() - t_start - stats["seconds_targets"]
        return chosen, written


def _yield_a_core(writer: TextWriter, job: Future[Any]) -> None:
    """Until ``job`` (the typo search, one thread) ends, the writer's llama.cpp generator
    runs one thread fewer, then gets them back.

    Why: the process may use ``usable_cores()`` cores and the search takes one of them;
    llama.cpp's threads meet at a barrier after every operation of a step, so beside the
    search two of them on two cores take turns with it (the idle scan's writer stage kept
    1.57 of 2 cores busy). At one thread there is no barrier. A generator reads its ``threads`` at each call and llama.cpp's tokens do not
    depend on it (16 of 16 writer replies identical at one and two threads, round 9), so
    the texts stay the same; engine CPU per token was the same too (17.1 vs 17.5 CPU-s
    for 667 tokens beside a busy thread, at load 10-14: the wall-time effect needs the
    idle machine). Only llama.cpp's: a transformers generator's thread count is torch's,
    process-wide.
    """
    gen: Any = next(  # through wrappers (the answer cache) to the engine's generator
        (g for g in wrapper_chain(writer.generator_) if getattr(g, "backend", None) == "llama.cpp"),
        None,
    )
    if gen is None:
        return
    threads = getattr(gen, "threads", None)
    own = usable_cores() if threads is None else threads
    if not isinstance(own, int) or own < 2:
        return
    gen.threads = own - 1

    def give_back(_: Future[Any]) -> None:
        gen.threads = threads

    job.add_done_callback(give_back)  # runs at once if the job has already ended


def whitebox_texts(
    cases: Sequence[QACase],
    encoder: Encoder,
    *,
    n: int = 5,  # Zou et al. 2025: N = 5 passages per target question
    steps: int = 30,
    seed: int = 0,
    on_case: Callable[[QACase], None] | None = None,
) -> list[QACase]:
    """``cases`` with ``attack_texts["whitebox"]``: PoisonedRAG white-box passages ``S ⊕ I``
    whose prefix ``S`` (the question at first) is HotFlip-optimised against the index's
    own ``encoder`` (:class:`~ragshield.attacks.poisonedrag_whitebox.PoisonedRAGWhiteBoxAttack`).

    ``I`` is each case's PoisonedRAG body: the LLM-written passage when the writer wrote
    one, else the template assertion (then labelled ``template`` by
    :mod:`ragshield.eval.plant`), so the white-box row differs from the black-box one only
    by the optimised prefix. ``steps`` per passage (the attack's CPU-sized default)."""
    from ragshield.attacks.poisonedrag_whitebox import PoisonedRAGWhiteBoxAttack
    from ragshield.eval.plant import pick_target, template_attack_texts

    attack = PoisonedRAGWhiteBoxAttack(encoder, steps=steps)
    out: list[QACase] = []
    for i, case in enumerate(cases):
        target = pick_target(case, cases, seed)
        texts = list(case.attack_texts.get("poisonedrag", ()))
        if not texts:
            texts = template_attack_texts(case, target, seed + i)["poisonedrag"]
        made = tuple(
            attack.optimize(
                case.question, without_question_prefix(case.question, t), seed=seed + 7 * i + j
            ).text
            for j, t in enumerate(texts[:n])
        )
        new = dataclasses.replace(case, attack_texts={**case.attack_texts, "whitebox": made})
        out.append(new)
        if on_case is not None:
            on_case(new)
    return out
