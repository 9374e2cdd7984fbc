"""Loaders of ragshield.eval.datasets: the poisoning test sets and BEIR folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragshield.errors import DataFormatError, InputError
from ragshield.eval.datasets import load_beir, load_poisoning, split_cases


def write_poisoning_dir(root: Path, n: int = 3) -> Path:
    """A tiny dataset in the shared data's schema (README of ../shared/data)."""
    root.mkdir(parents=True, exist_ok=True)
    targets = [
        {"id": f"q{i}", "question": f"question {i}?", "correct answer": f"right{i}",
         "incorrect answer": f"wrong{i}"}
        for i in range(n)
    ]  # fmt: skip
    poisoned = {
        t["id"]: {**t, "adv_texts": [f"adv {t['id']} {k} says wrong{i}" for k in range(5)]}
        for i, t in enumerate(targets)
    }
    blind = [
        {"query": t["question"], "ground_truth": f"golden {i} says right{i}",
         "adversarial_document": f"blind {i} {k}"}
        for i, t in enumerate(targets) for k in range(2)
    ]  # fmt: skip
    garag = [
        {"query": t["question"], "ground_truth": f"golden {i} says right{i}",
         "adversarial_document": f"goldn {i} sayz right{i} v{k}"}
        for i, t in enumerate(targets) for k in range(3)
    ]  # fmt: skip
    garag.append(
        {"query": targets[0]["question"], "ground_truth": "second golden of q0",
         "adversarial_document": "secnd goldn of q0"}
    )  # fmt: skip
    for name, data in [("target_queries", targets), ("poisonedrag", poisoned),
                       ("blind", blind), ("garag", garag)]:  # fmt: skip
        (root / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return root


class TestLoadPoisoning:
    def test_reads_all_fields(self, tmp_path: Path) -> None:
        cases = load_poisoning(write_poisoning_dir(tmp_path / "ds"))
        assert [c.id for c in cases] == ["q0", "q1", "q2"]
        c = cases[0]
        assert c.golden == "golden 0 says right0"
        assert c.supporting == ("second golden of q0",)
        assert cases[1].supporting == ()
        # PoisonedRAG passages are assembled as question + "." + adv_text (data README)
        assert c.adversarial["poisonedrag"][0] == "question 0?.adv q0 0 says wrong0"
        assert len(c.adversarial["poisonedrag"]) == 5
        assert len(c.adversarial["blind"]) == 2
        assert len(c.adversarial["garag"]) == 4

    def test_duplicates_are_dropped(self, tmp_path: Path) -> None:
        root = write_poisoning_dir(tmp_path / "ds")
        blind = json.loads((root / "blind.json").read_text())
        blind.append(dict(blind[0]))
        (root / "blind.json").write_text(json.dumps(blind))
        assert len(load_poisoning(root)[0].adversarial["blind"]) == 2

    def test_optional_attack_files(self, tmp_path: Path) -> None:
        root = write_poisoning_dir(tmp_path / "ds")
        (root / "garag.json").unlink()
        cases = load_poisoning(root)
        assert "garag" not in cases[0].adversarial
        assert cases[0].golden == "golden 0 says right0"

    def test_missing_golden_is_a_format_error(self, tmp_path: Path) -> None:
        root = write_poisoning_dir(tmp_path / "ds")
        (root / "garag.json").unlink()
        (root / "blind.json").unlink()
        with pytest.raises(DataFormatError, match="no golden passage"):
            load_poisoning(root)

    def test_bad_json_names_file_and_line(self, tmp_path: Path) -> None:
        root = write_poisoning_dir(tmp_path / "ds")
        (root / "poisonedrag.json").write_text('{\n  "q0": [1,\n')
        with pytest.raises(DataFormatError, match=r"poisonedrag\.json:\d+: invalid JSON"):
            load_poisoning(root)

    def test_missing_field(self, tmp_path: Path) -> None:
        root = write_poisoning_dir(tmp_path / "ds")
        targets = json.loads((root / "target_queries.json").read_text())
        del targets[1]["incorrect answer"]
        (root / "target_queries.json").write_text(json.dumps(targets))
        with pytest.raises(
            DataFormatError, match="target 1 has no non-empty string field 'incorrect answer'"
        ):
            load_poisoning(root)

    def test_missing_poisonedrag_entry(self, tmp_path: Path) -> None:
        root = write_poisoning_dir(tmp_path / "ds")
        (root / "poisonedrag.json").write_text(json.dumps({}))
        with pytest.raises(DataFormatError, match="no entry for question id 'q0'"):
            load_poisoning(root)

    def test_missing_folder(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="does not exist"):
            load_poisoning(tmp_path / "nope")

    def test_split(self, tmp_path: Path) -> None:
        cases = load_poisoning(write_poisoning_dir(tmp_path / "ds", n=5))
        assert [c.id for c in split_cases(cases, "dev")] == ["q0", "q2", "q4"]
        assert [c.id for c in split_cases(cases, "test")] == ["q1", "q3"]
        assert len(split_cases(cases, "all")) == 5
        with pytest.raises(InputError, match="split must be one of"):
            split_cases(cases, "train")


@pytest.mark.parametrize("name", ["nq", "hotpotqa"])
def test_real_poisoning_data(shared_data: Path, name: str) -> None:
    cases = load_poisoning(shared_data / "poisoning" / name)
    assert len(cases) == 100
    assert len({c.id for c in cases}) == 100
    for c in cases:
        assert len(c.adversarial["poisonedrag"]) == 5
        assert c.adversarial["poisonedrag"][0].startswith(c.question + ".")
        assert c.adversarial["blind"] and c.adversarial["garag"]
        assert c.golden.strip()
    if name == "hotpotqa":  # multi-hop: every question has a second golden passage
        assert all(len(c.supporting) == 1 for c in cases)


class TestLoadBeir:
    def write(self, root: Path) -> Path:
        (root / "qrels").mkdir(parents=True)
        (root / "corpus.jsonl").write_text(
            '{"_id": "d1", "title": "T", "text": "one"}\n\n{"_id": "d2", "text": "two"}\n'
        )
        (root / "queries.jsonl").write_text('{"_id": "q1", "text": "what?"}\n')
        (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
        return root

    def test_reads_folder(self, tmp_path: Path) -> None:
        corpus, queries, qrels = load_beir(self.write(tmp_path / "b"))
        assert [(p.id, p.title, p.text) for p in corpus] == [("d1", "T", "one"), ("d2", "", "two")]
        assert queries == {"q1": "what?"}
        assert qrels == {"q1": {"d2": 1}}

    def test_bad_line(self, tmp_path: Path) -> None:
        root = self.write(tmp_path / "b")
        (root / "corpus.jsonl").write_text('{"_id": "d1", "text": "one"}\n{"_id": 3}\n')
        with pytest.raises(DataFormatError, match=r"corpus\.jsonl:2: each document needs"):
            load_beir(root)

    def test_bad_score(self, tmp_path: Path) -> None:
        root = self.write(tmp_path / "b")
        (root / "qrels" / "test.tsv").write_text("q1\td2\tx\n")
        with pytest.raises(DataFormatError, match=r"test\.tsv:1: score 'x' is not a number"):
            load_beir(root)

    def test_missing_qrels_is_empty(self, tmp_path: Path) -> None:
        root = self.write(tmp_path / "b")
        (root / "qrels" / "test.tsv").unlink()
        assert load_beir(root)[2] == {}
