"""The knowledge-corruption (poisoning) evaluation of RAGDefender §6, on the shared data.

Example::

    from pathlib import Path
    from ragshield.defenses.ragdefender import PaperRAGDefender, RAGDefender
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.poisoning import run_poisoning_eval
    from ragshield.eval.report import markdown_table

    enc = SentenceTransformerEncoder()
    res = run_poisoning_eval(
        Path("../shared/data/poisoning/nq"),
        {"paper": PaperRAGDefender(enc), "ours": RAGDefender(enc)},
        attacks=["poisonedrag", "mixed"], ratios=[1, 4], seeds=range(3), encoder=enc,
    )
    print(markdown_table(res))

How a retrieval set is assembled (``../shared/data/README.md``): the golden passage, the
``n_benign`` golden passages of *other* questions nearest the question (benign but
irrelevant), and ``M = round(base_size × ratio)`` adversarial passages, shuffled. No passage
is ever duplicated to reach M: a single attack contributes at most the passages it has
(the M actually used is reported), ``"mixed"`` interleaves PoisonedRAG, blind and GARAG to
reach high ratios. Passage ids and metadata carry no label, so a defense cannot peek.

After the filter, the ``context_k`` survivors nearest the question form the context a
generator would read; metrics: see :mod:`ragshield.eval.metrics` and
:data:`METRIC_LABELS`. Building the sets lives in :mod:`ragshield.eval.poisoning_sets`;
this module runs the defenses over them and scores them.

Its result types (``SettingResult``, ``PoisoningResults``) and their aggregation live in
:mod:`ragshield.eval.poisoning_results` (re-exported here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from ragshield.attacks.base import CorpusAttack
from ragshield.defenses.base import PassageFilter
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_int
from ragshield.eval import metrics as M
from ragshield.eval.datasets import ATTACK_SOURCES, PoisoningCase, load_poisoning, split_cases
from ragshield.eval.poisoning_results import (
    METRIC_LABELS,
    PoisoningResults,
    SettingResult,
    aggregate,
    poisoning_results,
)
from ragshield.eval.poisoning_sets import (
    CLEAN,
    MIXED,
    RetrievalSet,
    VectorBank,
    attack_name,
    benign_passages,
    build_retrieval_sets,
    resolve_attack,
)
from ragshield.generate.base import Generator
from ragshield.generate.cache import answer_once
from ragshield.types import RetrievedPassage

__all__ = [
    "METRIC_LABELS",
    "Grid",
    "PoisoningResults",
    "QuestionScores",
    "SettingResult",
    "check_run_arguments",
    "context_texts",
    "evaluation_grid",
    "poisoning_results",
    "prepare_questions",
    "question_texts",
    "run_poisoning_eval",
    "score_filter",
    "score_questions",
    "settings_from_scores",
]


def score_filter(
    rs: RetrievalSet,
    removed: np.ndarray,
    context_k: int,
    kept_text: Mapping[int, str] | None = None,
) -> dict[str, float]:
    """Detection and filter-level metrics of one filter decision on one set (raw counts and
    0/1 outcomes, summed by the caller).

    ``kept_text`` maps a passage's position to the text a sentence-level filter (EcoSafeRAG)
    left of it, so the context is scored as the generator would read it.
    """
    adv = rs.adversarial_mask
    gold = rs.golden_mask
    tp, fp, fn = M.detection_counts(removed, adv)
    ctx = M.context_indices([p.score for p in rs.passages], removed, context_k)
    texts = context_texts(rs, ctx, kept_text)
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "n_clean": int((~adv).sum()),
        "gold_total": int(gold.sum()),
        "gold_kept": int((gold & ~removed).sum()),
        "n_adv_error": M.n_adv_error(removed, int(adv.sum())),
        "filter_asr": float(
            M.filter_attack_success(texts, rs.case.incorrect_answer, rs.case.correct_answer)
        ),
        "adv_majority": float(M.adversarial_majority(adv[ctx])),
        "gold_in_context": float(bool(gold[ctx].any())),
    }


def context_texts(
    rs: RetrievalSet, ctx: Iterable[int], kept_text: Mapping[int, str] | None
) -> list[str]:
    return [(kept_text or {}).get(int(i), rs.passages[int(i)].text) for i in ctx]


def _kept_text(rs: RetrievalSet, kept: Sequence[RetrievedPassage]) -> dict[int, str]:
    """Positions whose passage a filter rewrote (kept under the same id, other text)."""
    by_id = {p.id: p.text for p in kept}
    return {
        i: by_id[p.id] for i, p in enumerate(rs.passages) if p.id in by_id and by_id[p.id] != p.text
    }


def _removed_mask(rs: RetrievalSet, kept: Sequence[RetrievedPassage]) -> np.ndarray:
    kept_ids = {id(p) for p in kept}
    own = {id(q) for q in rs.passages}
    if kept_ids <= own:
        return np.array([id(p) not in kept_ids for p in rs.passages], dtype=bool)
    # A filter that rebuilt the passages (e.g. trimmed sentences): match by id.
    ids = {p.id for p in kept}
    return np.array([p.id not in ids for p in rs.passages], dtype=bool)


def run_poisoning_eval(
    dataset_dir: Path | str,
    defenses: Mapping[str, PassageFilter | None],
    attacks: Sequence[str | CorpusAttack] = (*ATTACK_SOURCES, MIXED),
    ratios: Sequence[float] = (1, 2, 4, 6),
    seeds: Iterable[int] = range(10),
    encoder: Encoder | None = None,
    generator: Generator | None = None,
    limit: int | None = None,
    *,
    split: str = "all",
    include_clean: bool = True,
    context_k: int = 5,
    n_benign: int = 4,
    base_size: int = 5,
    n_golden: int = 1,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> PoisoningResults:
    """Run every defense on every (attack, ratio, seed) retrieval set of one dataset.

    Parameters
    ----------
    dataset_dir: a ``poisoning/<dataset>/`` folder (see :func:`load_poisoning`).
    defenses: display name -> filter; ``None`` is the no-defense row.
    attacks: data-backed names (``poisonedrag``, ``blind``, ``garag``, ``mixed``), names
        registered with :func:`register_attack`, ``"module:Class"`` strings or
        :class:`CorpusAttack` objects.
    ratios: adversarial passages per clean passage (M = round(base_size × ratio)).
    seeds: each seed re-draws the adversarial subset and the shuffle.
    encoder: embeds questions and passages (default: the packaged MiniLM).
    generator: when given, the context is also answered and end-to-end ASR / accuracy are
        measured (substring rule); without one only filter-level metrics exist and the
        results' ``notes`` say so.
    limit: evaluate only the first ``limit`` questions of the split.
    split: ``"all"``, ``"dev"`` (even positions) or ``"test"`` (odd positions).
    include_clean: also run the clean setting (M = 0), once per seed.
    context_k: survivors (nearest the question) that reach the generator.
    n_benign, base_size, n_golden: set assembly (defaults: the data README's setting).
    """
    seeds = list(seeds)
    check_run_arguments(
        seeds,
        ratios,
        context_k=context_k,
        n_benign=n_benign,
        limit=limit,
        n_defenses=len(defenses),
    )
    resolved = [resolve_attack(a) for a in attacks]
    say = log or (lambda _msg: None)

    if encoder is None:
        from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

        encoder = SentenceTransformerEncoder()
    cases, bank, benign = prepare_questions(
        dataset_dir,
        encoder,
        split=split,
        limit=limit,
        n_benign=n_benign,
        show_progress=show_progress,
    )
    grid = evaluation_grid(resolved, ratios, include_clean)
    scores = score_questions(
        list(enumerate(cases)),
        grid,
        seeds,
        defenses,
        bank,
        benign,
        context_k=context_k,
        base_size=base_size,
        n_golden=n_golden,
        generator=generator,
        log=say,
    )
    settings = settings_from_scores(scores, grid, seeds, list(defenses), len(cases))
    return poisoning_results(
        dataset_dir,
        split,
        len(cases),
        seeds,
        settings,
        context_k=context_k,
        n_benign=n_benign,
        n_golden=n_golden,
        encoder=encoder,
        generator=generator,
    )


def check_run_arguments(
    seeds: Sequence[int],
    ratios: Sequence[float],
    *,
    context_k: int,
    n_benign: int,
    limit: int | None,
    n_defenses: int,
) -> None:
    """The argument checks of :func:`run_poisoning_eval` (shared with the Ray path)."""
    if not seeds:
        raise InputError("seeds is empty: pass at least one seed, e.g. range(10).")
    check_int(context_k, "context_k", "run_poisoning_eval", low=1)
    check_int(n_benign, "n_benign", "run_poisoning_eval", low=0)
    if limit is not None:
        check_int(limit, "limit", "run_poisoning_eval", low=1)
    for r in ratios:
        if not isinstance(r, (int, float)) or r <= 0:
            raise InputError(f"ratios must be positive numbers. Got {r!r}.")
    if not n_defenses:
        raise InputError("defenses is empty: pass e.g. {'none': None, 'ragdefender': f}.")


def prepare_questions(
    dataset_dir: Path | str,
    encoder: Encoder,
    *,
    split: str = "all",
    limit: int | None = None,
    n_benign: int = 4,
    show_progress: bool = False,
) -> tuple[list[PoisoningCase], VectorBank, dict[str, tuple[str, ...]]]:
    """The split's questions, every text they use encoded in one batched call, and each
    question's benign passages (chosen among *all* the split's golden passages)."""
    cases = split_cases(load_poisoning(dataset_dir), split)
    if limit is not None:
        cases = cases[:limit]
    bank = VectorBank(encoder)
    bank.add(question_texts(cases), show_progress=show_progress)
    return cases, bank, benign_passages(cases, bank, n_benign)


def question_texts(cases: Iterable[PoisoningCase]) -> list[str]:
    """Every text a question's retrieval sets can hold (question, golden, adversarial)."""
    cases = list(cases)
    texts = [c.question for c in cases]
    for c in cases:
        texts += [c.golden, *c.supporting, *(t for v in c.adversarial.values() for t in v)]
    return texts


Grid = list[tuple["str | CorpusAttack | None", float]]


def evaluation_grid(
    attacks: Sequence[str | CorpusAttack], ratios: Sequence[float], include_clean: bool
) -> Grid:
    """The (attack, ratio) settings in table order; ``(None, 0.0)`` is the clean one."""
    grid: Grid = [(None, 0.0)] if include_clean else []
    return grid + [(a, float(r)) for a in attacks for r in ratios]


@dataclass
class QuestionScores:
    """Per-question score rows of some of a run's questions, before aggregation.

    ``rows[(setting, seed, defense)]`` holds one :func:`score_filter` row per question (in
    question order) and ``m_used[(setting, seed)]`` the adversarial passages each set
    used; ``setting`` and ``seed`` are positions in the grid and the seed list. The scores
    of consecutive slices of the questions :meth:`merge` into those of the whole run, which
    is how the Ray path splits a run by question and still prints the in-process table.
    """

    rows: dict[tuple[int, int, str], list[dict[str, float]]] = field(default_factory=dict)
    m_used: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    m_requested: dict[int, int] = field(default_factory=dict)

    @classmethod
    def merge(cls, parts: Sequence[QuestionScores]) -> QuestionScores:
        """Concatenate slices, in the order given (question order)."""
        out = cls()
        for part in parts:
            for key, rows in part.rows.items():
                out.rows.setdefault(key, []).extend(rows)
            for mkey, used in part.m_used.items():
                out.m_used.setdefault(mkey, []).extend(used)
            for g, m in part.m_requested.items():
                out.m_requested[g] = max(out.m_requested.get(g, 0), m)
        return out


def score_questions(
    questions: Sequence[tuple[int, PoisoningCase]],
    grid: Grid,
    seeds: Sequence[int],
    defenses: Mapping[str, PassageFilter | None],
    bank: VectorBank,
    benign: Mapping[str, Sequence[str]],
    *,
    context_k: int = 5,
    base_size: int = 5,
    n_golden: int = 1,
    generator: Generator | None = None,
    log: Callable[[str], None] | None = None,
) -> QuestionScores:
    """Filter (and answer) every retrieval set of ``questions`` and score it.

    ``questions`` pairs each case with its position in the split: the position seeds the
    set's random draws, so a question's sets are the same whether it is scored alone or
    with the whole split.
    """
    say = log or (lambda _msg: None)
    gen = answer_once(generator)
    out = QuestionScores()
    # the same sets whether ``questions`` is the whole split or a worker's share of it
    sets_for = partial(
        build_retrieval_sets,
        [c for _, c in questions],
        benign=benign,
        positions=[i for i, _ in questions],
        base_size=base_size,
        n_golden=n_golden,
    )
    for g, (attack, ratio) in enumerate(grid):
        name = CLEAN if attack is None else attack_name(attack)
        t_setting = time.perf_counter()
        out.m_requested[g] = 0
        for si, seed in enumerate(seeds):
            sets = sets_for(attack, ratio, seed, bank)
            out.m_used[(g, si)] = [rs.m_used for rs in sets]
            out.m_requested[g] = sets[0].m_requested if sets else 0
            for dname, flt in defenses.items():
                rows = []
                for rs in sets:
                    t0 = time.perf_counter()
                    kept_text: dict[int, str] = {}
                    if flt is None:
                        removed = np.zeros(len(rs.passages), dtype=bool)
                    else:
                        res = flt.filter(rs.case.question, rs.passages)
                        removed = _removed_mask(rs, res.kept)
                        kept_text = _kept_text(rs, res.kept)
                    ms = (time.perf_counter() - t0) * 1000.0
                    row = score_filter(rs, removed, context_k, kept_text)
                    row["filter_ms"] = ms
                    if gen is not None:
                        ctx = M.context_indices([p.score for p in rs.passages], removed, context_k)
                        ctx_texts = context_texts(rs, ctx, kept_text)
                        answer = gen.generate(rs.case.question, ctx_texts).text
                        row["asr"] = float(
                            M.response_attack_success(answer, rs.case.incorrect_answer)
                        )
                        row["accuracy"] = float(M.response_correct(answer, rs.case.correct_answer))
                    rows.append(row)
                out.rows[(g, si, dname)] = rows
        say(f"{name} {ratio:g}x: {time.perf_counter() - t_setting:.1f}s")
    return out


def settings_from_scores(
    scores: QuestionScores,
    grid: Grid,
    seeds: Sequence[int],
    defenses: Sequence[str],
    n_questions: int,
) -> list[SettingResult]:
    """Aggregate per-question rows into one :class:`SettingResult` per (defense, setting):
    each seed's metrics come from the counts summed over all questions."""
    settings: list[SettingResult] = []
    for g, (attack, ratio) in enumerate(grid):
        name = CLEAN if attack is None else attack_name(attack)
        m_used = [m for si in range(len(seeds)) for m in scores.m_used[(g, si)]]
        for dname in defenses:
            seed_rows = [aggregate(scores.rows[(g, si, dname)]) for si in range(len(seeds))]
            keys = seed_rows[0].keys()
            settings.append(
                SettingResult(
                    defense=dname,
                    attack=name,
                    ratio=ratio,
                    m_requested=scores.m_requested[g],
                    m_used=float(np.mean(m_used)) if m_used else 0.0,
                    n_questions=n_questions,
                    per_seed={k: [r[k] for r in seed_rows] for k in keys},
                )
            )
    return settings
