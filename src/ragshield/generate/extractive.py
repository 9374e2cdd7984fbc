"""The no-LLM generator: answer with the context sentence that best matches the question.

It is the offline default so ``ragshield ask`` works on a fresh machine, and a cheap
stand-in for the filter-level evaluations: an extractive answer is exactly the evidence a
generator would be most swayed by.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragshield.embed.base import Encoder
from ragshield.generate.prompt import build_prompt
from ragshield.text import FUNCTION_WORDS, normalize_answer, split_sentences, words
from ragshield.types import Generation


class ExtractiveGenerator:
    """Picks the context sentence most similar to the question.

    With an encoder it scores by cosine similarity of sentence embeddings; without one, by
    overlap of content words (question words minus stop words). Ties go to the earlier
    context, so the retriever's order still matters.
    """

    name = "extractive"

    def __init__(self, encoder: Encoder | None = None, tokenizer: Any = None) -> None:
        self.encoder = encoder
        self._tokenizer = tokenizer

    def _tok(self) -> Any:
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            from ragshield.embed.sentence_transformer import packaged_model_path

            tok = Tokenizer.from_file(str(packaged_model_path() / "tokenizer.json"))
            tok.no_padding()  # the packaged tokenizer.json pads/truncates to 128 for the encoder
            tok.no_truncation()
            self._tokenizer = tok
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        """Tokens under the MiniLM WordPiece tokenizer (ships with the default encoder)."""
        return len(self._tok().encode(text, add_special_tokens=False).ids)

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        t0 = time.perf_counter()
        # A question is never an answer: PoisonedRAG passages open with the question itself.
        # PoisonedRAG passages open with the question itself (``question + "."``).
        q_norm = normalize_answer(question)
        sentences = [
            s
            for c in contexts
            for s in split_sentences(c)
            if not s.endswith("?") and normalize_answer(s) != q_norm
        ]
        prompt_tokens = self.count_tokens(build_prompt(question, contexts))
        if not sentences:
            text = "I don't know"
        elif self.encoder is not None:
            vecs = self.encoder.encode([question, *sentences])
            sims = vecs[1:] @ vecs[0]
            text = sentences[int(np.argmax(sims))]
        else:
            q = set(words(question)) - FUNCTION_WORDS
            scores = [len(q & set(words(s))) for s in sentences]
            text = sentences[int(np.argmax(scores))] if max(scores) > 0 else sentences[0]
        return Generation(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=self.count_tokens(text),
            timings={"generate": time.perf_counter() - t0},
        )
