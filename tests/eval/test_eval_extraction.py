"""Extraction baselines (distance threshold, summarisation), the harness and its CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from ragshield.defenses.base import PassageFilter
from ragshield.defenses.extraction_baselines import DistanceThresholdFilter, SummarizingGenerator
from ragshield.errors import DataFormatError, InputError
from ragshield.eval import extraction as ex
from ragshield.eval import extraction_defenses as exd
from ragshield.eval import extraction_report as exr
from ragshield.eval import extraction_utility as exu
from ragshield.eval.cli.extraction import app
from ragshield.eval.extraction_data import (
    KnowledgeBase,
    UtilityQuestion,
    load_chatdoctor,
    load_knowledge_base,
)
from ragshield.types import Generation, Passage, RetrievedPassage

RECORDS = [
    {
        "instruction": "doctor",
        "input": "Doctor, I keep getting migraines with flashing lights.",
        "output": "That sounds like migraine with aura. Rest in a dark room and take ibuprofen. "
        "If it happens weekly we should discuss preventive medication.",
    },
    {
        "instruction": "doctor",
        "input": "My ankle is swollen after I twisted it playing football.",
        "output": "It is probably a sprain. Use rest, ice, compression and elevation. "
        "We will take an X-ray to rule out a fracture.",
    },
    {
        "instruction": "doctor",
        "input": "I am always thirsty and I urinate a lot at night.",
        "output": "Those are classic signs of diabetes. We need a fasting glucose test and an "
        "HbA1c. Metformin is the usual first medication.",
    },
    {
        "instruction": "doctor",
        "input": "I have had a dry cough for six weeks and it gets worse when I lie down.",
        "output": "A long dry cough that is worse lying down suggests reflux or asthma. We "
        "will try an inhaler and an acid reducer and take a chest X-ray.",
    },
    {
        "instruction": "doctor",
        "input": "My child has a high fever and pulls at her ear.",
        "output": "She likely has a middle ear infection. Give paracetamol for the fever; if "
        "it lasts more than two days she needs amoxicillin.",
    },
    {
        "instruction": "doctor",
        "input": "I feel tired all the time and my skin looks pale.",
        "output": "That can be iron deficiency anaemia. A blood count will tell us, and iron "
        "tablets with a change of diet usually help within weeks.",
    },
]


class CopyGenerator:
    """Test stand-in for an instruction-following LLM: copies its contexts, one per line."""

    name = "copy"

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation("\n".join(c.replace("\n", " ") for c in contexts))

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def kb_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kb") / "mini.json"
    path.write_text(json.dumps(RECORDS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def kb(kb_file: Path) -> KnowledgeBase:
    return load_chatdoctor(kb_file)


def _retrieved(encoder, texts: list[str]) -> list[RetrievedPassage]:  # type: ignore[no-untyped-def]
    vecs = encoder.encode(texts)
    return [RetrievedPassage(Passage(f"p{i}", t), 0.0, i, vecs[i]) for i, t in enumerate(texts)]


class TestDistanceThresholdFilter:
    def test_init_stores_args(self) -> None:
        f = DistanceThresholdFilter(None, threshold=0.3, metric="l2")
        assert (f.encoder, f.threshold, f.metric) == (None, 0.3, "l2")
        assert isinstance(f, PassageFilter)

    def test_keeps_close_drops_far(self, encoder) -> None:  # type: ignore[no-untyped-def]
        texts = [RECORDS[1]["input"], "The stock market closed higher on Friday."]
        res = DistanceThresholdFilter(encoder, threshold=0.5).filter(
            "I twisted my ankle and it is swollen", _retrieved(encoder, texts)
        )
        assert res.kept_ids == ["p0"] and res.removed_ids == ["p1"]
        (d,) = res.decisions
        assert d.index == 1 and d.scores["suspicion"] == pytest.approx(1 - d.scores["cosine"])
        assert d.scores["suspicion"] > 0.5

    def test_l2_matches_cosine(self, encoder) -> None:  # type: ignore[no-untyped-def]
        items = _retrieved(encoder, [r["input"] for r in RECORDS])
        q = "my ear hurts and I have a fever"
        cos = DistanceThresholdFilter(encoder, threshold=0.4).filter(q, items)
        l2 = DistanceThresholdFilter(encoder, threshold=float(np.sqrt(2 - 2 * 0.4)), metric="l2")
        assert l2.filter(q, items).kept_ids == cos.kept_ids

    def test_errors(self, encoder) -> None:  # type: ignore[no-untyped-def]
        items = _retrieved(encoder, ["a text about ears"])
        with pytest.raises(
            InputError,
            match=r"The 'threshold' parameter of DistanceThresholdFilter must be a float in "
            r"\[-1.0, 1.0\]. Got 3 instead.",
        ):
            DistanceThresholdFilter(encoder, threshold=3).filter("q", items)
        with pytest.raises(InputError, match="must be one of 'cosine', 'l2'"):
            DistanceThresholdFilter(encoder, metric="dot").filter("q", items)  # type: ignore[arg-type]
        with pytest.raises(InputError, match="needs an encoder"):
            DistanceThresholdFilter().filter("q", items)
        with pytest.raises(InputError, match="bare string"):
            DistanceThresholdFilter(encoder).filter("q", "not a list")  # type: ignore[arg-type]
        assert DistanceThresholdFilter(encoder).filter("q", []).kept == ()


class TestSummarizingGenerator:
    def test_keeps_top_sentences_in_order(self, encoder) -> None:  # type: ignore[no-untyped-def]
        gen = SummarizingGenerator(CopyGenerator(), encoder, max_sentences=1)
        ctx = RECORDS[2]["input"] + "\n" + RECORDS[2]["output"]
        out = gen.generate("Which medication is used first for diabetes?", [ctx])
        assert out.text == "Metformin is the usual first medication."
        assert out.details["summaries"] == [out.text]
        assert gen.name == "summarize+copy" and gen.count_tokens("a b") == 2

    def test_order_preserved_and_word_overlap_without_encoder(self) -> None:
        gen = SummarizingGenerator(CopyGenerator(), max_sentences=2)
        ctx = "Ice helps swelling. Football is popular. Compression helps swelling too."
        assert gen.summarize("what helps swelling", ctx) == (
            "Ice helps swelling. Compression helps swelling too."
        )
        with pytest.raises(InputError, match="The 'max_sentences' parameter"):
            SummarizingGenerator(CopyGenerator(), max_sentences=0).summarize("q", ctx)


class TestKnowledgeBase:
    def test_load_chatdoctor(self, kb: KnowledgeBase) -> None:
        assert len(kb.passages) == len(kb.questions) == 6
        p = kb.passages[0]
        assert (
            p.text.startswith(RECORDS[0]["input"]) and p.metadata["answer"] == RECORDS[0]["output"]
        )
        assert kb.questions[0].gold_ids == (p.id,)

    def test_subset_is_seeded(self, kb_file: Path) -> None:
        a = load_chatdoctor(kb_file, limit=3, seed=1)
        b = load_chatdoctor(kb_file, limit=3, seed=1)
        assert [p.id for p in a.passages] == [p.id for p in b.passages] and len(a.passages) == 3

    def test_bad_files(self, tmp_path: Path) -> None:
        bad = tmp_path / "bad.json"
        bad.write_text('[{"input": 1}]', encoding="utf-8")
        with pytest.raises(DataFormatError, match="record 0"):
            load_chatdoctor(bad)
        with pytest.raises(InputError, match="does not exist"):
            load_chatdoctor(tmp_path / "missing.json")
        with pytest.raises(InputError, match="shared data folder"):
            load_knowledge_base("chatdoctor", data_dir=tmp_path / "nope")


def test_load_wikipedia(shared_data: Path) -> None:
    kb = load_knowledge_base("wikipedia", data_dir=shared_data)
    assert len(kb.questions) == 200  # 100 NQ + 100 HotpotQA targets
    assert len({p.text for p in kb.passages}) == len(kb.passages)  # golden passages deduped
    ids = {p.id for p in kb.passages}
    assert all(q.answer and set(q.gold_ids) <= ids for q in kb.questions)
    sub = load_knowledge_base("wikipedia", data_dir=shared_data, limit=50, seed=3)
    assert len(sub.passages) == 50
    kept = {p.id for p in sub.passages}
    assert all(any(g in kept for g in q.gold_ids) for q in sub.questions)


class TestUtilityJudge:
    def test_rule(self, encoder, kb: KnowledgeBase) -> None:  # type: ignore[no-untyped-def]
        judge = exu.UtilityJudge(encoder, neighbours=2).fit(kb, encoder.encode(kb.texts))
        q = kb.questions[1]
        assert judge.correct(
            q, "It is probably a sprain. Use rest, ice, compression and elevation."
        )
        assert not judge.correct(q, RECORDS[1]["input"])  # echoing the question
        assert not judge.correct(q, RECORDS[2]["output"])  # the wrong record
        assert not judge.correct(q, "I don't know.")
        wiki = UtilityQuestion("when?", ("x",), answer="1889")
        assert judge.correct(wiki, "It opened in 1889.")
        assert not judge.correct(wiki, "It opened in 18890.")


class TestHarness:
    def test_run_and_report(self, encoder, kb: KnowledgeBase, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        vecs = encoder.encode(kb.texts)
        defenses = exd.standard_defenses(kb, encoder, CopyGenerator(), vectors=vecs)
        for d in defenses:
            d.top_k = 2
        factories = {
            "rag-thief": ex.attack_factory("rag-thief", encoder=encoder, max_queries=4),
            "worm": ex.attack_factory(
                "worm",
                encoder=encoder,
                max_queries=2,
                iterations=1,
                n_candidates=2,
                vocabulary=["fever", "ankle", "cough", "river"],
            ),
        }
        report = ex.run_extraction_eval(
            kb,
            defenses,
            factories,
            encoder,
            kb_vectors=vecs,
            topic_labels=np.array([0, 0, 1, 1, 2, 2]),
            budgets=[1, 2, 4],
            log_dir=tmp_path / "logs",
            cold_cache=False,
        )
        assert [(r.defense, r.attack) for r in report.rows] == [
            (d, a)
            for d in ("none", "distance-threshold", "summarization")
            for a in ("rag-thief", "worm")
        ]
        rows = {(r.defense, r.attack): r for r in report.rows}
        assert all(r.queries <= 4 for r in report.rows)
        # a copying generator without defense leaks; summarisation cuts every chunk down
        assert rows["none", "rag-thief"].crr > 0
        assert rows["summarization", "rag-thief"].crr < rows["none", "rag-thief"].crr
        # the copy holds the right doctor answer, diluted by the other retrieved record
        assert rows["none", "rag-thief"].accuracy >= 0.5
        assert rows["none", "rag-thief"].curve[-1] == (4, rows["none", "rag-thief"].crr)
        assert report.n_topics == 3
        md = report.to_markdown()
        assert "| none | rag-thief |" in md and "CRR %" in md
        assert "Relative mean CRR (vs none, averaged over attacks): none 1.00×" in md
        paths = report.save(tmp_path / "out")
        data = json.loads(paths["json"].read_text(encoding="utf-8"))
        assert len(data["rows"]) == 6 and data["rows"][0]["relative_crr"] == 1.0
        assert paths["markdown"].is_file()
        assert "plot" not in paths or paths["plot"].stat().st_size > 0
        log = (tmp_path / "logs" / "none__rag-thief.jsonl").read_text(encoding="utf-8")
        assert len(log.splitlines()) == rows["none", "rag-thief"].queries

    def test_canary_row_side_by_side(self, encoder, kb: KnowledgeBase, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
        """Issue #26: the canary row stops a copying generator (CRR 0, every copy caught),
        the undefended row leaks, and sessions run side by side give the same rows."""
        vecs = encoder.encode(kb.texts)
        base = exd.standard_defenses(kb, encoder, CopyGenerator(), vectors=vecs)[0]
        base.top_k = 2
        rows = [base, exd.canary_defense(kb, base, vecs)]
        factories = {"rag-thief": ex.attack_factory("rag-thief", encoder=encoder, max_queries=6)}
        kwargs = {"kb_vectors": vecs, "topic_labels": np.zeros(6, dtype=int), "cold_cache": False}
        one = ex.run_extraction_eval(kb, rows, factories, encoder, **kwargs)  # type: ignore[arg-type]
        many = ex.run_extraction_eval(
            kb,
            rows,
            factories,
            encoder,
            concurrency=4,
            log_dir=tmp_path,
            **kwargs,  # type: ignore[arg-type]
        )
        got = {r.defense: r for r in many.rows}
        assert [(r.defense, r.crr, r.queries) for r in many.rows] == [
            (r.defense, r.crr, r.queries) for r in one.rows
        ]
        assert got["none"].crr > 0 and got["none"].leaks == 0
        assert got["canary"].crr == 0 and got["canary"].leaks == got["canary"].queries
        assert got["canary"].utility_leaks == 6  # the copying stand-in copies every answer
        assert len(got["none"].curve) == got["none"].queries  # every prefix ...
        assert len(got["none"].curve_ci) == len(got["none"].curve)  # ... with its interval
        lo, hi = got["none"].curve_ci[-1]
        assert lo <= got["none"].crr <= hi
        logged = (tmp_path / "canary__rag-thief.jsonl").read_text(encoding="utf-8")
        assert all(json.loads(line)["leak"] for line in logged.splitlines())
        # the normal answers are logged too (the output checks' false positives, offline)
        util = [
            json.loads(line)
            for line in (tmp_path / "canary__utility.jsonl").read_text("utf-8").splitlines()
        ]
        assert len(util) == 6 and all(u["leak"] and len(u["passages"]) > 0 for u in util)
        assert {"query", "response", "correct"} <= set(util[0])

    @pytest.mark.parametrize(
        ("placement", "same_prompt"), [(None, True), ("head", False), ("sentence", False)]
    )
    def test_output_checks_row_sends_the_undefended_prompt(  # type: ignore[no-untyped-def]
        self, encoder, kb: KnowledgeBase, tmp_path: Path, placement: str | None, same_prompt: bool
    ) -> None:
        """Issue #26, the recommended chain: without markers (``placement=None``) the guard's
        model sees byte for byte the undefended row's (question, contexts), so a shared answer
        cache serves every answer of the second row (0 misses: its utility *is* the
        undefended one, and a replay of the undefended answers is the live run); markers
        change every prompt (every lookup misses)."""
        from ragshield.generate.cache import CachedGenerator

        class Short(CopyGenerator):
            """Answers with one word of its first context: never a copy."""

            def generate(self, question: str, contexts: Sequence[str]) -> Generation:
                return Generation(contexts[0].split()[-1] if contexts else "")

        cached = CachedGenerator(Short(), tmp_path / "cache")
        vecs = encoder.encode(kb.texts)
        base = exd.standard_defenses(kb, encoder, cached, vectors=vecs)[0]
        guarded = exd.canary_defense(kb, base, vecs, name="output-checks", placement=placement)
        questions = [q.question for q in kb.questions]
        plain = [base.pipeline().answer(q, k=base.top_k) for q in questions]
        hits, misses = cached.hits, cached.misses
        checked = [guarded.pipeline().answer(q, k=guarded.top_k) for q in questions]
        assert misses == len(questions) and hits == 0
        if same_prompt:
            assert (cached.hits - hits, cached.misses - misses) == (len(questions), 0)
            assert [a.text for a in checked] == [a.text for a in plain]
            assert guarded.store is base.store
        else:
            assert (cached.hits - hits, cached.misses - misses) == (0, len(questions))

    def test_errors(self, encoder, kb: KnowledgeBase) -> None:  # type: ignore[no-untyped-def]
        with pytest.raises(InputError, match="at least one defense"):
            ex.run_extraction_eval(kb, [], ["worm"], encoder)
        with pytest.raises(InputError, match="unknown extraction attack"):
            ex.attack_factory("thief", encoder=encoder, max_queries=1)

    def test_ragfort_rows_from_parts(self, encoder, kb: KnowledgeBase) -> None:  # type: ignore[no-untyped-def]
        (base,) = exd.standard_defenses(kb, encoder, CopyGenerator())[:1]
        assert exd.ragfort_defenses(base) == []
        rows = exd.ragfort_defenses(base, reindexed_store=base.store, cascade=CopyGenerator())
        assert [r.name for r in rows] == ["ragfort-inter", "ragfort-intra", "ragfort"]


@pytest.mark.slow
def test_smoke_on_shared_chatdoctor(encoder, shared_data: Path) -> None:  # type: ignore[no-untyped-def]
    """CI smoke: the real knowledge base (40-chunk seeded subset), extractive generator."""
    kb = load_knowledge_base("chatdoctor", data_dir=shared_data, limit=40, seed=0)
    vecs = encoder.encode(kb.texts)
    defenses = exd.standard_defenses(kb, encoder, vectors=vecs)
    factories = {
        "rag-thief": ex.attack_factory("rag-thief", encoder=encoder, max_queries=3),
        "worm": ex.attack_factory(
            "worm", encoder=encoder, max_queries=2, iterations=1, n_candidates=2
        ),
    }
    report = ex.run_extraction_eval(
        kb, defenses, factories, encoder, kb_vectors=vecs, n_questions=4, cold_cache=False
    )
    assert len(report.rows) == 6 and report.n_chunks == 40
    # legitimate questions reach their own record without defense
    none = next(r for r in report.rows if r.defense == "none")
    assert none.context_recall >= 0.8
    assert all(0.0 <= r.crr <= 1.0 and r.queries <= 3 for r in report.rows)


class TestCLI:
    def test_dry_run(self) -> None:
        res = CliRunner().invoke(app, ["--dry-run", "--max-queries", "7", "--attacks", "worm"])
        assert res.exit_code == 0, res.output
        assert "max_queries=7" in res.output and "attacks=worm" in res.output

    def test_bad_names(self) -> None:
        res = CliRunner().invoke(app, ["--dry-run", "--defenses", "none;magic"])
        assert isinstance(res.exception, InputError) and "magic" in str(res.exception)
        res = CliRunner().invoke(app, ["--dry-run", "--defenses", "ragfort-inter"])
        assert isinstance(res.exception, InputError) and "--ragfort-index" in str(res.exception)

    @pytest.mark.parametrize(
        ("rows", "marked"),
        [
            ("none;summarization", {}),
            # the recommended chain (no marker) and the markers row (issue #26, Session 8)
            ("none;output-checks;canary-head", {"output-checks": False, "canary-head": True}),
        ],
    )
    def test_calls_the_library(  # type: ignore[no-untyped-def]
        self, kb_file: Path, tmp_path: Path, monkeypatch, rows: str, marked: dict[str, bool]
    ) -> None:
        from ragshield.defenses.canary import CanaryGuard, codes_in

        seen: dict[str, object] = {}
        configs: dict[str, exd.DefenseConfig] = {}

        def fake_run(kb, defenses, attacks, encoder, **kw):  # type: ignore[no-untyped-def]
            seen.update(kb=kb, defenses=[d.name for d in defenses], attacks=sorted(attacks), **kw)
            configs.update((d.name, d) for d in defenses)
            return exr.ExtractionReport(kb.name, len(kb.passages), 1, {}, [])

        monkeypatch.setattr(ex, "run_extraction_eval", fake_run)
        res = CliRunner().invoke(
            app,
            [
                "--kb",
                str(kb_file),
                "--limit",
                "0",
                "--defenses",
                rows,
                "--max-queries",
                "3",
                "--out",
                str(tmp_path / "r"),
            ],
        )
        assert res.exit_code == 0, res.output
        assert seen["defenses"] == rows.split(";")
        for name, has_markers in marked.items():
            assert isinstance(configs[name].generator, CanaryGuard)
            texts = [p.text for p in configs[name].store.passages]
            assert all(bool(codes_in(t)) == has_markers for t in texts)
        if "output-checks" in marked:  # the undefended row's own store: identical prompts
            assert configs["output-checks"].store is configs["none"].store
        assert seen["attacks"] == ["rag-thief", "worm"] and seen["max_queries"] == 3
        assert (tmp_path / "r" / "extraction.md").is_file()


class TestOutFolder:
    """The extraction report writes only into a folder ragshield wrote (or a new one)."""

    def _report(self) -> exr.ExtractionReport:
        return exr.ExtractionReport("mini", 6, 1, {}, [])

    def test_save_refuses_a_users_folder(self, tmp_path: Path) -> None:
        (tmp_path / "extraction.md").write_text("my table", encoding="utf-8")
        (tmp_path / "notes.txt").write_text("keep", encoding="utf-8")
        with pytest.raises(InputError, match=r"holds files ragshield did not write \(notes.txt\)"):
            self._report().save(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["extraction.md", "notes.txt"]
        assert (tmp_path / "extraction.md").read_text(encoding="utf-8") == "my table"

    def test_save_reuses_its_own_folder(self, tmp_path: Path) -> None:
        from ragshield.eval.outdir import MARKER

        out = tmp_path / "r"
        self._report().save(out)
        assert (out / MARKER).is_file()
        (out / "my-notes.txt").write_text("added later", encoding="utf-8")  # marked: still ours
        paths = self._report().save(out)
        assert paths["markdown"].is_file() and (out / "my-notes.txt").is_file()

    def test_cli_refuses_before_running(
        self, kb_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from ragshield.eval.cli import extraction as extraction_cli

        def must_not_run(*args: object, **kwargs: object) -> None:
            raise AssertionError("the eval ran although --out was refused")

        monkeypatch.setattr(extraction_cli, "run_plan", must_not_run)
        (tmp_path / "data.csv").write_text("1,2", encoding="utf-8")
        for extra in ([], ["--dry-run"]):
            res = CliRunner().invoke(app, ["--kb", str(kb_file), "--out", str(tmp_path), *extra])
            assert isinstance(res.exception, InputError) and "data.csv" in str(res.exception)
        assert [p.name for p in tmp_path.iterdir()] == ["data.csv"]  # no logs/, no marker


@pytest.mark.parametrize(
    ("can_copy", "recovered", "expect"),
    [
        (False, {"none": 3, "canary": 0}, {"none": "cannot copy", "canary": "cannot copy"}),
        (
            True,
            {"none": 0, "canary": 0},
            {"none": "budget too small", "canary": "budget too small"},
        ),
        (True, {"none": 3, "canary": 0}, {"none": "", "canary": ""}),
    ],
)
def test_scan_cells_say_not_measured(
    can_copy: bool, recovered: dict[str, int], expect: dict[str, str]
) -> None:
    """Issue #26 item 5: a CRR that measures nothing is printed as "not measured: why"."""
    from ragshield.scan.extraction import ExtractionCell, mark_unmeasured

    cells = [
        ExtractionCell(
            c,
            "worm",
            n / 100,
            n,
            100,
            10,
            20,
            1.0,
            "max_queries",
            tuple(n / 100 * (i + 1) / 10 for i in range(10)),
        )
        for c, n in recovered.items()
    ]
    for cell in mark_unmeasured(cells, can_copy=can_copy):
        why = expect[cell.chain]
        if why:
            assert why in cell.not_measured and cell.crr_text.startswith("not measured: ")
            assert cell.curve_text == "-"
        else:
            assert cell.crr_text == f"{cell.crr:.4f}" and cell.curve_text.endswith(
                f" · 10: {cell.crr:.3f}"
            )


def test_utility_without_questions_is_not_measured_not_zero() -> None:
    """An attacks-only run (``--questions 0``) prints ``-`` for accuracy, never 0.0."""
    row = exr.ExtractionRow(
        defense="none", attack="worm", crr=0.1, recovered=5, n_chunks=50,
        topics_touched_share=0.0, intra_rate=0.0, accuracy=float("nan"),
        context_recall=float("nan"), queries=3, rounds=3, seconds=1.0, stop_reason="max_queries",
        distinct_chunks_parsed=0, chunks_reached=5,
    )  # fmt: skip
    report = exr.ExtractionReport("kb", 50, 1, {}, [row])
    line = report.to_markdown().splitlines()[-3]
    assert "| none | worm | 10.00 |" in line and "| - | - |" in line, line
