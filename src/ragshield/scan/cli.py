"""``ragshield scan``: a thin typer layer over :func:`ragshield.scan.run.run_scan`.

Example::

    ragshield scan my-index --questions questions.jsonl --fail-on "attack_reaches>0.2"
    ragshield scan --demo          # the shipped demo corpus, template questions and texts
    ragshield scan my-index --generate 20 --attacks all --generator qwen2.5-0.5b
    ragshield scan my-index --questions q.jsonl --format html,sarif,junit --fail-on "asr>0.1"

``--format`` picks the files written (:mod:`ragshield.scan.formats`: html, json, jsonl,
sarif, junit); every rate carries a 95 % Wilson interval and every setting its OWASP LLM
Top-10 2025 / MITRE ATLAS ids. ``--fail-on`` rules are checked against the interval's
bound (:mod:`ragshield.scan.gate`); ``--fail-on-point`` compares point estimates.

``--writer`` (who writes questions and attack texts): ``llm`` = the packaged Qwen2.5-0.5B
(the default for an index), ``template`` = fixed wordings, no model (the default for
``--demo``, so the demo runs in a minute), or any generator spec (``smollm2-135m``, a local
model folder, ``openai:<url>#<model>``). LLM replies and ``--generator`` answers are cached
on disk, so a stopped scan resumes.

Exit codes: 0 = scanned and every ``--fail-on`` rule held; 1 = a rule failed (for CI);
2 = bad input (index, questions file, flags), one line on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ragshield.cli_options import ContextKOpt, GeneratorOpt, RetrievedKOpt
from ragshield.errors import InputError

if TYPE_CHECKING:
    from ragshield.attacks.writer import TextWriter
from ragshield.scan.gate import (
    FailRule,
    Gate,
    check_metrics,
    evaluate,
    gate_failures,
    parse_rules,
)
from ragshield.scan.run import DEFAULT_ATTACKS, DEFAULT_DEFENSES, ScanResult

DEMO_QUESTIONS = 8
ALL = "all"  # every planting setting and the extraction setting


def check_rules(scan: ScanResult, rules: list[FailRule], *, point: bool = False) -> list[str]:
    """Failures over the *recommended* chain's attacked cells (every setting but clean):
    the configuration the report tells the user to deploy is the one CI gates on. Rules
    are checked against the 95 % interval's bound unless ``point``."""
    return gate_failures(evaluate(scan, Gate(tuple(rules), point)))


# every metric an attacked row carries (real_retrieval); asr/accuracy need --generator
_RULE_METRICS = frozenset(
    ("benign_removed", "touched", "gold_kept", "answer_kept", "filter_ms", "adv_retrieved",
     "attack_reaches", "adv_majority", "caught", "gold_retrieved")
)  # fmt: skip
MAX_GENERATE = 10_000  # questions --generate makes; more is a typo, not a scan
MAX_EXTRACTION_QUERIES = 10_000  # per extraction attack; RAGFort's longest run is 1,000 rounds


def check_sizes(
    k: int, context_k: int, generate: int | None, rules: list[FailRule], generator: str | None
) -> None:
    """Option checks that need no index: refused before --out exists or a model loads
    (``--context-k 0`` was silently 0 generator passages, ``--generate 10**12`` clamped,
    an unknown --fail-on metric refused only after the whole scan)."""
    if not 1 <= k <= 1000:
        raise InputError(f"--k must be in [1, 1000]. Got {k} instead.")
    if not 1 <= context_k <= k:
        raise InputError(f"--context-k must be in [1, --k={k}]. Got {context_k} instead.")
    if generate is not None and not 1 <= generate <= MAX_GENERATE:
        raise InputError(f"--generate must be in [1, {MAX_GENERATE:,}]. Got {generate} instead.")
    known = _RULE_METRICS | ({"asr", "accuracy"} if generator else set())
    for rule in rules:
        if rule.metric not in known:
            hint = " (asr needs --generator)" if rule.metric in ("asr", "accuracy") else ""
            raise InputError(
                f"--fail-on: unknown metric {rule.metric!r}{hint}; available: "
                f"{', '.join(sorted(known))}"
            )


def _show_progress() -> bool:
    if os.environ.get("RAGSHIELD_NO_PROGRESS", "") not in ("", "0") or os.environ.get("CI"):
        return False
    return sys.stderr.isatty()


def _demo_index(out: Path) -> Path:
    """The shipped demo corpus indexed into the scan's own output directory."""
    from ragshield.demo import demo_files
    from ragshield.indexing import index_corpus

    path = out / "demo-index"
    if not (path / "meta.json").is_file():
        index_corpus(demo_files()[0], path)
    return path


def _split(spec: str | None, sep: str, default: tuple[str, ...]) -> list[str]:
    if spec is None:
        return list(default)
    items = [s.strip() for s in spec.split(sep) if s.strip()]
    if not items:
        raise InputError(f"empty list {spec!r}")
    return items


def _settings(spec: str | None) -> list[str]:
    """``--attacks``: setting names, group names (``published``, ``adaptive``,
    ``injection``) or ``all`` = every setting of the table that is not opt-in, extraction
    included (the opt-in ``poisonedrag-whitebox`` / ``prefix-llm`` only when named: they
    cost gradient steps or model time per passage); ``filter-aware:N`` sets the budget."""
    from ragshield.attacks.settings import expand

    return expand(_split(spec, ",", DEFAULT_ATTACKS))


def _check_names(chains: list[str]) -> None:
    """Every defense name resolves before anything is opened or written."""
    from ragshield.defenses.registry import plan

    for spec in chains:
        p = plan(spec)
        other = ([p.index] if p.index else []) + list(p.wrappers)
        if other:
            raise InputError(
                f"--defenses {spec!r}: scan compares post-retrieval filters; {', '.join(other)} "
                "transforms the index or the generator (scan that index directly instead)"
            )


def scan(
    index: Annotated[
        str | None, typer.Argument(help="Index directory (FAISS or pgvector pointer).")
    ] = None,
    questions: Annotated[
        Path | None,
        typer.Option(help='JSONL: {"question": ..., "answer"?: str|list, "target"?: str}.'),
    ] = None,
    generate: Annotated[
        int | None,
        typer.Option(help="Make N questions from sampled passages instead (see --writer)."),
    ] = None,
    writer: Annotated[
        str | None,
        typer.Option(
            help="Who writes questions and attack texts: llm (packaged qwen2.5-0.5b), "
            "template, or a generator spec [llm; template with --demo]."
        ),
    ] = None,
    extraction_queries: Annotated[
        int, typer.Option(help="Queries per extraction attack and chain (setting extraction).")
    ] = 10,
    attacks: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated settings or groups (published, adaptive, injection), or "
            "all (+ extraction; poisonedrag-whitebox / prefix-llm only when named; "
            f"filter-aware:N = N black-box calls per target) [{','.join(DEFAULT_ATTACKS)}]."
        ),
    ] = None,
    defenses: Annotated[
        str | None,
        typer.Option(help=f"';'-separated chains [{';'.join(DEFAULT_DEFENSES)}]."),
    ] = None,
    generator: GeneratorOpt = None,  # also answer end to end (ASR)
    k: RetrievedKOpt = 10,
    context_k: ContextKOpt = 5,
    out: Annotated[
        Path | None, typer.Option("--out", help="Output directory [scan-<index name>].")
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            help="Exit 1 when the recommended chain breaks a rule on any attack setting, "
            "e.g. 'attack_reaches>0.05' or 'answer_kept<0.8' (repeat or comma-separate); "
            "checked against the 95% interval's bound (Wilson)."
        ),
    ] = None,
    fail_on_point: Annotated[
        bool,
        typer.Option(
            "--fail-on-point", help="Check --fail-on rules on point estimates (old behaviour)."
        ),
    ] = False,
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Comma-separated outputs: html,json,jsonl,sarif,junit [html,json,jsonl].",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for question sampling and attack texts.")] = 0,
    demo: Annotated[
        bool, typer.Option("--demo", help="Scan the shipped demo corpus (indexed into --out).")
    ] = False,
) -> None:
    """Red-team your own index offline (attacks planted in a copy) and write an HTML report."""
    from ragshield.defenses.base import warm_up
    from ragshield.scan.formats import parse_formats
    from ragshield.scan.questions import TEMPLATE_SOURCE, read_questions, template_questions
    from ragshield.scan.run import check_scan_out, open_scan_store, prepare_out_dir, run_scan
    from ragshield.scan.writer import AttackTextWriter, llm_questions

    console, err = Console(), Console(stderr=True)
    rules = parse_rules(fail_on)
    formats = parse_formats(format)
    if demo == (index is not None):
        raise InputError("give an INDEX directory, or --demo (not both)")
    if questions is not None and generate is not None:
        raise InputError("use --questions FILE or --generate N, not both")
    if index is not None and not Path(index).is_dir():
        raise InputError(f"index {index} is not a directory (build one with: ragshield index)")
    settings = _settings(attacks)
    check_metrics(rules, generator=bool(generator), extraction="extraction" in settings)
    gate = Gate(tuple(rules), fail_on_point)
    chains = _split(defenses, ";", DEFAULT_DEFENSES)
    _check_names(chains)
    check_sizes(k, context_k, generate, rules, generator)  # before --out or a model (#27)
    if not 1 <= extraction_queries <= MAX_EXTRACTION_QUERIES:
        raise InputError(
            f"--extraction-queries must be in [1, {MAX_EXTRACTION_QUERIES:,}]. "
            f"Got {extraction_queries} instead."
        )
    text_writer = _writer(writer or ("template" if demo else "llm"))
    qs = read_questions(questions) if questions is not None else None
    out_dir = out or Path(f"scan-{'demo' if demo else Path(str(index)).resolve().name}")
    n = generate if generate is not None else DEMO_QUESTIONS if demo else 0
    if qs is None and n == 0:
        raise InputError("no questions: pass --questions FILE or --generate N")
    # created now only when something is written into it before the scan (the demo index,
    # the answer cache); else at the end, so a refused scan leaves no folder (issue #27)
    (prepare_out_dir if demo or generator else check_scan_out)(out_dir)
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    index_path = _demo_index(out_dir) if demo else Path(str(index))
    opened = open_scan_store(index_path)
    warm_up(opened[1])  # the model load is part of opening the index
    timings["open_index"] = time.perf_counter() - t0
    if text_writer is not None:
        t0 = time.perf_counter()
        text_writer.warm_up()
        timings["load_writer"] = time.perf_counter() - t0
    if qs is None:
        t0 = time.perf_counter()
        if text_writer is None:
            qs, source = template_questions(opened[0].passages, n, seed), TEMPLATE_SOURCE
        else:
            qs = llm_questions(opened[0].passages, n, text_writer, seed)
            source = f"LLM questions ({text_writer.generated_by}, self-checked)"
        timings["generate_questions"] = time.perf_counter() - t0
    else:
        source = f"questions file {questions}"
    gen = None
    if generator:
        from ragshield.generate.factory import batch_job_options, make_generator

        cache = None if generator.strip() == "extractive" else out_dir / "cache" / "answers"
        gen = make_generator(generator, opened[1], cache_dir=cache, **batch_job_options(generator))
    attacker = text_writer.generator_ if text_writer is not None else None
    if attacker is None and gen is not None and gen.name != "extractive":
        attacker = gen
    err.print(f"scanning {index_path}: {len(opened[0])} passages, {len(qs)} questions …")
    result = run_scan(
        index_path, qs, attacks=settings, defenses=chains, k=k, context_k=context_k,
        seed=seed, generator=gen, out_dir=out_dir, question_source=source,
        show_progress=_show_progress(), opened=opened, timings=timings,
        attack_writer=AttackTextWriter(text_writer, opened[1]) if text_writer else None,
        attacker=attacker, extraction_queries=extraction_queries, formats=formats, gate=gate,
    )  # fmt: skip
    _print_summary(console, result)
    failures = check_rules(result, rules, point=fail_on_point)
    for f in failures:
        err.print(f"[red]FAIL[/red] {escape(f)}", highlight=False)
    if failures:
        raise typer.Exit(1)


def _writer(spec: str) -> TextWriter | None:
    """``--writer``: ``template`` = none; ``llm`` = the packaged default; else a spec."""
    from ragshield.attacks.writer import DEFAULT_WRITER_MODEL, TEMPLATE, TextWriter

    spec = spec.strip()
    if not spec:
        raise InputError("--writer is empty; use llm, template or a generator spec")
    if spec == TEMPLATE:
        return None
    from ragshield.generate.factory import batch_job_options

    spec = DEFAULT_WRITER_MODEL if spec == "llm" else spec
    return TextWriter(spec, local_options=batch_job_options(spec))


def _print_summary(console: Console, scan: ScanResult) -> None:
    r = scan.results
    chains = list(dict.fromkeys(row.defense for row in r.rows))
    rec = scan.recommendation  # the table shows what the recommendation was chosen on
    risk, quality = rec.risk_metric, rec.quality_metric
    table = Table("setting", *chains, title=f"{risk} (clean row: {quality})")
    for s in dict.fromkeys(row.setting for row in r.rows):
        key = quality if s == "clean" else risk
        table.add_row(s, *[f"{r.get(d, s).metrics[key]:.3f}" for d in chains])
    console.print(table)
    if scan.extraction:
        ext = Table("chain", "attack", "CRR", "recovered", "queries", "CRR curve",
                    title="extraction")  # fmt: skip
        for c in scan.extraction:
            ext.add_row(c.chain, c.attack, escape(c.crr_text), f"{c.recovered}/{c.n_chunks}",
                        str(c.queries), c.curve_text)  # fmt: skip
        console.print(ext)
    console.print(f"recommended: [bold]--filter {escape(rec.chain)}[/bold] ({escape(rec.reason)})")
    t = ", ".join(f"{k} {v:.1f}s" for k, v in scan.timings.items())
    console.print(f"time per stage: {t}", markup=False)
    if scan.out_dir is not None:
        files = [
            p.name
            for p in sorted(scan.out_dir.iterdir())
            if p.name.startswith(("report.", "results."))
        ]
        console.print(f"wrote in {scan.out_dir}: {', '.join(files)}", markup=False, soft_wrap=True)
