"""Questions for a scan: the user's JSON Lines file and LLM-written, self-checked questions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ragshield.attacks.writer import TextWriter
from ragshield.errors import DataFormatError, InputError
from ragshield.scan.question_writer import QuestionWriter, parse_reply, self_check
from ragshield.scan.questions import ScanQuestion, read_questions
from ragshield.types import Generation, Passage


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class TestReadQuestions:
    def test_fields(self, tmp_path: Path) -> None:
        path = _write(
            tmp_path,
            [
                json.dumps({"question": "who designed the tower", "answer": "Eiffel"}),
                "",
                json.dumps(
                    {
                        "id": "q7",
                        "question": " capital of australia ",
                        "answers": ["Canberra", "Canberra, ACT"],
                        "incorrect_answer": "Sydney",
                        "gold_passage_ids": ["doc-1"],
                    }
                ),
                json.dumps({"question": "no answer known"}),
            ],
        )
        qs = read_questions(path)
        assert qs[0] == ScanQuestion("who designed the tower", ("Eiffel",), id="q1")
        assert qs[1] == ScanQuestion(
            "capital of australia",
            ("Canberra", "Canberra, ACT"),
            "Sydney",
            id="q7",
            gold_passage_ids=("doc-1",),
        )
        assert qs[2].id == "q4" and qs[2].answers == ()  # default id = line number

    @pytest.mark.parametrize(
        ("line", "message"),
        [
            ('{"question": "a", ', r":2: malformed JSON"),
            ('["a"]', r":2: each line must be a JSON object"),
            ('{"answer": "x"}', r":2: missing or empty string field 'question'"),
            ('{"question": "a", "answer": 3}', r":2: 'answer' must be a non-empty string"),
            ('{"question": "a", "answers": []}', r":2: 'answers' must be"),
            ('{"question": "a", "qestion": "typo"}', r":2: unknown field\(s\) qestion"),
            ('{"id": "q1", "question": "b"}', r":2: duplicate id 'q1'"),
            ('{"question": "a", "id": true}', r":2: 'id' must be"),
        ],
    )
    def test_bad_line_names_file_and_line(self, tmp_path: Path, line: str, message: str) -> None:
        path = _write(tmp_path, ['{"question": "ok"}', line])
        with pytest.raises(DataFormatError, match=rf"questions\.jsonl{message}"):
            read_questions(path)

    def test_missing_and_empty_files(self, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="does not exist"):
            read_questions(tmp_path / "nope.jsonl")
        with pytest.raises(DataFormatError, match="no questions"):
            read_questions(_write(tmp_path, ["", "  "]))
        bad = tmp_path / "latin1.jsonl"
        bad.write_bytes('{"question": "caf\xe9"}\n'.encode("latin-1"))
        with pytest.raises(DataFormatError, match="not valid UTF-8"):
            read_questions(bad)


class Scripted:
    name = "scripted"

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.calls: list[str] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls.append(question)
        for key, reply in self.replies.items():
            if key in question:
                return Generation(reply)
        return Generation("I cannot.")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


PASSAGES = [
    Passage(
        "p1", "The Zorblat Bridge in Kelvora was designed by the engineer Mirena Tolst in 1887."
    ),
    Passage("p2", "Kelvora is known for its cheese market, which opens every Thursday morning."),
    Passage("p3", "The Kelvora observatory was founded by Anselm Drey after a long public debate."),
]


class TestQuestionWriter:
    def test_self_check_keeps_answers_found_in_the_passage(self) -> None:
        gen = Scripted(
            {
                "Zorblat": "Question: Who designed the Zorblat Bridge?\nAnswer: Mirena Tolst",
                "cheese": "Question: When does the market open?\nAnswer: on Sundays",  # not there
                # question only; the answer comes from the second call
                "observatory was founded by Anselm Drey after a long public debate.\n\nRe": (
                    "Who founded the Kelvora observatory?"
                ),
                "Question: Who founded the Kelvora observatory?": "Anselm Drey.",
            }
        )
        qs = QuestionWriter(TextWriter(gen)).generate(PASSAGES, 3, seed=0)
        got = {q.gold_passage_ids: (q.question, q.answers, q.source) for q in qs}
        assert got == {
            ("p1",): ("Who designed the Zorblat Bridge?", ("Mirena Tolst",), "llm:scripted"),
            ("p3",): ("Who founded the Kelvora observatory?", ("Anselm Drey",), "llm:scripted"),
        }
        assert all(q.id == f"gen-{q.gold_passage_ids[0]}" for q in qs)

    def test_n_and_seed(self) -> None:
        gen = Scripted(
            {"Zorblat": "Question: Who designed the Zorblat Bridge?\nAnswer: Mirena Tolst"}
        )
        assert QuestionWriter(TextWriter(gen)).generate(PASSAGES, 0) == []
        with pytest.raises(InputError, match="needs an LLM"):
            QuestionWriter("template").generate(PASSAGES, 1)
        with pytest.raises(InputError, match="not a single one"):
            QuestionWriter(TextWriter(gen)).generate(PASSAGES[0], 1)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("reply", "expected"),
        [
            ("Question: Who? \nAnswer: Tolst.", ("Who?", "Tolst")),
            (
                "**Question 1:** Who built it?\n**Answer:** Mirena Tolst",
                ("Who built it?", "Mirena Tolst"),
            ),
            ("Who built it?", ("Who built it?", None)),
            ("The bridge is old.", None),
            ("Question: Who?\nAnswer: " + "word " * 12, ("Who?", None)),
        ],
    )
    def test_parse_reply(self, reply: str, expected: tuple[str, str | None] | None) -> None:
        assert parse_reply(reply) == expected

    def test_self_check(self) -> None:
        text = PASSAGES[0].text
        assert self_check("Who designed it?", "Mirena Tolst", text)
        assert not self_check("Who designed it?", "Tolstoy", text)  # word boundaries
        assert not self_check("Did Mirena Tolst design it?", "Mirena Tolst", text)


@pytest.mark.parametrize("key", ["target", "target_answer", "incorrect_answer"])
def test_the_attackers_answer_has_three_spellings(tmp_path: Path, key: str) -> None:
    """One reader for every scan question: the scan's ``target`` and the datasets' names."""
    path = _write(
        tmp_path, [json.dumps({"question": "capital?", "answer": "Canberra", key: "Sydney"})]
    )
    (q,) = read_questions(path)
    assert (q.question, q.answers, q.target) == ("capital?", ("Canberra",), "Sydney")
    assert (q.id, q.source) == ("q1", "file")
