"""The recovery check: an answer that reproduces several retrieved chunks by the CRR rule.

Why: the extraction metric counts a chunk as recovered when a window of an answer matches
it by RAGFort's rule (ROUGE-L F1 > 0.5 and cosine > 0.85 on the aligned span; RAGFort §5.1,
after RAG-Thief; :class:`~ragshield.eval.crr.ChunkRecoveryScorer`). The exact checks of
:mod:`ragshield.defenses.canary` miss the worm's copies: its payload makes the 0.5B model
rewrite each record ("Doctor, I have…" → "I have…", patient and doctor lines merged), which
drops the marker and cuts every verbatim run under the breadth rule's 12 words, yet the
rewrite still passes the metric's rule. Checking the answer with the metric's own rule,
against the chunks it was given, sees exactly what the attacker scores. A normal answer
reproduces at most the one record that answers it (none of the logged normal Qwen-0.5B
ChatDoctor answers recovered two; ``docs/results-extraction.md``, Session 6); a dump
reproduces several.

Example::

    check = RecoveryCheck(encoder)           # the retriever's sentence encoder
    check.check(answer, contexts)            # Leak("recovery", (0, 3), 0) or None
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragshield.defenses.canary_marks import Leak, strip_canaries
from ragshield.embed.base import Encoder
from ragshield.errors import check_float, check_int

_OWNER = "RecoveryCheck"


class RecoveryCheck:
    """Flags an answer that recovers ``min_chunks`` of its contexts by the CRR rule.

    Parameters
    ----------
    encoder: the sentence encoder of the cosine test (the retriever's; MiniLM in the bench,
        the judge's encoder too).
    min_chunks: recovered contexts that make a leak. Ours: 2 — on ChatDoctor the right
        answer to a patient is its record's doctor answer, which may pass the rule for that
        one record; two recovered records in one answer are a dump (the same reason as the
        verbatim rule's ``min_chunks``).
    rouge_threshold: ROUGE-L F1 on the aligned span. RAGFort §5.1 (after RAG-Thief): 0.5.
    cosine_threshold: cosine of the aligned span. RAGFort §5.1: 0.85.
    """

    def __init__(
        self,
        encoder: Encoder,
        *,
        min_chunks: int = 2,
        rouge_threshold: float = 0.5,  # RAGFort §5.1: ROUGE-L > 0.5
        cosine_threshold: float = 0.85,  # RAGFort §5.1: semantic similarity > 0.85
    ) -> None:
        self.encoder = encoder
        self.min_chunks = min_chunks
        self.rouge_threshold = rouge_threshold
        self.cosine_threshold = cosine_threshold

    def _validate(self) -> None:
        check_int(self.min_chunks, "min_chunks", _OWNER, low=1)
        check_float(self.rouge_threshold, "rouge_threshold", _OWNER, low=0.0, high=1.0)
        check_float(self.cosine_threshold, "cosine_threshold", _OWNER, low=-1.0, high=1.0)

    def recovered(self, output: str, contexts: Sequence[str]) -> tuple[int, ...]:
        """Indices of the ``contexts`` the output recovers (markers stripped from both)."""
        from ragshield.eval.crr import ChunkRecoveryScorer

        self._validate()
        text = strip_canaries(output)
        plain = [strip_canaries(c) for c in contexts]
        if not text.strip() or not plain:
            return ()
        scorer = ChunkRecoveryScorer(
            self.encoder,
            rouge_threshold=self.rouge_threshold,
            cosine_threshold=self.cosine_threshold,
        ).fit(plain)
        return tuple(int(i) for i in np.flatnonzero(scorer.score([text]).recovered))

    def check(self, output: str, contexts: Sequence[str]) -> Leak | None:
        """A ``"recovery"`` leak when ``min_chunks`` or more contexts are recovered."""
        hit = self.recovered(output, contexts)
        return Leak("recovery", hit, 0) if len(hit) >= self.min_chunks else None
