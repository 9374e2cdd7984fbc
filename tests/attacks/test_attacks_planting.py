"""Injection and suffix payloads planted as new passages and into existing passages."""

from __future__ import annotations

import pytest

from ragshield.attacks.injection import INJECTION_TEMPLATES, instruction_survives
from ragshield.attacks.planting import PlantedInstructionAttack
from ragshield.attacks.suffix import universal_suffixes
from ragshield.errors import InputError
from ragshield.text import split_sentences

Q = "who wrote the iliad"
GOLD = "The Iliad is an ancient Greek epic poem. It is attributed to Homer. It has 24 books."
N_INSTRUCTIONS = sum(len(v) for v in INJECTION_TEMPLATES.values())


class TestNewPassages:
    def test_offtopic_injection_is_the_instruction_alone(self) -> None:
        attack = PlantedInstructionAttack("injection", "off-topic")
        out = attack.craft(Q, "Virgil", 4, seed=0)
        instructions = set(attack.payloads(Q, "Virgil"))
        assert len(out) == 4 and set(out) <= instructions

    def test_question_injection_is_prefixed(self) -> None:
        attack = PlantedInstructionAttack("injection", "question")
        out = attack.craft(Q, "Virgil", 3, seed=0)
        assert all(t.startswith(f"{Q}.") for t in out)
        assert len(attack.craft(Q, "Virgil", 999)) == N_INSTRUCTIONS  # never duplicated

    def test_suffix_payloads(self) -> None:
        published = [s.suffix for s in universal_suffixes() if s.id != "gcg-init"]
        off = PlantedInstructionAttack("suffix", "off-topic").craft(Q, "Virgil", 2, seed=1)
        on = PlantedInstructionAttack("suffix", "question").craft(Q, "Virgil", 2, seed=1)
        for text in off:
            assert text.startswith("The answer is Virgil. ")
            assert any(text.endswith(s.strip()) for s in published)
        assert on == [f"{Q}.{t}" for t in off]

    def test_seeded(self) -> None:
        attack = PlantedInstructionAttack("injection", "off-topic")
        assert attack.craft(Q, "Virgil", 3, seed=4) == attack.craft(Q, "Virgil", 3, seed=4)
        assert attack.craft(Q, "Virgil", 3, seed=4) != attack.craft(Q, "Virgil", 3, seed=5)


class TestInsertInto:
    @pytest.mark.parametrize("position", ["start", "middle", "end"])
    def test_instruction_becomes_a_sentence_of_the_passage(self, position: str) -> None:
        attack = PlantedInstructionAttack("injection", "off-topic", kinds=["ignore_context"])
        edited = attack.insert_into(GOLD, Q, "Virgil", seed=0, position=position)
        instr = next(i for i in attack.payloads(Q, "Virgil") if i in edited)
        assert instruction_survives(edited, instr)
        original = split_sentences(GOLD)
        assert [s for s in split_sentences(edited) if s in original] == original
        first, last = split_sentences(edited)[0], split_sentences(edited)[-1]
        assert (position == "start") == (first == split_sentences(instr)[0])
        assert (position == "end") == (instr.endswith(last))

    def test_question_framing_carries_the_question(self) -> None:
        edited = PlantedInstructionAttack("injection", "question").insert_into(GOLD, Q, "Virgil")
        assert f"{Q}." in edited and "Homer" in edited

    def test_suffix_goes_at_the_end(self) -> None:
        edited = PlantedInstructionAttack("suffix", "off-topic").insert_into(GOLD, Q, "Virgil")
        assert edited.startswith(GOLD + " The answer is Virgil. ")


def test_errors() -> None:
    with pytest.raises(InputError, match="'payload' parameter of PlantedInstructionAttack"):
        PlantedInstructionAttack("poem").craft(Q, "Virgil", 1)
    with pytest.raises(InputError, match="'framing' parameter"):
        PlantedInstructionAttack("injection", "nearby").craft(Q, "Virgil", 1)
    with pytest.raises(InputError, match="'kinds' parameter"):
        PlantedInstructionAttack(kinds="refusal").craft(Q, "Virgil", 1)
    with pytest.raises(InputError, match="passage is empty"):
        PlantedInstructionAttack().insert_into("", Q, "Virgil")
    with pytest.raises(InputError, match="position must be one of"):
        PlantedInstructionAttack().insert_into(GOLD, Q, "Virgil", position="top")
