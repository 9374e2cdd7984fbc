"""The poisoning harness: metrics, retrieval-set assembly, the run loop and the reports.

Unit tests use a tiny dataset in the shared data's schema and a bag-of-words hashing
encoder (a stand-in that only lives here); one slow test runs the real data and MiniLM.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragshield.defenses.baselines import SimilarityThresholdFilter
from ragshield.defenses.ragdefender import PaperRAGDefender, RAGDefender
from ragshield.errors import InputError
from ragshield.eval import metrics as M
from ragshield.eval.datasets import load_poisoning
from ragshield.eval.poisoning import run_poisoning_eval
from ragshield.eval.poisoning_sets import (
    VectorBank,
    build_retrieval_sets,
    register_attack,
    resolve_attack,
)
from ragshield.eval.report import markdown_table, plot_asr, write_json
from ragshield.types import FilterResult, Generation, Passage, RetrievedPassage

TOPICS = ["volcano", "violin", "glacier", "satellite", "orchid", "cathedral", "tractor"]


class HashingEncoder:
    """Bag-of-words vectors (sklearn HashingVectorizer), L2-normalised: test stand-in."""

    name = "hashing-test"
    dim = 512

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        from sklearn.feature_extraction.text import HashingVectorizer

        x = HashingVectorizer(n_features=self.dim, alternate_sign=False).transform(list(texts))
        v = np.asarray(x.toarray(), dtype=np.float32)
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-9)


def write_dataset(root: Path) -> Path:
    root.mkdir(parents=True)
    targets, poisoned, blind, garag = [], {}, [], []
    for i, t in enumerate(TOPICS):
        q = f"what is special about the {t}"
        targets.append({"id": f"q{i}", "question": q, "correct answer": f"right{i}",
                        "incorrect answer": f"wrong{i}"})  # fmt: skip
        poisoned[f"q{i}"] = {
            "id": f"q{i}",
            "adv_texts": [f"the {t} is special because of wrong{i} variant {k}" for k in range(5)],
        }
        gold = f"encyclopedia: the {t} is known for right{i} and many other {t} facts"
        blind += [{"query": q, "ground_truth": gold,
                   "adversarial_document": f"story {k} about a {t} and its fame"} for k in range(3)]  # fmt: skip
        garag += [{"query": q, "ground_truth": gold,
                   "adversarial_document": f"encyclopdia: teh {t} is knwn for right{i} v{k}"} for k in range(2)]  # fmt: skip
    for name, data in [("target_queries", targets), ("poisonedrag", poisoned),
                       ("blind", blind), ("garag", garag)]:  # fmt: skip
        (root / f"{name}.json").write_text(json.dumps(data))
    return root


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "toy")


@pytest.fixture
def bank() -> VectorBank:
    return VectorBank(HashingEncoder())


# --------------------------------------------------------------------------- metrics


class TestMetrics:
    def test_detection(self) -> None:
        removed = [True, True, False, False]
        adv = [True, False, True, False]
        assert M.detection_counts(removed, adv) == (1, 1, 1)
        assert M.detection_precision(1, 1) == 0.5
        assert M.detection_recall(1, 1) == 0.5
        assert math.isnan(M.detection_precision(0, 0))
        with pytest.raises(ValueError, match="shapes differ"):
            M.detection_counts([True], [True, False])

    def test_golden_and_count(self) -> None:
        assert M.golden_retained([False, True], [True, False]) == 1.0
        assert M.golden_retained([True, False], [True, False]) == 0.0
        assert math.isnan(M.golden_retained([True], [False]))
        assert M.n_adv_error([True, True, False], 5) == 3

    def test_context(self) -> None:
        scores = [0.1, 0.9, 0.5, 0.9, 0.7]
        removed = [False, False, False, True, False]
        assert M.context_indices(scores, removed, 3).tolist() == [1, 4, 2]
        assert M.context_indices([0.5, 0.5, 0.5], [False] * 3, 2).tolist() == [0, 1]  # stable

    @pytest.mark.parametrize(
        ("mask", "expected"),
        [([1, 1, 1, 0, 0], True), ([1, 1, 0, 0], False), ([], False), ([1], True)],
    )
    def test_majority(self, mask: list[int], expected: bool) -> None:
        assert M.adversarial_majority(np.array(mask, dtype=bool)) is expected

    def test_filter_attack_success(self) -> None:
        ctx = ["it has 24 episodes", "season 4 has 24 episodes", "it contained 23 episodes"]
        assert M.filter_attack_success(ctx, "24", "23")
        assert not M.filter_attack_success(ctx[1:], "24", "23")  # a tie is not a success
        assert not M.filter_attack_success(["born in 1924"], "24", "23")  # word boundaries

    def test_response_rules(self) -> None:
        assert M.response_attack_success("The answer is 24.", "24")
        assert not M.response_correct("The answer is 24.", "23")
        assert M.mean_std([1.0, 3.0, math.nan]) == (2.0, 1.0)
        assert all(math.isnan(v) for v in M.mean_std([math.nan]))


# --------------------------------------------------------------------------- retrieval sets


class TestRetrievalSets:
    def test_composition(self, dataset: Path, bank: VectorBank) -> None:
        cases = load_poisoning(dataset)
        sets = build_retrieval_sets(cases, "poisonedrag", 1, seed=0, encoder=bank)
        assert len(sets) == len(TOPICS)
        for rs, case in zip(sets, cases, strict=True):
            c = Counter(rs.sources)
            assert c == {"golden": 1, "benign": 4, "poisonedrag": 5}
            texts = [p.text for p in rs.passages]
            assert len(set(texts)) == len(texts)
            assert texts[rs.sources.index("golden")] == case.golden
            assert case.golden not in [
                t for t, s in zip(texts, rs.sources, strict=True) if s == "benign"
            ]
            for p in rs.passages:  # nothing in a passage reveals its label
                assert p.passage.metadata == {} and "adv" not in p.id and "gold" not in p.id
                assert p.score == pytest.approx(float(p.embedding @ bank.get([case.question])[0]))

    def test_single_attack_never_duplicates(self, dataset: Path, bank: VectorBank) -> None:
        rs = build_retrieval_sets(load_poisoning(dataset), "garag", 4, seed=0, encoder=bank)[0]
        assert rs.m_requested == 20
        assert rs.m_used == 2  # only two GARAG passages exist
        assert rs.attack == "garag" and rs.ratio == 4

    def test_mixed_interleaves_sources(self, dataset: Path, bank: VectorBank) -> None:
        rs = build_retrieval_sets(load_poisoning(dataset), "mixed", 1, seed=3, encoder=bank)[0]
        c = Counter(s for s in rs.sources if s not in ("golden", "benign"))
        assert c == {"poisonedrag": 2, "blind": 2, "garag": 1}
        rs6 = build_retrieval_sets(load_poisoning(dataset), "mixed", 6, seed=3, encoder=bank)[0]
        assert rs6.m_used == 5 + 3 + 2  # everything available, reported as used

    def test_seed_controls_shuffle_and_subset(self, dataset: Path, bank: VectorBank) -> None:
        cases = load_poisoning(dataset)
        a = build_retrieval_sets(cases, "mixed", 1, seed=1, encoder=bank)
        b = build_retrieval_sets(cases, "mixed", 1, seed=1, encoder=bank)
        c = build_retrieval_sets(cases, "mixed", 1, seed=2, encoder=bank)
        assert [p.text for p in a[0].passages] == [p.text for p in b[0].passages]
        assert any(
            [p.text for p in x.passages] != [p.text for p in y.passages]
            for x, y in zip(a, c, strict=True)
        )

    def test_clean(self, dataset: Path, bank: VectorBank) -> None:
        rs = build_retrieval_sets(load_poisoning(dataset), None, 0, seed=0, encoder=bank)[0]
        assert rs.attack == "clean" and rs.m_used == 0 and len(rs.passages) == 5

    def test_corpus_attack_plugs_in(self, dataset: Path, bank: VectorBank) -> None:
        class Echo:
            name = "echo"

            def craft(
                self, question: str, target_answer: str, n: int, *, seed: int = 0
            ) -> list[str]:
                return [f"{question} -> {target_answer} ({k})" for k in range(n)] + ["dup", "dup"]

        rs = build_retrieval_sets(load_poisoning(dataset), Echo(), 2, seed=0, encoder=bank)[0]
        assert Counter(rs.sources)["echo"] == 10
        register_attack("echo-test", Echo)
        assert isinstance(resolve_attack("echo-test"), Echo)

    def test_attack_names(self) -> None:
        with pytest.raises(InputError, match="unknown attack 'nope'"):
            resolve_attack("nope")
        with pytest.raises(InputError, match="reserved"):
            register_attack("mixed", "x:y")
        with pytest.raises(InputError, match="cannot load attack"):
            resolve_attack("no.such.module:Thing")
        with pytest.raises(InputError, match="names or CorpusAttack"):
            resolve_attack(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- run loop


class DropWrong:
    """Removes passages that state a 'wrong' answer: an oracle-like filter for the toy data."""

    name = "drop-wrong"

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        kept = tuple(r for r in retrieved if "wrong" not in r.text)
        removed = tuple(r for r in retrieved if "wrong" in r.text)
        return FilterResult(self.name, kept, removed)


class FirstContext:
    """Answers with the first context passage: a generator stand-in."""

    name = "first-context"

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls += 1
        return Generation(text=contexts[0] if contexts else "I don't know")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class TestRun:
    def test_metrics_per_defense(self, dataset: Path) -> None:
        res = run_poisoning_eval(
            dataset, {"none": None, "drop-wrong": DropWrong()}, attacks=["poisonedrag"],
            ratios=[1], seeds=[0, 1], encoder=HashingEncoder(),
        )  # fmt: skip
        assert [(s.defense, s.attack) for s in res.settings] == [
            ("none", "clean"), ("drop-wrong", "clean"),
            ("none", "poisonedrag"), ("drop-wrong", "poisonedrag"),
        ]  # fmt: skip
        none = res.get("none", "poisonedrag", 1)
        oracle = res.get("drop-wrong", "poisonedrag", 1)
        assert none.mean_std("recall")[0] == 0.0
        assert none.mean_std("clean_removed")[0] == 0.0
        assert none.mean_std("n_adv_error")[0] == 5.0
        assert none.mean_std("filter_asr")[0] > 0.5
        assert oracle.mean_std("recall") == (1.0, 0.0)
        assert oracle.mean_std("precision")[0] == 1.0
        assert oracle.mean_std("filter_asr")[0] == 0.0
        assert oracle.mean_std("gold_in_context")[0] == 1.0
        assert len(oracle.per_seed["recall"]) == 2
        assert none.m_used == 5.0 and none.n_questions == len(TOPICS)
        assert "asr" not in none.per_seed
        assert any("no generator" in n for n in res.notes)

    def test_generator_end_to_end(self, dataset: Path) -> None:
        gen = FirstContext()
        res = run_poisoning_eval(
            dataset, {"none": None, "drop-wrong": DropWrong()}, attacks=["poisonedrag"],
            ratios=[1], seeds=[0, 1], encoder=HashingEncoder(), generator=gen, limit=3,
        )  # fmt: skip
        none = res.get("none", "poisonedrag", 1)
        assert none.mean_std("asr")[0] == 1.0  # the top passage states the wrong answer
        assert res.get("drop-wrong", "poisonedrag", 1).mean_std("asr")[0] == 0.0
        assert res.get("drop-wrong", "clean", 0).mean_std("accuracy")[0] == 1.0
        assert res.generator == "first-context"
        assert gen.calls < 2 * 2 * 2 * 3  # identical contexts are generated once

    def test_split_and_limit(self, dataset: Path) -> None:
        res = run_poisoning_eval(dataset, {"none": None}, attacks=[], seeds=[0],
                                 encoder=HashingEncoder(), split="test", limit=2)  # fmt: skip
        assert res.n_questions == 2 and res.split == "test"

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"seeds": []}, "seeds is empty"),
            ({"defenses": {}}, "defenses is empty"),
            ({"ratios": [0]}, "ratios must be positive"),
            (
                {"context_k": 0},
                "The 'context_k' parameter of run_poisoning_eval must be an int >= 1",
            ),
            ({"attacks": ["nope"]}, "unknown attack"),
        ],
    )
    def test_bad_arguments(self, dataset: Path, kwargs: dict, message: str) -> None:
        args = {"defenses": {"none": None}, "seeds": [0], "encoder": HashingEncoder(), **kwargs}
        with pytest.raises(InputError, match=message):
            run_poisoning_eval(dataset, **args)

    def test_reports(self, dataset: Path, tmp_path: Path) -> None:
        res = run_poisoning_eval(
            dataset, {"none": None, "sim": SimilarityThresholdFilter(threshold=0.8)},
            attacks=["poisonedrag", "mixed"], ratios=[1, 2], seeds=[0, 1], encoder=HashingEncoder(),
        )  # fmt: skip
        table = markdown_table(res)
        assert "| attack | ratio | M used | defense | adv-majority |" in table
        assert "| poisonedrag | 2× | 5.0 | sim |" in table
        assert "seeds 0–1 (2)" in table and "no generator" in table
        data = json.loads(write_json([res, res], tmp_path / "out" / "r.json").read_text())
        assert data[0]["settings"][0]["mean"]["gold_in_context"] == 1.0
        assert data[0]["settings"][0]["mean"]["recall"] is None  # nan -> null
        png = plot_asr(res, tmp_path / "out" / "asr.png")
        assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_real_data_slice(shared_data: Path, encoder) -> None:
    """Six NQ questions, real MiniLM: the improved defense keeps clean sets whole and
    removes PoisonedRAG; the faithful one removes something from every clean set."""
    res = run_poisoning_eval(
        shared_data / "poisoning" / "nq",
        {"paper": PaperRAGDefender(), "ours": RAGDefender()},
        attacks=["poisonedrag"], ratios=[1], seeds=[0], encoder=encoder, limit=6,
    )  # fmt: skip
    assert res.get("ours", "clean", 0).mean_std("clean_removed")[0] == 0.0
    assert res.get("paper", "clean", 0).mean_std("clean_removed")[0] > 0.0
    ours = res.get("ours", "poisonedrag", 1)
    assert ours.mean_std("recall")[0] >= 0.9
    assert ours.mean_std("golden_retention")[0] >= 0.8
    assert ours.mean_std("adv_majority")[0] == 0.0


def test_sentence_level_rewrite_reaches_the_context() -> None:
    """A filter that trims a passage must be scored on the trimmed text, not the original."""
    from types import SimpleNamespace

    from ragshield.eval.poisoning import _kept_text, context_texts

    rs = SimpleNamespace(
        passages=[
            RetrievedPassage(Passage("a", "Keep this. Drop that."), 0.9, 0),
            RetrievedPassage(Passage("b", "Other."), 0.5, 1),
        ]
    )
    trimmed = [RetrievedPassage(Passage("a", "Keep this."), 0.9, 0), rs.passages[1]]
    kept = _kept_text(rs, trimmed)  # type: ignore[arg-type]
    assert kept == {0: "Keep this."}
    assert context_texts(rs, [0, 1], kept) == ["Keep this.", "Other."]  # type: ignore[arg-type]


class TestOutFolder:
    """``ragshield eval poisoning --out`` writes only where ragshield wrote (or nowhere)."""

    @pytest.fixture
    def results(self, dataset: Path):  # type: ignore[no-untyped-def]
        return run_poisoning_eval(dataset, {"none": None}, attacks=["poisonedrag"], ratios=[1],
                                  seeds=[0], encoder=HashingEncoder(), limit=2)  # fmt: skip

    def _argv(self, dataset: Path, out: Path) -> list[str]:
        return ["eval", "poisoning", str(dataset), "--defenses", "none", "--attacks",
                "poisonedrag", "--ratios", "1", "--seeds", "1", "--out", str(out)]  # fmt: skip

    def test_refuses_a_users_folder_before_running(
        self, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
    ) -> None:  # type: ignore[no-untyped-def]
        from ragshield.cli import run
        from ragshield.eval.cli import poisoning as poisoning_cli

        def must_not_run(*args: object, **kwargs: object) -> None:
            raise AssertionError("the eval ran although --out was refused")

        monkeypatch.setattr(poisoning_cli, "_run_in_process", must_not_run)
        user = tmp_path / "mine"
        user.mkdir()
        (user / "results.md").write_text("my notes", encoding="utf-8")
        (user / "thesis.tex").write_text("chapter 1", encoding="utf-8")
        assert run(self._argv(dataset, user)) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "thesis.tex" in err and "nothing was written" in err
        assert sorted(p.name for p in user.iterdir()) == ["results.md", "thesis.tex"]
        assert (user / "results.md").read_text(encoding="utf-8") == "my notes"
        a_file = tmp_path / "results.json"
        a_file.write_text("{}", encoding="utf-8")
        assert run(self._argv(dataset, a_file)) == 2
        assert a_file.read_text(encoding="utf-8") == "{}"

    def test_writes_a_new_folder_and_again_into_its_own(
        self, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, results
    ) -> None:  # type: ignore[no-untyped-def]
        from ragshield.cli import run
        from ragshield.eval.cli import poisoning as poisoning_cli
        from ragshield.eval.outdir import MARKER

        monkeypatch.setattr(poisoning_cli, "_run_in_process", lambda *a, **k: results)
        out = tmp_path / "new" / "run"
        assert run(self._argv(dataset, out)) == 0
        names = {p.name for p in out.iterdir()}
        assert {"results.md", "results.json", MARKER} <= names <= {*names, "asr.png"}
        (out / "results.md").write_text("stale", encoding="utf-8")
        assert run(self._argv(dataset, out)) == 0  # its own folder: rewritten
        assert (out / "results.md").read_text(encoding="utf-8") != "stale"
