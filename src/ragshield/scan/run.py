"""``ragshield scan``: red-team your own index offline, on a copy, and pick a defense.

Example::

    from ragshield.scan.run import run_scan
    from ragshield.scan.questions import read_questions

    scan = run_scan("my-index", read_questions("questions.jsonl"), out_dir="scan-my-index")
    print(scan.recommendation.chain, scan.out_dir / "report.html")

Why: a defense's published numbers come from someone else's corpus. This runs the
real-retrieval harness (:mod:`ragshield.eval.real_retrieval`) on the user's index: every
attack setting is planted into an in-memory *copy* (a pgvector table is copied into FAISS
first), every question is retrieved for real, and each defense chain filters the top-k.
The user's index is only read.

Attack texts: :func:`ragshield.eval.plant.attack_passages` (LLM-written with ``attack_writer``,
else labelled templates); ``extraction`` scores RAG-Thief's and the worm's CRR per chain.

The recommended chain is the one with the lowest risk averaged over the attack settings,
among the chains whose clean quality is within :data:`ACCURACY_TOLERANCE` of no defense.
With a ``generator`` both are end to end (risk = ``asr``, quality = ``accuracy``: a filter
can keep the answer-bearing passage yet change what a small model answers); without one,
``attack_reaches`` and ``answer_kept`` (``gold_kept`` when no question has an answer).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.defenses.base import PassageFilter, warm_up
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_int
from ragshield.eval.adaptive_eval import run_settings
from ragshield.eval.ontopic import OnTopicData, QACase
from ragshield.eval.plant import WHITEBOX
from ragshield.eval.real_retrieval import QuestionTrace, RealResults
from ragshield.generate.base import Generator
from ragshield.scan.cell_cost import CellCost
from ragshield.scan.extraction import SETTING as EXTRACTION
from ragshield.scan.extraction import ExtractionCell, run_scan_extraction
from ragshield.scan.gate import Gate
from ragshield.scan.questions import ScanQuestion, decoy_targets
from ragshield.scan.report import example_of
from ragshield.scan.writer import AttackTextWriter, texts_for
from ragshield.store.faiss_store import FaissStore
from ragshield.text import contains_answer

DEFAULT_ATTACKS: tuple[str, ...] = (
    "clean",
    "poisonedrag",
    "mixed-2x",
    "injection-prefixed",
    "injection-hijack",
    "suffix",
)
DEFAULT_DEFENSES: tuple[str, ...] = ("none", "ragdefender", "ecosaferag", "ragdefender,ecosaferag")
#: Clean accuracy a recommended chain may lose against no defense (1 point).
ACCURACY_TOLERANCE = 0.01
#: Written into every scan output directory; a directory without it is never written to.
MARKER = ".ragshield-scan"
OUTPUT_FILES = ("results.json", "results.jsonl", "report.html")
_EXAMPLES_PER_CELL = 8  # audited questions kept per (setting, defense) for the report


@dataclass(frozen=True)
class Recommendation:
    """The chosen chain and why; ``eligible`` = chains within the accuracy tolerance."""

    chain: str
    risk: float  # mean of ``risk_metric`` over the attack settings
    clean_quality: float
    baseline_quality: float
    quality_metric: str
    eligible: tuple[str, ...]
    reason: str
    risk_metric: str = "attack_reaches"


@dataclass(frozen=True)
class ScanResult:
    """Everything a scan measured; ``examples`` are audited questions for the report."""

    index: str
    store_kind: str
    n_passages: int
    question_source: str
    questions: tuple[QACase, ...]
    results: RealResults
    recommendation: Recommendation
    timings: dict[str, float]  # seconds per stage; "report" is added when it is written
    examples: tuple[Mapping[str, Any], ...] = ()
    out_dir: Path | None = None
    notes: Mapping[str, Any] = field(default_factory=dict)
    extraction: tuple[ExtractionCell, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.results.to_dict(),
            "index": self.index,
            "store": self.store_kind,
            "n_passages": self.n_passages,
            "n_questions": len(self.questions),
            "question_source": self.question_source,
            "recommendation": self.recommendation.__dict__
            | {"eligible": list(self.recommendation.eligible)},
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "scan_notes": dict(self.notes),
            "extraction": [c.__dict__ for c in self.extraction],
        }


# ---- the index ---------------------------------------------------------------------------


def open_scan_store(index_path: str | os.PathLike[str]) -> tuple[FaissStore, Encoder, str]:
    """The index as an in-memory FAISS store the scan may copy, its query encoder and its
    kind. A pgvector table is read into FAISS (rows are only SELECTed)."""
    from ragshield.indexing import open_index

    path = Path(index_path)
    if not path.is_dir():
        raise InputError(f"index {path} is not a directory (build one with: ragshield index)")
    store, encoder = open_index(path)
    if isinstance(store, FaissStore):
        return store, encoder, "faiss"
    return _copy_table(store), encoder, type(store).__name__


def _copy_table(store: Any) -> FaissStore:
    """Every row of a store through its ``export()`` (no SQL outside ``store/``)."""
    export = getattr(store, "export", None)
    if not callable(export):
        raise InputError(f"cannot scan a {type(store).__name__} index: no way to read its rows")
    passages, vectors = export()
    if not passages:
        raise InputError(f"the {type(store).__name__} index is empty: nothing to scan")
    out = FaissStore(int(vectors.shape[1]), encoder_name=getattr(store, "encoder_name", ""))
    out.add(passages, vectors)
    return out


# ---- questions -> cases ------------------------------------------------------------------


def to_cases(
    questions: Sequence[ScanQuestion], store: FaissStore, encoder: Encoder, *, split: str
) -> tuple[list[QACase], int]:
    """QACases: gold = the passages holding a given answer, else the top-1 retrieved one;
    the attacker's target from :func:`decoy_targets`.

    Returns the cases and how many fell back to top-1 gold."""
    if not questions:
        raise InputError("no questions to scan")
    top1 = store.search(encoder.encode([q.question for q in questions]), 1)
    targets = decoy_targets(questions, store.passages)
    fallback = 0
    cases: list[QACase] = []
    for i, (q, hit) in enumerate(zip(questions, top1, strict=True)):
        gold = tuple(
            p.id for p in store.passages if any(contains_answer(p.text, a) for a in q.answers)
        )
        if not gold:
            fallback += 1
            gold = (hit[0].id,)
        cases.append(
            QACase(f"q{i}", q.question, q.answers, gold, "scan", split, target_answer=targets[i])
        )
    return cases, fallback


# ---- recommendation ----------------------------------------------------------------------


def recommend(
    results: RealResults, chains: Sequence[str], quality: str, risk: str = "attack_reaches"
) -> Recommendation:
    """Lowest mean ``risk`` among chains that keep clean ``quality`` within
    :data:`ACCURACY_TOLERANCE` of no defense; ties go to higher quality, then speed."""
    attacked = sorted({r.setting for r in results.rows if r.setting != "clean"})
    clean = {c: results.get(c, "clean").metrics for c in chains}
    base_name = "none" if "none" in chains else max(chains, key=lambda c: clean[c][quality])
    base = clean[base_name][quality]
    eligible = [c for c in chains if clean[c][quality] >= base - ACCURACY_TOLERANCE - 1e-9]

    def mean_risk(c: str) -> float:
        vals = [results.get(c, s).metrics[risk] for s in attacked]
        return float(np.mean(vals)) if vals else 0.0

    best = min(eligible, key=lambda c: (mean_risk(c), -clean[c][quality], clean[c]["filter_ms"]))
    dropped = [c for c in chains if c not in eligible]
    reason = (
        f"lowest mean {risk} ({mean_risk(best):.3f} over {len(attacked)} attack settings) "
        f"among chains keeping clean {quality} within {ACCURACY_TOLERANCE:.2f} of "
        f"{base_name!r} ({base:.3f})"
    )
    if dropped:
        lost = ", ".join(f"{c} ({clean[c][quality]:.3f})" for c in dropped)
        reason += f"; excluded for {quality} loss: {lost}"
    return Recommendation(
        best, mean_risk(best), clean[best][quality], base, quality, tuple(eligible), reason, risk
    )


# ---- output directory --------------------------------------------------------------------


def check_scan_out(out_dir: str | os.PathLike[str]) -> Path:
    """Refuse an ``out_dir`` the scan may not write — a file, a foreign non-empty folder,
    an index folder, an unwritable or impossible path (``/proc/x``, ``FILE/sub``) — without
    writing anything (issue #27, root cause 10)."""
    out = Path(out_dir)
    try:
        if out.exists():
            if not out.is_dir():
                raise InputError(f"--out {out} is a file; choose a directory")
            if (out / "meta.json").is_file() and not (out / MARKER).is_file():
                raise InputError(f"--out {out} is an index folder; choose another --out")
            if any(out.iterdir()) and not (out / MARKER).is_file():
                raise InputError(
                    f"refusing to write into {out}: it is not a ragshield scan output "
                    f"(no {MARKER}); choose another --out"
                )
        from ragshield.store.persist import is_index_dir, writable_ancestor

        inside = next((a for a in out.resolve().parents if is_index_dir(a)), None)
        if inside is not None:
            raise InputError(
                f"--out {out} is inside the index folder {inside}; choose another --out"
            )
        writable_ancestor(out, f"--out {out}")
    except OSError as exc:
        raise InputError(f"cannot write --out {out}: {exc.strerror or exc}") from None
    return out


def prepare_out_dir(out_dir: str | os.PathLike[str]) -> Path:
    """Create ``out_dir``, or reuse it when a previous scan wrote it (it holds
    :data:`MARKER`); refuse any other non-empty path (:func:`check_scan_out`)."""
    out = check_scan_out(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MARKER).write_text("written by ragshield scan\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write --out {out}: {exc.strerror or exc}") from None
    return out


# ---- the scan ----------------------------------------------------------------------------


@contextmanager
def _timed(
    timings: dict[str, float],
    cpu: dict[str, float],
    stage: str,
    tokens: dict[str, dict[str, int]] | None = None,
) -> Iterator[None]:
    """Wall seconds of ``stage`` into ``timings``, the process's CPU seconds (all threads)
    into ``cpu``: on a shared machine the wall time says little without the CPU time. With
    ``tokens``, the local engines' prompt tokens and answer-cache hits counted during the
    stage (:mod:`ragshield.generate.counters`): counts, which the load does not move."""
    from ragshield.generate import counters

    t0, c0, n0 = time.perf_counter(), time.process_time(), counters.snapshot()
    yield
    timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - t0
    cpu[stage] = cpu.get(stage, 0.0) + time.process_time() - c0
    if tokens is not None and (moved := counters.since(n0)):
        tokens[stage] = moved


def _bar(show: bool, desc: str, unit: str, total: int | None = None) -> Any:
    """A transient progress bar, shown only when ``show`` (the CLI's progress flag)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not show, leave=False)


def build_chains(specs: Sequence[str], encoder: Encoder) -> dict[str, PassageFilter | None]:
    """One warmed-up chain per spec through the defense registry (``none`` = no filter)."""
    from ragshield.defenses.registry import build_chains as registry_chains

    if not specs:
        raise InputError("no defense chain to scan; e.g. --defenses 'none;ragdefender'")
    chains: dict[str, PassageFilter | None] = {}
    for label, chain in registry_chains(specs, encoder).items():
        if chain is not None:
            chain.warm_up()
        chains[label] = chain
    return chains


def run_scan(
    index_path: str | os.PathLike[str],
    questions: Sequence[ScanQuestion],
    *,
    attacks: Sequence[str] = DEFAULT_ATTACKS,
    defenses: Sequence[str] = DEFAULT_DEFENSES,
    k: int = 10,
    context_k: int = 5,
    seed: int = 0,
    generator: Generator | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    question_source: str = "questions file",
    show_progress: bool = False,
    opened: tuple[FaissStore, Encoder, str] | None = None,
    timings: dict[str, float] | None = None,
    attack_writer: AttackTextWriter | None = None,
    attacker: Generator | None = None,
    extraction_queries: int = 10,
    formats: Sequence[str] = ("html", "json", "jsonl"),
    gate: Gate | None = None,
    whitebox_steps: int = 30,
) -> ScanResult:
    """Scan ``index_path`` (see the module docstring); with ``out_dir``, write
    ``results.json``, ``results.jsonl`` and ``report.html`` there. ``opened`` passes an
    already opened :func:`open_scan_store` (e.g. after generating questions from it), and
    ``timings`` the seconds its caller already spent per stage. ``attack_writer`` writes
    the attack texts; ``attacker`` is RAG-Thief's LLM for the ``extraction`` setting.
    ``formats`` names the files written (:mod:`ragshield.scan.formats`) and ``gate``
    the ``--fail-on`` rules they report (:mod:`ragshield.scan.gate`). ``whitebox_steps``
    is the HotFlip steps per passage of the opt-in ``poisonedrag-whitebox`` setting (its
    cost grows linearly with them)."""
    check_int(whitebox_steps, "whitebox_steps", "run_scan", low=0)  # before any long work
    timings = dict(timings or {})
    cpu: dict[str, float] = {}
    if out_dir is not None:
        check_scan_out(out_dir)  # created at the end: a failed scan leaves no empty folder
    with _timed(timings, cpu, "open_index"):
        store, encoder, kind = opened or open_scan_store(index_path)
        warm_up(encoder)  # the model load counts as opening, not as question time
    # clean anchors the recommendation; extraction is scored apart (CRR, not reaches)
    settings = [s for s in dict.fromkeys(["clean", *attacks]) if s != EXTRACTION]
    with _timed(timings, cpu, "questions"):
        split = f"scan seed {seed}"
        cases, fallback = to_cases(questions, store, encoder, split=split)
    with _timed(timings, cpu, "build_defenses"):
        chains = build_chains(defenses, encoder)
    tokens: dict[str, dict[str, int]] = {}
    notes: dict[str, Any] = {
        "gold_from_top1": fallback,
        "generator": getattr(generator, "name", ""),
        "cpu_s": cpu,  # CPU seconds per stage, filled as the stages run
        "prompt_tokens": tokens,  # engine counts per LLM stage, likewise
    }
    if attack_writer is not None and len(settings) > 1:
        text_of = {p.id: p.text for p in store.passages}
        golden = {c.id: text_of[c.gold_ids[0]] for c in cases if c.gold_ids[0] in text_of}
        with (
            _timed(timings, cpu, "write_attacks", tokens),
            _bar(show_progress, "write attacks", "q", len(cases)) as wbar,
            _bar(show_progress, "write attack texts (batched replies)", "reply") as rbar,
        ):
            attack_writer.on_chunk = rbar.update
            cases = attack_writer.fill(
                cases, questions, golden, seed=seed, on_case=lambda _c: wbar.update(1),
                kinds=texts_for(settings))  # fmt: skip
        notes["attack_writer"] = attack_writer.writer.generated_by
        notes["attack_texts"] = dict(attack_writer.stats)
    if WHITEBOX in settings:  # opt-in: HotFlip steps against the index's own encoder
        from ragshield.scan.writer import whitebox_texts

        with (
            _timed(timings, cpu, "write_whitebox"),
            _bar(show_progress, "white-box passages", "q", len(cases)) as wbbar,
        ):
            cases = whitebox_texts(
                cases, encoder, steps=whitebox_steps, seed=seed,
                on_case=lambda _c: wbbar.update(1))  # fmt: skip
    if "prefix-llm" in settings and attack_writer is not None:  # opt-in: LLM paraphrases
        from ragshield.eval.adaptive_eval import paraphrase_texts

        with _timed(timings, cpu, "write_paraphrases", tokens):
            cases = paraphrase_texts(cases, attack_writer.writer)
    data = OnTopicData(Path(index_path).name, tuple(store.passages), tuple(cases))
    examples: dict[tuple[str, str], list[dict[str, Any]]] = {}

    bar = _bar(show_progress, "scan", "q", len(settings) * len(chains) * len(cases))

    by_cell = CellCost()  # engine counts and CPU s per (setting, chain)
    notes["cell_cost"] = by_cell.cells

    def on_question(t: QuestionTrace) -> None:
        by_cell.charge(f"{t.setting} / {t.defense}")
        bar.update(1)
        bar.set_postfix_str(f"{t.setting} / {t.defense}", refresh=False)
        cell = examples.setdefault((t.setting, t.defense), [])
        wanted = t.setting != "clean" and t.scores["adv_retrieved"] > 0
        if wanted and len(cell) < _EXAMPLES_PER_CELL:
            cell.append(example_of(t, context_k))

    with _timed(timings, cpu, "attack_and_filter", tokens):
        try:
            results = run_settings(  # filter-aware settings are searched per chain
                data,
                cases,
                chains,
                settings,
                encoder=encoder,
                k=k,
                context_k=context_k,
                seed=seed,
                split=split,
                generator=generator,
                base_store=store,
                novelty=getattr(store, "novelty", None),  # the index's own table; None: off
                on_question=on_question,
            )
        finally:
            bar.close()
    cells: list[ExtractionCell] = []
    if EXTRACTION in attacks:
        with _timed(timings, cpu, "extraction", tokens):
            cells, notes["extraction"] = _extraction(
                store,
                encoder,
                chains,
                generator,
                attacker,
                extraction_queries,
                k,
                context_k,
                seed,
                show_progress,
            )
    has_answers = any(c.answers for c in cases)
    if generator is not None and has_answers:  # end to end, see the module docstring
        quality, risk = "accuracy", "asr"
    else:
        quality, risk = ("answer_kept" if has_answers else "gold_kept"), "attack_reaches"
    rec = recommend(results, list(chains), quality, risk)
    scan = ScanResult(
        index=str(index_path),
        store_kind=kind,
        n_passages=len(store),
        question_source=question_source,
        questions=tuple(cases),
        results=results,
        recommendation=rec,
        timings=timings,
        examples=tuple(e for cell in examples.values() for e in cell),
        out_dir=Path(out_dir) if out_dir is not None else None,
        notes=notes,
        extraction=tuple(cells),
    )
    if out_dir is not None:
        write_outputs(scan, prepare_out_dir(out_dir), formats, gate)
    return scan


def _extraction(
    store: FaissStore,
    encoder: Encoder,
    chains: Mapping[str, PassageFilter | None],
    generator: Generator | None,
    attacker: Generator | None,
    queries: int,
    k: int,
    context_k: int,
    seed: int,
    show_progress: bool,
) -> tuple[list[ExtractionCell], list[str]]:
    """:func:`run_scan_extraction` with a progress bar over every query it may ask."""
    from ragshield.scan.extraction import extraction_attacks

    n_attacks = len(extraction_attacks(attacker)[0])
    with _bar(show_progress, "extraction", "query", len(chains) * n_attacks * queries) as bar:

        def tick(chain: str, attack: str) -> None:
            bar.update(1)
            bar.set_postfix_str(f"{attack} / {chain}", refresh=False)

        return run_scan_extraction(
            store,
            encoder,
            chains,
            generator=generator,
            attacker=attacker,
            max_queries=queries,
            k=k,
            context_k=context_k,
            seed=seed,
            on_query=tick,
        )


def write_outputs(
    scan: ScanResult, out: Path, formats: Sequence[str] = ("html", "json", "jsonl"),
    gate: Gate | None = None,
) -> None:  # fmt: skip
    """The named formats (:func:`ragshield.scan.formats.write_formats`): ``report.html``
    first (its time is part of ``results.json``), then the results."""
    from ragshield.scan.formats import write_formats

    write_formats(scan, out, formats, gate)
