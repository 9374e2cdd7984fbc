"""The real-retrieval harness: planting into a copy, retrieving, scoring (issue #17)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fakes import KeywordFilter, WordHashEncoder
from ragshield.errors import InputError
from ragshield.eval.ontopic import OnTopicData, QACase, load_ontopic
from ragshield.eval.plant import REAL_SETTINGS, attack_passages, planted_copy, typo_copy
from ragshield.eval.real_retrieval import index_novelty, run_real_eval
from ragshield.store.calibration_novelty import NoveltyIndex
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "ontopic"


def tiny() -> OnTopicData:
    passages = tuple(
        Passage(f"p{i}", t, "Australia")
        for i, t in enumerate([
            "Canberra is the capital city of Australia and seat of its parliament.",
            "Sydney is the largest city of Australia, on the east coast.",
            "Melbourne is the capital of the state of Victoria in Australia.",
            "Perth is the capital of Western Australia on the Swan River.",
        ])
    )  # fmt: skip
    q = QACase("q1", "What is the capital city of Australia?", ("Canberra",), ("p0",),
               "Australia", "test", target_answer="Sydney")  # fmt: skip
    return OnTopicData("tiny", passages, (q,))


def test_golden_text_is_each_cases_first_gold_passage_in_the_corpus() -> None:
    data = tiny()
    (q,) = data.questions
    none = QACase("q2", "Which city is largest?", ("Sydney",), (), "Australia", "test")
    gone = QACase("q3", "Which river flows through Perth?", ("Swan",), ("p9",), "Australia",
                  "test")  # fmt: skip
    assert data.golden_text([q, none, gone]) == {"q1": data.passages[0].text}


def test_planted_copy_leaves_the_store_untouched() -> None:
    data, enc = tiny(), WordHashEncoder()
    store = FaissStore(enc.dim)
    store.add(list(data.passages), enc.encode([p.text for p in data.passages]))
    before = (len(store), store.vectors.copy())
    gold = {"q1": data.passages[0].text}
    planted = attack_passages(data.questions, "poisonedrag", golden_text=gold)
    assert len(planted) == 5 and all(
        p.source == "template" and p.target == "Sydney" for p in planted
    )
    assert all(p.passage.text.startswith(data.questions[0].question) for p in planted)
    copy = planted_copy(store, planted, enc)
    assert len(copy) == 9 and len(store) == before[0]
    np.testing.assert_array_equal(store.vectors, before[1])
    hijack = attack_passages(data.questions, "injection-hijack", golden_text=gold)
    edited = planted_copy(store, hijack, enc)
    assert len(edited) == 4 and edited.passages[0].text != store.passages[0].text
    assert store.passages[0].text == data.passages[0].text


def test_typo_copy_always_edits() -> None:
    text = "The Lewiston Maineiacs were a junior ice hockey team based in Lewiston, Maine."
    copies = {typo_copy(text, 0.1, s) for s in range(10)}
    assert text not in copies and len(copies) > 1


def test_unknown_setting_and_empty_cases() -> None:
    with pytest.raises(InputError, match="unknown setting"):
        attack_passages(tiny().questions, "nope")
    with pytest.raises(InputError, match="no questions"):
        run_real_eval(tiny(), [], {"none": None}, ["clean"], encoder=WordHashEncoder())


def test_run_scores_clean_and_attacked() -> None:
    from ragshield.defenses.ragdefender import RAGDefender

    data, enc = tiny(), WordHashEncoder()
    res = run_real_eval(
        data, list(data.questions), {"none": None, "ragdefender": RAGDefender(enc)},
        ["clean", "poisonedrag"], encoder=enc, k=4, context_k=3,
    )  # fmt: skip
    clean = res.get("none", "clean").metrics
    assert clean["benign_removed"] == 0.0 and clean["gold_kept"] == 1.0
    none = res.get("none", "poisonedrag").metrics
    assert none["attack_reaches"] == 1.0 and none["adv_retrieved"] >= 1
    rd = res.get("ragdefender", "poisonedrag").metrics
    assert rd["attack_reaches"] == 0.0  # every planted passage restates the question
    assert rd["gold_kept"] == none["gold_retrieved"]  # kept whenever it was retrieved
    assert "poisonedrag" in res.to_markdown() and res.to_dict()["rows"]
    assert set(REAL_SETTINGS) >= {"clean", "mixed-4x", "injection-prefixed"}


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/ontopic is absent")
def test_ontopic_split_is_by_article_and_documented() -> None:
    squad = load_ontopic(SHARED / "squad_v1.1_dev_43articles.json")
    dev, test = squad.split("dev"), squad.split("test")
    assert len(dev) + len(test) == 9849
    assert not {c.topic for c in dev} & {c.topic for c in test}
    hot = load_ontopic(SHARED / "hotpotqa_distractor_dev100.json",
                       poisoning_dir=SHARED.parent / "poisoning" / "hotpotqa")  # fmt: skip
    test_h = hot.split("test")
    assert len(test_h) == 44 and all(c.attack_texts.get("poisonedrag") for c in test_h)
    assert len(hot.split("dev")) == 56


def test_cli_rejects_a_foreign_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragshield.cli import run

    (tmp_path / "mine.txt").write_text("x")
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"passages": [], "questions": []}))
    assert run(["eval", "retrieval", str(data), "--out", str(tmp_path)]) == 2
    assert "did not write" in capsys.readouterr().err
    assert (tmp_path / "mine.txt").read_text() == "x"


def test_cli_rejects_a_file_as_out_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ragshield.cli import run

    out = tmp_path / "results.md"  # one of the command's own names, but a user's file
    out.write_text("mine")
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"passages": [], "questions": []}))
    assert run(["eval", "retrieval", str(data), "--out", str(out)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert out.read_text() == "mine"


class _NoveltySpy(KeywordFilter):
    """A filter that reads an index's novelty table, recording what it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[object] = []

    def use_novelty(self, table: object) -> None:
        self.tables.append(table)


def test_an_empty_novelty_table_is_a_table_not_off() -> None:
    # novelty is tested by identity: an empty NoveltyIndex (len 0, falsy) is handed on as a
    # table, where a truthiness test would have switched the stage off (None) unannounced
    data, enc = tiny(), WordHashEncoder()
    empty = NoveltyIndex.restore([], [], np.zeros((0, enc.dim), np.float32), np.zeros((0, 4)))
    assert len(empty) == 0 and not empty
    store = FaissStore(enc.dim)
    store.add(list(data.passages), enc.encode([p.text for p in data.passages]))
    assert index_novelty(store, empty) is empty
    assert index_novelty(store, False) is None and index_novelty(store, None) is None
    on, off = _NoveltySpy(), _NoveltySpy()
    run_real_eval(data, list(data.questions), {"on": on}, ["clean"], encoder=enc, k=4,
                  base_store=store, calibrate_index=False, novelty=empty)  # fmt: skip
    run_real_eval(data, list(data.questions), {"off": off}, ["clean"], encoder=enc, k=4,
                  base_store=store, calibrate_index=False, novelty=None)  # fmt: skip
    assert on.tables == [{}] and off.tables == [None]


@pytest.mark.parametrize("novelty", ["yes", 1, 0, {}, [True]])
def test_novelty_of_another_type_is_refused_before_work(novelty: object) -> None:
    with pytest.raises(InputError, match="novelty must be True"):
        run_real_eval(tiny(), list(tiny().questions), {"none": None}, ["clean"],
                      encoder=WordHashEncoder(), novelty=novelty)  # type: ignore[arg-type]  # fmt: skip


def test_planted_copy_stamps_provenance_as_add_does() -> None:
    data, enc = tiny(), WordHashEncoder()
    store = FaissStore(enc.dim)
    store.add(list(data.passages), enc.encode([p.text for p in data.passages]))
    planted = attack_passages(data.questions, "poisonedrag", golden_text={"q1": "x"})
    added = planted_copy(store, planted, enc).passages[len(store) :]
    assert {p.metadata["added_at"] for p in added} == {"2026-01-01T00:00:00Z"}
    assert all(p.metadata["source"] == "planted" and p.metadata["sha256"] for p in added)
    bare = planted_copy(store, planted, enc, provenance=False).passages[len(store) :]
    assert all("added_at" not in p.metadata for p in bare)
