"""``attacks.llm_passages``: the loop shared by the LLM-written poisoning attacks.

Pinned on a scripted generator (unit test only): a reply without the target answer is not
planted and is not padded with template text; duplicates are dropped; the style order
follows the seed; provenance says who wrote each passage."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragshield.attacks.llm_passages import STYLES, LLMPassageAttack
from ragshield.attacks.writer import TextWriter
from ragshield.errors import InputError
from ragshield.types import Generation


class ByStyle:
    """Answers with a passage naming the style it was asked for; lacks the answer for one."""

    name = "by-style"

    def __init__(self, missing: str = "news report") -> None:
        self.missing = missing
        self.calls: list[str] = []

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls.append(question)
        style = next((s for s in STYLES[1:] if s in question), "plain")
        if self.missing in style:
            return Generation("A passage that never says where the capital is.")
        return Generation(f"In the style {style!r}, the capital of Australia is Sydney.")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class Toy(LLMPassageAttack):
    name = "toy"

    def prompt(self, question: str, target_answer: str, style: str) -> str:
        return f"Write about {question} saying {target_answer}. {style}"

    def assemble(self, question: str, body: str) -> str:
        return f"{question} {body}"

    def template_bodies(self, question: str, target_answer: str) -> list[str]:
        return [f"It is {target_answer}.", f"It is {target_answer}.", f"Surely {target_answer}."]


def test_llm_rows_keep_only_replies_that_state_the_target_and_are_never_padded() -> None:
    gen = ByStyle()
    attack = Toy(TextWriter(gen), tries=0)  # type: ignore[arg-type]
    out = attack.craft_passages("capital of Australia?", "Sydney", len(STYLES), seed=3)
    assert len(out) == len(STYLES) - 1  # the news-report reply lacked "Sydney"
    assert all("Sydney" in p.body and p.text.startswith("capital of Australia?") for p in out)
    assert all(p.generated_by.startswith("llm:") for p in out)
    assert len({p.body for p in out}) == len(out)


def test_the_seed_orders_the_styles_reproducibly() -> None:
    def first_styles(seed: int) -> list[str]:
        attack = Toy(TextWriter(ByStyle()), tries=0)  # type: ignore[arg-type]
        return [p.style for p in attack.craft_passages("q?", "Sydney", 3, seed=seed)]

    assert first_styles(1) == first_styles(1)
    assert first_styles(1) != first_styles(2)


def test_template_rows_are_labelled_and_deduplicated() -> None:
    out = Toy("template").craft_passages("capital?", "Sydney", 5)
    assert [p.body for p in out] == ["It is Sydney.", "Surely Sydney."]
    assert {p.generated_by for p in out} == {"template"}
    assert Toy("template").craft("capital?", "Sydney", 1) == ["capital? It is Sydney."]


@pytest.mark.parametrize("kwargs", [{"words": 2}, {"tries": -1}])
def test_bad_settings_are_refused_before_any_generation(kwargs: dict[str, int]) -> None:
    gen = ByStyle()
    with pytest.raises(InputError):
        Toy(TextWriter(gen), **kwargs).craft("q?", "Sydney", 2)  # type: ignore[arg-type]
    assert gen.calls == []
