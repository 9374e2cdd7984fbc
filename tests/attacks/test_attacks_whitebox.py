"""PoisonedRAG white-box: HotFlip on the real packaged encoder (template passages, no LLM)."""

from __future__ import annotations

import numpy as np
import pytest

from ragshield.attacks.poisonedrag_whitebox import PoisonedRAGWhiteBoxAttack
from ragshield.errors import InputError

Q = "what is the capital of australia"


class TestWhiteBox:
    def test_hotflip_raises_similarity_to_the_question(self, encoder) -> None:  # type: ignore[no-untyped-def]
        attack = PoisonedRAGWhiteBoxAttack(encoder, "template", steps=6, candidates=16)
        out = attack.craft_passages(Q, "Sydney", 1, seed=0)
        assert len(out) == 1 and attack.generated_by == "template"
        p = out[0]
        assert p.text == f"{p.prefix} {p.body}" and "Sydney" in p.body
        q = encoder.encode([Q])[0]
        assert float(encoder.encode([p.text])[0] @ q) == pytest.approx(p.similarity_after, abs=1e-4)
        assert p.similarity_after > p.similarity_before  # measured on the decoded strings

    def test_zero_steps_keeps_the_question_prefix(self, encoder) -> None:  # type: ignore[no-untyped-def]
        p = PoisonedRAGWhiteBoxAttack(encoder, "template", steps=0).craft_passages(Q, "Sydney", 1)[
            0
        ]
        assert p.prefix == Q and p.similarity_after == pytest.approx(p.similarity_before)

    def test_needs_a_mean_pooling_sentence_transformer(self) -> None:
        class Plain:
            name = "plain"
            dim = 2

            def encode(self, texts, *, show_progress=False):  # type: ignore[no-untyped-def]
                return np.ones((len(texts), 2), dtype=np.float32) / np.sqrt(2)

        with pytest.raises(InputError, match="use 'poisonedrag-blackbox'"):
            PoisonedRAGWhiteBoxAttack(Plain(), "template").craft(Q, "Sydney", 1)
