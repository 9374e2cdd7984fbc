"""The injection harness's generator path: identical contexts are answered once per run.

Uses the toy dataset and the hashing encoder of ``test_eval_poisoning`` (test stand-ins).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from test_eval_poisoning import HashingEncoder, write_dataset

from ragshield.eval.injection import run_injection_eval
from ragshield.types import Generation


class EchoFirst:
    """Test-only generator: answers with its first context, counting its calls."""

    name = "echo-first"

    def __init__(self) -> None:
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls += 1
        return Generation(text=contexts[0] if contexts else "I don't know")


def test_identical_contexts_are_answered_once(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "toy")

    def run(defenses: dict[str, None]) -> tuple[int, list[float]]:
        gen = EchoFirst()
        res = run_injection_eval(
            data, defenses, settings=("clean", "poisonedrag"), m_values=(1,), seeds=[0],
            encoder=HashingEncoder(), generator=gen, split="all", limit=3,
            count_tokens=gen.count_tokens,
        )  # fmt: skip
        return gen.calls, [r.metrics["asr"] for r in res.rows]

    calls_one, asr_one = run({"none": None})
    calls_two, asr_two = run({"none": None, "also-none": None})
    assert 0 < calls_one <= 2 * 3
    assert calls_two == calls_one  # the second defense kept the same contexts: no new call
    assert asr_two == [a for a in asr_one for _ in range(2)]  # rows: setting x defense
