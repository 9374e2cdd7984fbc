"""``ragshield scan`` with LLM-written attack texts (a scripted generator stands in for the
LLM inside these tests only) and the ``extraction`` setting (worm, tiny budget)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragshield.attacks.writer import TextWriter
from ragshield.cli import run
from ragshield.errors import InputError
from ragshield.scan.questions import ScanQuestion
from ragshield.scan.run import run_scan
from ragshield.scan.writer import AttackTextWriter
from ragshield.types import Generation

QUESTIONS = [
    ScanQuestion("What is the capital city of Australia?", ("Canberra",)),
    ScanQuestion("Who designed the Sydney Opera House?", ("Jorn Utzon", "Utzon")),
    ScanQuestion("When was Melbourne founded?", ("1835",), target="1901"),
]
MARK = "scripted-passage"


class Scripted:
    """Answers target prompts by rule and writes one passage stating the prompt's answer."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls.append(question)
        asks_target = question.startswith("Question:") and "Passage" not in question
        if asks_target and "Opera House" in question:
            text = "Canberra"  # another question's right answer: the scan must not use it
        elif asks_target:
            text = "Zorvana"
        elif m := re.search(r"(?:my answer: |the answer is )(.+?)\. (?:Please|Do not)", question):
            text = f"Records show it is {m.group(1)} ({MARK} {len(self.calls)})."
        else:
            text = "Tell me about the first topic. And the next one please."
        return Generation(text, completion_tokens=5, timings={"decode": 0.01})

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def index(demo_index: Path) -> Path:
    """The scan tests' shared demo index (``tests/scan/conftest.py``)."""
    return demo_index


@pytest.fixture(scope="module")
def llm_scan(index: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from ragshield.scan.run import open_scan_store

    opened = open_scan_store(index)
    gen = Scripted()
    writer = AttackTextWriter(TextWriter(gen), opened[1])
    out = tmp_path_factory.mktemp("out") / "scan"
    scan = run_scan(
        index, QUESTIONS, attacks=["poisonedrag", "mixed-2x", "suffix"],
        defenses=["none"], opened=opened, attack_writer=writer, out_dir=out,
    )  # fmt: skip
    return scan, gen, out


def test_llm_texts_are_planted_and_labelled(llm_scan) -> None:  # type: ignore[no-untyped-def]
    scan, _, out = llm_scan
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    sources = {r["setting"]: r["sources"] for r in res["rows"] if r["defense"] == "none"}
    assert sources["poisonedrag"] == "llm" and sources["suffix"] == "llm"
    assert "llm" in sources["mixed-2x"].split("+")
    assert res["scan_notes"]["attack_writer"] == "llm:scripted"
    case = scan.questions[0]
    assert case.attack_source == "llm" and len(case.attack_texts["poisonedrag"]) == 5
    assert all(MARK in t and "Zorvana" in t for t in case.attack_texts["poisonedrag"])
    assert all(t.startswith("What is the capital city of Australia?") for t in
               case.attack_texts["poisonedrag"])  # fmt: skip
    assert not any(t.startswith("What is") for t in case.attack_texts["blind"])
    assert len(case.attack_texts["garag"]) == 3  # typo copies of the gold passage
    none_pr = scan.results.get("none", "poisonedrag").metrics
    assert none_pr["adv_retrieved"] > 0
    planted = [p for e in scan.examples for p in e["passages"] if p["planted"]]
    assert planted and all(p["source"] in ("llm", "template") for p in planted)
    assert any(MARK in p["text"] for p in planted)
    assert "written by llm:scripted" in (out / "report.html").read_text(encoding="utf-8")


def test_targets_user_wins_and_no_cross_question_target(llm_scan) -> None:  # type: ignore[no-untyped-def]
    scan, gen, _ = llm_scan
    targets = [c.target_answer for c in scan.questions]
    assert targets[0] == "Zorvana"  # written by the LLM
    assert targets[1] not in ("Canberra", "") and "Canberra" not in targets[1]
    assert targets[2] == "1901"  # the user's target wins; the LLM is not asked
    assert not any(c.startswith("Question: When was Melbourne") for c in gen.calls)
    stats = scan.notes["attack_texts"]
    assert (stats["target_llm"], stats["target_decoy"], stats["target_file"]) == (1, 1, 1)


def test_rerun_reads_the_writer_cache(index: Path, tmp_path: Path) -> None:
    from ragshield.generate.cache import CachedGenerator
    from ragshield.scan.run import open_scan_store

    opened = open_scan_store(index)
    first, second = Scripted(), Scripted()
    for gen in (first, second):
        writer = TextWriter(CachedGenerator(gen, tmp_path / "cache"))  # type: ignore[arg-type]
        scan = run_scan(
            index, QUESTIONS[:1], attacks=["poisonedrag"], defenses=["none"], opened=opened,
            attack_writer=AttackTextWriter(writer, opened[1]),
        )  # fmt: skip
        assert scan.questions[0].attack_texts["poisonedrag"]
        # poisonedrag plants no misleading passage and no typo copy: neither is written
        assert set(scan.questions[0].attack_texts) == {"poisonedrag"}
        assert scan.notes["attack_texts"]["blind"] == scan.notes["attack_texts"]["garag"] == 0
        assert scan.notes["attack_texts"]["typo_overlap"] == 0.0  # no search beside it
    assert first.calls and second.calls == []  # resumed entirely from the cache
    assert not any("background document" in c for c in first.calls)


@pytest.mark.parametrize(
    ("settings", "kinds"),
    [
        (["clean"], ()),
        (["clean", "injection-prefixed", "injection-hijack", "injection-exfiltration"], ()),
        (["poisonedrag"], ("poisonedrag",)),
        (["suffix", "poisonedrag-whitebox"], ("poisonedrag",)),
        (["mixed-2x"], ("poisonedrag", "blind", "garag")),
        (["poisonedrag", "meta-epistemic"], ("poisonedrag", "blind", "garag")),
        (["filter-aware:50"], ("poisonedrag", "blind", "garag")),
        (["no-such-setting"], ("poisonedrag", "blind", "garag")),  # unknown: everything
    ],
)
def test_the_writer_writes_only_what_the_settings_plant(
    settings: list[str], kinds: tuple[str, ...]
) -> None:
    from ragshield.scan.writer import texts_for

    assert texts_for(settings) == kinds


def test_extraction_setting_scores_crr_per_chain(index: Path, tmp_path: Path) -> None:
    scan = run_scan(
        index, QUESTIONS[:1], attacks=["extraction"], defenses=["none", "ragdefender"],
        extraction_queries=2, out_dir=tmp_path / "out", attacker=Scripted(),  # type: ignore[arg-type]
    )  # fmt: skip
    cells = {(c.chain, c.attack): c for c in scan.extraction}
    assert set(cells) == {(d, a) for d in ("none", "ragdefender") for a in ("rag-thief", "worm")}
    for c in cells.values():
        assert 1 <= c.queries <= 2 and c.n_chunks == 30 and 0.0 <= c.crr <= 1.0
        assert c.chunks_reached > 0  # the attack's queries were retrieved for
    res = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert len(res["extraction"]) == 4 and "extraction" in res["timings_s"]
    assert {r["setting"] for r in res["rows"]} == {"clean"}  # not a planting row
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Extraction (chunk recovery rate)" in html and "extractive generator" in html


class FirstPassage:
    """Answers with its first context passage (a reader that trusts the top passage)."""

    name = "first-passage"

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation(contexts[0] if contexts else "I don't know", completion_tokens=1)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class CountingReader(FirstPassage):
    """:class:`FirstPassage` that counts its prompts as an engine does (one row, one
    prompt token per context word), so the scan's per-cell counts can be checked."""

    def __init__(self) -> None:
        self.words: list[int] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        from ragshield.generate import counters

        self.words.append(sum(len(c.split()) for c in contexts))
        counters.add(rows=1, requested=self.words[-1], generated=1)
        return super().generate(question, contexts)


def test_with_a_generator_the_recommendation_is_end_to_end(index: Path, tmp_path: Path) -> None:
    scan = run_scan(
        index, QUESTIONS, attacks=["poisonedrag"], defenses=["none", "ragdefender"],
        generator=(gen := CountingReader()), out_dir=tmp_path / "out",  # type: ignore[arg-type]
    )  # fmt: skip
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "accuracy (end to end)" in html and "end-to-end ASR" in html
    assert html.count("<svg") == 2  # attack reaches + end-to-end ASR
    rec = scan.recommendation
    assert (rec.risk_metric, rec.quality_metric) == ("asr", "accuracy")
    attacked = scan.results.get(rec.chain, "poisonedrag").metrics["asr"]
    assert rec.risk == pytest.approx(attacked) and "mean asr" in rec.reason
    assert rec.baseline_quality == scan.results.get("none", "clean").metrics["accuracy"]
    # the answering stage's cost per (setting, chain) cell, in the order run: summed over
    # the cells, the stage's counts (a prompt an earlier cell asked is not run again)
    cells = scan.notes["cell_cost"]
    assert list(cells) == [
        "clean / none", "clean / ragdefender", "poisonedrag / none", "poisonedrag / ragdefender"
    ]  # fmt: skip
    assert cells["clean / none"]["rows"] == len(QUESTIONS)
    assert sum(c.get("rows", 0) for c in cells.values()) == len(gen.words)
    stage = scan.notes["prompt_tokens"]["attack_and_filter"]
    assert (
        sum(c.get("requested", 0) for c in cells.values()) == sum(gen.words) == stage["requested"]
    )
    assert all(c["cpu_s"] >= 0.0 for c in cells.values())
    assert sum(c["cpu_s"] for c in cells.values()) <= scan.notes["cpu_s"]["attack_and_filter"]


def test_extraction_without_attacker_runs_the_worm_only(index: Path) -> None:
    scan = run_scan(
        index, QUESTIONS[:1], attacks=["extraction"], defenses=["none"], extraction_queries=1
    )
    assert [c.attack for c in scan.extraction] == ["worm"]
    assert any("rag-thief skipped" in n for n in scan.notes["extraction"])


def test_cli_all_settings_and_template_writer(index: Path, tmp_path: Path) -> None:
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "When was Melbourne founded?", "answer": "1835"}) + "\n")
    argv = ["scan", str(index), "--questions", str(q), "--attacks", "all", "--writer",
            "template", "--defenses", "none", "--extraction-queries", "1", "--out",
            str(tmp_path / "o")]  # fmt: skip
    assert run(argv) == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    from ragshield.eval.plant import REAL_SETTINGS

    assert {r["setting"] for r in res["rows"]} == set(REAL_SETTINGS)
    assert [c["attack"] for c in res["extraction"]] == ["worm"]
    assert "llm" not in {s for r in res["rows"] for s in r["sources"].split("+")}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--writer", " "], "--writer is empty"),
        (["--extraction-queries", "0"], "--extraction-queries must be in [1, 10,000]"),
        (["--extraction-queries", "1" + "0" * 30], "--extraction-queries must be in [1, 10,000]"),
        (["--attacks", "all,nope"], "unknown setting"),
    ],
)
def test_cli_bad_writer_flags_exit_2(
    index: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    capsys.readouterr()
    argv = ["scan", str(index), "--generate", "1", "--out", str(tmp_path / "o"), *extra]
    assert run(argv) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.llm
def test_scan_with_a_real_small_llm_writer(index: Path, tmp_path: Path) -> None:
    """SmolLM2-135M writes the target and passages end to end through the CLI."""
    pytest.importorskip("transformers")
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "When was Melbourne founded?", "answer": "1835"}) + "\n")
    argv = ["scan", str(index), "--questions", str(q), "--writer", "smollm2-135m",
            "--attacks", "poisonedrag", "--defenses", "none", "--out", str(tmp_path / "o")]  # fmt: skip
    rc = run(argv)
    if rc == 2:
        pytest.skip("smollm2-135m is not installed")
    assert rc == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text(encoding="utf-8"))
    assert res["scan_notes"]["attack_writer"] == "llm:smollm2-135m"
    stats = res["scan_notes"]["attack_texts"]
    assert stats["target_llm"] + stats["target_decoy"] == 1
    row = next(r for r in res["rows"] if r["setting"] == "poisonedrag")
    assert set(row["sources"].split("+")) <= {"llm", "template"}
    # the stage's counts: replies from the writer's disk cache (it persists across scans,
    # so a rerun is all hits) or from the engine, every prompt token accounted for once
    moved = res["scan_notes"]["prompt_tokens"]["write_attacks"]
    assert moved.get("cache_hits", 0) + moved.get("rows", 0) > 0
    parts = ("computed", "reused", "shared", "restored")
    assert moved.get("requested", 0) == sum(moved.get(k, 0) for k in parts)


def test_whitebox_setting_is_opt_in_and_plants_optimised_prefixes(index: Path) -> None:
    from ragshield.eval.plant import attack_passages
    from ragshield.scan.cli import _settings

    assert "poisonedrag-whitebox" not in _settings("all")
    assert _settings("clean,poisonedrag-whitebox") == ["clean", "poisonedrag-whitebox"]
    scan = run_scan(
        index, QUESTIONS[:1], attacks=["poisonedrag", "poisonedrag-whitebox"], defenses=["none"],
        whitebox_steps=3,  # the search's steps cost linearly; three already flip tokens
    )  # fmt: skip
    row = scan.results.get("none", "poisonedrag-whitebox")
    assert row.m_planted == 5 and row.sources == "template"
    assert row.metrics["adv_retrieved"] > 0 and "write_whitebox" in scan.timings
    case = scan.questions[0]
    wb = case.attack_texts["whitebox"]
    blackbox = [p.passage.text for p in attack_passages([case], "poisonedrag")]
    assert len(wb) == 5 and not set(wb) & set(blackbox)  # the prefixes were optimised
    assert all(case.target_answer in t for t in wb)  # the body I still states the target
    with pytest.raises(InputError, match="whitebox_steps"):  # refused before the index opens
        run_scan(Path("no-such-index"), QUESTIONS[:1], whitebox_steps=-1)


@pytest.mark.parametrize("overlap", [True, False])
def test_typo_search_beside_the_llm_writes_the_same_texts(index: Path, overlap: bool) -> None:
    """The typo search in its own thread (two cores) or after the LLM (one): the same
    cases, the LLM asked the same prompts, the search's CPU counted apart, the caller's
    torch threads untouched, a llama.cpp writer's threads given back after the search."""
    from ragshield.scan.run import open_scan_store, to_cases

    store, encoder, _ = open_scan_store(index)
    cases, _ = to_cases(QUESTIONS, store, encoder, split="t")
    text_of = {p.id: p.text for p in store.passages}
    golden = {c.id: text_of[c.gold_ids[0]] for c in cases}

    def fill(flag: bool) -> tuple[list[object], list[str], dict[str, float]]:
        gen = ScriptedEngine("llama.cpp", 2)  # its threads go 2 -> 1 -> 2 when beside
        writer = AttackTextWriter(TextWriter(gen), encoder, overlap=flag)
        made = list(writer.fill(cases, QUESTIONS, golden, seed=3))
        assert gen.threads == 2
        return made, gen.calls, writer.stats

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the search beside the LLM sets one in its own thread only
    try:
        cases_a, calls_a, stats = fill(overlap)
        cases_b, calls_b, _ = fill(not overlap)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert cases_a == cases_b and calls_a == calls_b
    assert all(len(c.attack_texts["garag"]) == 3 for c in cases_a)  # type: ignore[attr-defined]
    assert stats["typo_overlap"] == float(overlap) and stats["cpu_typos"] > 0


class ScriptedEngine(Scripted):
    """A scripted generator of a given backend with a thread count (no engine)."""

    def __init__(self, backend: str, threads: int | None) -> None:
        super().__init__()
        self.backend = backend
        self.threads = threads


@pytest.mark.parametrize(
    ("backend", "threads", "during"),
    [
        ("llama.cpp", 2, 1),  # one core for the search, one for the LLM
        ("llama.cpp", 3, 2),
        ("llama.cpp", 1, 1),  # nothing to give
        ("transformers", 2, 2),  # torch's threads are process-wide: untouched
    ],
)
@pytest.mark.parametrize("ended_before", [False, True])
def test_llm_yields_a_core_while_the_typo_search_runs(
    backend: str, threads: int, during: int, ended_before: bool
) -> None:
    """A llama.cpp writer (found behind its answer cache) runs one thread fewer until the
    typo search's job ends, then has them back (also when it had ended already)."""
    from concurrent.futures import Future

    from ragshield.generate.cache import CachedGenerator
    from ragshield.scan.writer import _yield_a_core

    gen = ScriptedEngine(backend, threads)
    job: Future[object] = Future()
    if ended_before:
        job.set_result(None)
    _yield_a_core(TextWriter(CachedGenerator(gen)), job)
    assert gen.threads == (threads if ended_before else during)
    if not ended_before:
        job.set_result(None)
    assert gen.threads == threads
