"""The semantic output check: an answer that restates several retrieved chunks in other words.

Example::

    from ragshield.defenses.canary_semantic import SemanticCopyCheck
    check = SemanticCopyCheck(encoder)
    leak = check.check(answer_text, [p.text for p in retrieved])   # None or a Leak

Why: the canary and the verbatim-span rule (:mod:`ragshield.defenses.canary`) see exact
copies only. An attacker who has read them asks the model to paraphrase the context, or to
drop the markers and break up the wording; the answer then carries every chunk's content
and none of its strings. What survives a paraphrase is the meaning, so this check compares
meanings: each answer sentence is given to the retrieved chunk it is closest to, the
sentences given to one chunk are joined into that chunk's *restatement*, and a chunk is
reproduced when its restatement's embedding cosine with the chunk exceeds ``threshold`` —
the semantic half of the CRR rule (RAGFort §5.1: cosine > 0.85), so what it flags is what
the judge would count as recovered if the wording also matched. As with the verbatim rule,
one reproduced chunk is an ordinary answer (on ChatDoctor the right answer restates its
record) and ``min_chunks`` of them are a dump.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragshield.defenses.canary_marks import Leak, strip_canaries
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_float, check_int
from ragshield.text import split_sentences

_OWNER = "SemanticCopyCheck"


@dataclass(frozen=True)
class Restatement:
    """How closely the answer restates one context chunk."""

    context: int
    sentences: int
    cosine: float


class SemanticCopyCheck:
    """Flags answers that restate ``min_chunks`` retrieved chunks (see the module docstring).

    Parameters
    ----------
    encoder: the sentence encoder (the retriever's MiniLM: already loaded, and the judge's).
    threshold: cosine a chunk's restatement must exceed. RAGFort §5.1's semantic test
        (0.85). The dev half of ``bench_extraction.py --quote-check`` (250 ChatDoctor
        questions, seed 0) chooses 0.9 (0 % of benign answers flagged on dev, 1.2 % of the
        two-record stress case on test; 0.85 flags 1.2 % / 2.0 %): pass 0.9 for serving.
    sentence_floor: an answer sentence whose best cosine with every chunk is below this is
        given to none (the model's own words: a greeting, advice of its own). Ours.
    min_chunks: reproduced chunks that make a leak (2, as the verbatim rule's default).
    min_sentence_words: shorter sentences are ignored ("Sure.", "Context 2:").
    """

    def __init__(
        self,
        encoder: Encoder,
        *,
        threshold: float = 0.85,  # RAGFort §5.1: semantic similarity > 0.85
        sentence_floor: float = 0.5,
        min_chunks: int = 2,
        min_sentence_words: int = 4,
    ) -> None:
        self.encoder = encoder
        self.threshold = threshold
        self.sentence_floor = sentence_floor
        self.min_chunks = min_chunks
        self.min_sentence_words = min_sentence_words

    def _validate(self) -> None:
        check_float(self.threshold, "threshold", _OWNER, low=-1.0, high=1.0)
        check_float(self.sentence_floor, "sentence_floor", _OWNER, low=-1.0, high=1.0)
        check_int(self.min_chunks, "min_chunks", _OWNER, low=1)
        check_int(self.min_sentence_words, "min_sentence_words", _OWNER, low=1)
        if self.encoder is None:
            raise InputError(f"{_OWNER} needs an encoder (the retriever's sentence encoder).")

    def restatements(self, output: str, contexts: Sequence[str]) -> list[Restatement]:
        """Each context chunk's restatement in ``output`` (chunks given no sentence are left
        out), most similar first."""
        self._validate()
        if isinstance(contexts, str):
            raise InputError("contexts must be a list of passage texts, got a bare string.")
        sentences = [
            s
            for line in strip_canaries(output).splitlines()
            for s in split_sentences(line)
            if len(s.split()) >= self.min_sentence_words
        ]
        ctx = [strip_canaries(c) for c in contexts]
        if not sentences or not ctx:
            return []
        vecs = self.encoder.encode(sentences + ctx)
        s_vecs, c_vecs = vecs[: len(sentences)], vecs[len(sentences) :]
        sims = s_vecs @ c_vecs.T
        owner = np.argmax(sims, axis=1)
        keep = sims[np.arange(len(sentences)), owner] >= self.sentence_floor
        groups = {
            int(c): " ".join(
                s for s, o, k in zip(sentences, owner, keep, strict=True) if k and o == c
            )
            for c in set(owner[keep].tolist())
        }
        if not groups:
            return []
        order = sorted(groups)
        r_vecs = self.encoder.encode([groups[c] for c in order])
        out = [
            Restatement(c, int(np.sum(keep & (owner == c))), float(r_vecs[i] @ c_vecs[c]))
            for i, c in enumerate(order)
        ]
        return sorted(out, key=lambda r: -r.cosine)

    def check(self, output: str, contexts: Sequence[str]) -> Leak | None:
        """A ``Leak`` of kind ``"semantic"`` when ``min_chunks`` chunks are restated."""
        rs = self.restatements(output, contexts)
        hit = tuple(sorted(r.context for r in rs if r.cosine > self.threshold))
        if len(hit) < self.min_chunks:
            return None
        return Leak("semantic", hit, 0)
