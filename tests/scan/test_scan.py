"""``ragshield scan`` on an index of the shipped demo corpus: the user's index is only read,
results and report are written, ``--fail-on`` gates, and bad input exits 2 with one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line

from ragshield.cli import run
from ragshield.demo import demo_files
from ragshield.eval.real_retrieval import RealResults, RealRow
from ragshield.scan.questions import read_questions, template_questions
from ragshield.scan.report import bar_chart
from ragshield.scan.run import MARKER, recommend
from ragshield.text import contains_answer
from ragshield.types import Passage

QUESTIONS = [
    {"question": "What is the capital city of Australia?", "answer": "Canberra"},
    {"question": "Who designed the Sydney Opera House?", "answer": ["Jorn Utzon", "Utzon"]},
    {"question": "When was Melbourne founded?", "answer": "1835", "target": "1901"},
]
# template texts here; the llm writer is tested in tests/scan/test_scan_llm.py
SCAN = ["--attacks", "clean,poisonedrag,injection-prefixed", "--defenses", "none;ragdefender"]
SCAN += ["--writer", "template"]


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scan")
    (root / "q.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8"
    )
    return root


@pytest.fixture(scope="module")
def scanned(work: Path, demo_index: Path) -> tuple[Path, int, dict[str, str], dict[str, str]]:
    before = _digest(demo_index)
    argv = ["scan", str(demo_index), "--questions", str(work / "q.jsonl"), *SCAN]
    rc = run([*argv, "--out", str(work / "out"), "--fail-on", "attack_reaches>1.0"])
    return work / "out", rc, before, _digest(demo_index)


def test_scan_leaves_the_index_unchanged(
    scanned: tuple[Path, int, dict[str, str], dict[str, str]],
) -> None:
    _, rc, before, after = scanned
    assert rc == 0  # the lenient rule holds
    assert before and before == after


def test_scan_writes_results_and_report(
    scanned: tuple[Path, int, dict[str, str], dict[str, str]],
) -> None:
    out = scanned[0]
    assert (out / MARKER).is_file()
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cells = {(r["defense"], r["setting"]) for r in res["rows"]}
    settings = ("clean", "poisonedrag", "injection-prefixed")
    assert cells == {(d, s) for d in ("none", "ragdefender") for s in settings}
    assert res["n_questions"] == 3 and res["n_passages"] == 30
    # The recommendation is the chain that stops the attacks at no clean cost, and the
    # table it was chosen from says so (on the demo index every planted passage reaches an
    # undefended context; RAGDefender removes them and keeps every clean answer).
    row = {(r["defense"], r["setting"]): r for r in res["rows"]}
    assert row["ragdefender", "clean"]["answer_kept"] == row["none", "clean"]["answer_kept"]
    for setting in ("poisonedrag", "injection-prefixed"):
        assert row["none", setting]["attack_reaches"] == 1.0
        assert row["ragdefender", setting]["attack_reaches"] == 0.0
    assert res["recommendation"]["chain"] == "ragdefender"
    assert res["recommendation"]["risk"] == 0.0
    assert {"open_index", "attack_and_filter", "report"} <= set(res["timings_s"])
    cpu = res["scan_notes"]["cpu_s"]  # CPU seconds beside every wall time the scan takes
    assert set(cpu) == set(res["timings_s"]) - {"report"} and cpu["attack_and_filter"] > 0
    assert res["scan_notes"]["prompt_tokens"] == {}  # no LLM: no engine counted a token
    none_pr = next(
        r for r in res["rows"] if r["defense"] == "none" and r["setting"] == "poisonedrag"
    )
    assert none_pr["adv_retrieved"] > 0  # the planted passages won retrieval in the copy
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6 and all(json.loads(x)["setting"] for x in lines)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<svg" in html and html.count("<table") >= 4
    assert f"--filter {res['recommendation']['chain']}" in html
    assert "When was Melbourne founded?" in html  # a worst/caught example is shown


def test_fail_on_rule_exits_1(
    work: Path, demo_index: Path, scanned: tuple[Path, int, dict[str, str], dict[str, str]]
) -> None:
    out = scanned[0]  # a previous scan's directory may be reused
    argv = ["scan", str(demo_index), "--questions", str(work / "q.jsonl"), "--out", str(out)]
    rc = run([*argv, "--attacks", "poisonedrag", "--defenses", "none", "--writer", "template",
              "--fail-on", "attack_reaches>0.0"])  # fmt: skip
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    reached = next(r["attack_reaches"] for r in res["rows"] if r["setting"] == "poisonedrag")
    assert reached > 0.0 and rc == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scan", "{tmp}/missing", "--generate", "2"], "is not a directory"),
        (["scan", "{idx}", "--questions", "{tmp}/bad.jsonl"], "bad.jsonl:2: malformed JSON"),
        (["scan", "{idx}", "--questions", "{tmp}/noq.jsonl"], "noq.jsonl:1: missing or empty string field 'question'"),
        (["scan", "{idx}", "--generate", "2", "--fail-on", "asr>>1"], "expected metric>value"),
        (["scan", "{idx}", "--generate", "2", "--out", "{tmp}/mine"], "not a ragshield scan"),
        (["scan", "{idx}"], "no questions"),
        (["scan", "{idx}", "--generate", "2", "--attacks", "nope", "--out", "{tmp}/o"],
         "unknown setting"),
        (["scan", "{idx}", "--generate", "2", "--defenses", "none;nope", "--out", "{tmp}/o"],
         "unknown defense 'nope'"),
        (["scan", "{idx}", "--generate", "2", "--defenses", "ragfort", "--out", "{tmp}/o"],
         "post-retrieval filters"),
    ],
)  # fmt: skip
def test_bad_input_exit_2(
    demo_index: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    (tmp_path / "bad.jsonl").write_text('{"question": "a?"}\n{oops\n', encoding="utf-8")
    (tmp_path / "noq.jsonl").write_text('{"answer": "x"}\n', encoding="utf-8")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my own file", encoding="utf-8")
    fail_line(capsys, [a.format(idx=demo_index, tmp=tmp_path) for a in args], message)
    assert (tmp_path / "mine" / "notes.txt").read_text(encoding="utf-8") == "my own file"
    assert not (tmp_path / "o").exists()  # names are checked before anything is written


def test_read_questions_forms(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    f.write_text('{"question": "a?", "answer": "x"}\n\n{"question": "b?"}\n', encoding="utf-8")
    qs = read_questions(f)
    assert [q.answers for q in qs] == [("x",), ()]


def test_template_questions_blank_their_answer() -> None:
    passages = [
        Passage("a", "Canberra is the capital city of Australia. It was founded in 1913."),
        Passage("b", "short."),
        Passage("c", "The Eiffel Tower in Paris was completed in 1889 for a fair."),
    ]
    qs = template_questions(passages, 5, seed=1)
    assert len(qs) == 2  # the passage without a usable sentence gives none
    for q in qs:
        assert "____" in q.question and q.answers[0] not in q.question
        assert any(contains_answer(p.text, q.answers[0]) for p in passages)


def _row(defense: str, setting: str, **m: float) -> RealRow:
    return RealRow(defense, setting, 10, 1.0, "template", {"filter_ms": 1.0, **m})


def test_recommend_excludes_chains_that_lose_accuracy() -> None:
    rows = (
        _row("none", "clean", answer_kept=0.9, attack_reaches=0.0),
        _row("none", "poisonedrag", attack_reaches=1.0),
        _row("a", "clean", answer_kept=0.895, attack_reaches=0.0),
        _row("a", "poisonedrag", attack_reaches=0.4),
        _row("b", "clean", answer_kept=0.7, attack_reaches=0.0),  # safest, but loses 20 points
        _row("b", "poisonedrag", attack_reaches=0.0),
    )
    res = RealResults("t", "s", 10, 5, 0, "enc", rows)
    rec = recommend(res, ["none", "a", "b"], "answer_kept")
    assert rec.chain == "a" and rec.eligible == ("none", "a")
    assert "b" in rec.reason


def test_recommend_end_to_end_excludes_a_chain_whose_answers_get_worse() -> None:
    # b keeps the answer passage as often as none (answer_kept) but its edited context
    # costs the generator 6 points of accuracy: end to end it must not be recommended
    rows = (
        _row("none", "clean", answer_kept=0.82, accuracy=0.38, asr=0.02),
        _row("none", "suffix", answer_kept=0.8, accuracy=0.06, asr=0.54),
        _row("a", "clean", answer_kept=0.82, accuracy=0.38, asr=0.02),
        _row("a", "suffix", answer_kept=0.82, accuracy=0.38, asr=0.04),
        _row("b", "clean", answer_kept=0.82, accuracy=0.32, asr=0.02),
        _row("b", "suffix", answer_kept=0.82, accuracy=0.32, asr=0.02),
    )
    res = RealResults("t", "s", 10, 5, 0, "enc", rows)
    rec = recommend(res, ["none", "a", "b"], "accuracy", "asr")
    assert rec.chain == "a" and rec.eligible == ("none", "a")
    assert rec.risk_metric == "asr" and rec.risk == pytest.approx(0.04)
    assert "b (0.320)" in rec.reason and "mean asr" in rec.reason


def test_bar_chart_escapes_names() -> None:
    svg = bar_chart({"<script>": {"x&y": 0.5}}, "t")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "x&amp;y" in svg


def _table_digest(uri: str, table: str) -> tuple[int, str]:
    import psycopg

    with psycopg.connect(uri) as conn:
        n, digest = conn.execute(
            f"SELECT count(*), md5(string_agg(id || title || text || embedding::text, '|' "
            f"ORDER BY row_id)) FROM {table}"
        ).fetchone()
    return int(n), str(digest)


def test_scan_reads_a_pgvector_table_without_writing_it(pg_uri: str, tmp_path: Path) -> None:
    from ragshield.scan.questions import ScanQuestion
    from ragshield.scan.run import run_scan

    idx = tmp_path / "pg-idx"
    argv = ["index", str(demo_files()[0]), "--out", str(idx), "--store", pg_uri]
    assert run([*argv, "--table", "scan_demo"]) == 0
    before = _table_digest(pg_uri, "scan_demo")
    qs = [ScanQuestion("What is the capital city of Australia?", ("Canberra",))]
    scan = run_scan(idx, qs, attacks=["poisonedrag"], defenses=["none"], k=5)
    assert scan.store_kind == "PgVectorStore" and scan.n_passages == 30
    assert scan.results.get("none", "poisonedrag").metrics["adv_retrieved"] > 0
    assert _table_digest(pg_uri, "scan_demo") == before == (30, before[1])
