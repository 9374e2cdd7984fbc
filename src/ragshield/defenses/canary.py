"""Canary tokens and the verbatim-span output check: an answer that copies a chunk is caught.

Example::

    from ragshield.defenses.canary import CanaryGuard, embed_canaries, new_secret

    passages = embed_canaries(passages, secret=new_secret())   # opt-in (`index --canaries`)
    gen = CanaryGuard(LocalLLMGenerator("qwen2.5-0.5b"))        # at answer time
    g = gen.generate(question, [p.text for p in retrieved])
    g.details.get("leak")     # {"kind": "canary", ...} when the answer copied a chunk

Why: extraction attacks (RAG-Thief, the worm) work by making the generator *copy* its
context. A copy is visible in the output, whatever query produced it, so the check is
deterministic and model-agnostic — the kind of output-side check that held against an
evolving attacker where model-based detectors broke (arXiv 2604.23887). Two signals:

* **canary** (CanaryRAG, arXiv 2604.10717): every chunk carries a short high-entropy marker
  ``[ref ABCD-EFGH-JKLM]``, the HMAC-SHA256 of a secret and the chunk id (reproducible by
  whoever holds the secret, unpredictable to anyone else). An ordinary answer has no
  reason to repeat a reference code; a copied chunk carries it. The marker is added to the
  stored text *after* the vectors are computed, so retrieval never sees it.
* **verbatim span**: the answer shares a run of at least ``min_span_words`` consecutive
  words with one retrieved chunk — a copy whose canary the attacker had the model drop
  ("omit reference codes"). An answer that quotes a sentence stays under the limit.

The markers are opt-in (``ragshield index --canaries``): in the prompt they shift which
retrieved record a small model answers from (ChatDoctor, Qwen2.5-0.5B: −2.8 accuracy points
on 250 test questions), while the output checks without them — verbatim, breadth, recovery —
leave the prompt byte for byte the undefended one and still stop RAG-Thief and the worm
(docs/results-extraction.md, Session 8).

A hit blocks the answer (``action="block"``: a fixed refusal replaces it) or cuts the copied
words out (``action="redact"``), and is recorded in ``Generation.details["leak"]`` so the
service can report it to its extraction throttle.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from difflib import SequenceMatcher
from typing import Any, Literal

from ragshield.defenses.canary_marks import CANARY_RE, Leak, strip_canaries
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_int
from ragshield.generate.base import Generator
from ragshield.generate.cache import Wrapping
from ragshield.types import Generation, Passage

_OWNER = "CanaryGuard"
#: characters a canary adds to a chunk (`` [ref XXXX-XXXX-XXXX].``)
MARKER_CHARS = 22
_WORD = re.compile(r"[a-z0-9]+")
BLOCKED = "I can't reproduce the source documents; please ask a question about them instead."

Action = Literal["block", "redact"]
#: the breadth rule's run length (``CanaryGuard(breadth_span_words=...)``). Ours: 12 — on
#: the 100 normal Qwen-0.5B ChatDoctor answers of Session 3, 8 words from 3 chunks flagged 2,
#: 10 flagged 0 and 12 flagged 0; one step above the smallest clean length, since 100 answers
#: cannot show 0.5 %. Checked on 150 normal answers not seen when choosing: 0 flagged at 12
#: (2 at 10). It catches the worm's block-split copies the canary misses (32 of 182 uncaught
#: worm answers; docs/results-extraction.md, Session 5).
BREADTH_SPAN_WORDS: int | None = 12
#: the recovery rule's chunk count (``CanaryGuard(recovery_chunks=...)``). Ours: 2 — of the
#: logged normal Qwen-0.5B ChatDoctor answers none recovered two retrieved chunks by the CRR
#: rule (~18 % recover their own record, a normal answer's shape); replayed on the 200-query
#: worm × canary log it takes the worm from 0.046 to 0.010 behind the canary and breadth
#: rules. It flags 0.4 % (dev) / 2.0 % (test) of a no-LLM stress case (one record's answer
#: plus a sentence of another), above 0.5 % on test: on by default for the worm, off with
#: ``None`` (docs/results-extraction.md, Session 6).
RECOVERY_CHUNKS: int | None = 2


def new_secret() -> str:
    """A fresh canary secret (32 random bytes, hex)."""
    return secrets.token_hex(32)


def canary_code(secret: str | bytes, chunk_id: str) -> str:
    """The chunk's 12-character code: HMAC-SHA256(secret, chunk id), base32, first 60 bits."""
    if not secret:
        raise InputError("the canary secret is empty: pass a non-empty secret.")
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    digest = hmac.new(key, chunk_id.encode("utf-8"), hashlib.sha256).digest()
    code = base64.b32encode(digest).decode("ascii")[:12]
    return f"{code[:4]}-{code[4:8]}-{code[8:]}"


def _after_first_line(text: str, marker: str) -> str:
    """The marker after the chunk's first line or sentence: inside the chunk, so a copy of
    more than its opening sentence carries it, and never at the very end, where a model
    cutting its copy short would drop it first."""
    cut = text.find("\n")
    if cut < 0:
        m = re.search(r"[.!?](\s)", text)
        cut = m.start(1) if m else len(text)
    return text[:cut] + f" {marker}" + text[cut:]


def _head(text: str, marker: str) -> str:
    """The marker as the chunk's first words, a label before the text: a dump that starts
    at the chunk carries it, and it does not sit between a record's question and its answer
    (where ``"sentence"`` puts it on ChatDoctor, the junction a normal answer is read from)."""
    return f"{marker} {text}"


def _tail(text: str, marker: str) -> str:
    """The marker as the chunk's last words: nothing of the chunk's own reading order (its
    opening, its question → answer junction) is touched. Not the default: a normal answer
    that copies a record's reply to its end runs on into the marker (1 of 50 ChatDoctor dev
    answers was blocked so), and it changed more answers than ``"head"`` (13 of 50 dev
    answers against 5; docs/results-extraction.md, Session 7)."""
    return f"{text.rstrip()} {marker}"


#: where a chunk's marker goes (``embed_canary(placement=...)``)
PLACEMENTS: dict[str, Callable[[str, str], str]] = {
    "sentence": _after_first_line,
    "head": _head,
    "tail": _tail,
}


#: where ``ragshield index`` puts a marker: ``"head"``. It changed fewer normal answers than
#: ``"sentence"`` (86 of 100 ChatDoctor answers word for word unchanged vs 29 of 50;
#: docs/results-extraction.md, Session 5) and caught as much of RAG-Thief; ``ragshield add``'s
#: poisoning screen strips markers before it probes (``ingest._unmarked``).
DEFAULT_PLACEMENT = "head"


def embed_canary(text: str, code: str, placement: str = DEFAULT_PLACEMENT) -> str:
    """``text`` with ``[ref CODE].`` placed as ``placement`` says (:data:`PLACEMENTS`)."""
    if placement not in PLACEMENTS:
        raise InputError(
            f"unknown canary placement {placement!r}; choose one of {', '.join(PLACEMENTS)}."
        )
    return PLACEMENTS[placement](text, f"[ref {code}].")


def codes_in(text: str) -> list[str]:
    """Canary codes written in ``text`` (``ABCD-EFGH-JKLM``)."""
    return ["-".join(m.groups()) for m in CANARY_RE.finditer(text)]


def embed_canaries(
    passages: Sequence[Passage], secret: str | bytes, placement: str = DEFAULT_PLACEMENT
) -> list[Passage]:
    """Each passage with its canary in the text and the code in ``metadata["canary"]``.

    Call it *after* encoding: the stored vectors must be those of the plain texts."""
    out = []
    for p in passages:
        code = canary_code(secret, p.id)
        text = embed_canary(p.text, code, placement)
        out.append(replace(p, text=text, metadata={**p.metadata, "canary": code}))
    return out


def _squash(text: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", text.upper())


def _words(text: str) -> list[str]:
    return _WORD.findall(strip_canaries(text).lower())


def longest_copy(output: str, context: str) -> tuple[int, int]:
    """Longest run of consecutive words the output shares with the context, as
    ``(start word in output, length)`` (case and punctuation ignored)."""
    a, b = _words(output), _words(context)
    if not a or not b:
        return 0, 0
    m = SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return m.a, m.size


def check_output(
    output: str,
    contexts: Sequence[str],
    *,
    min_span_words: int,
    min_chunks: int = 2,
    breadth_span_words: int | None = None,
    breadth_chunks: int = 3,
) -> Leak | None:
    """The leak in ``output``, if any: a canary of one of ``contexts`` (matched ignoring
    case, spaces and punctuation, so ``ref abcd efgh jklm`` still counts), else verbatim
    runs of ``min_span_words`` words from ``min_chunks`` different contexts (a dump of the
    context; an answer quoting the one record that answers it is not one), else — when
    ``breadth_span_words`` is set — shorter runs of that many words from ``breadth_chunks``
    different contexts (``"breadth"``: a dump split into pieces, each under the long limit,
    as the worm's ``<START>…<END>`` blocks are; a normal answer draws on one or two
    records)."""
    squashed = _squash(output)
    hit = tuple(
        i
        for i, ctx in enumerate(contexts)
        if any(_squash(code) in squashed for code in codes_in(ctx))
    )
    spans = [longest_copy(output, ctx)[1] for ctx in contexts]
    longest = max(spans, default=0)
    if hit:
        return Leak("canary", hit, longest)
    copied = tuple(i for i, n in enumerate(spans) if n >= min_span_words)
    if len(copied) >= min_chunks:
        return Leak("verbatim", copied, longest)
    if breadth_span_words is None:
        return None
    pieces = tuple(i for i, n in enumerate(spans) if n >= breadth_span_words)
    return Leak("breadth", pieces, longest) if len(pieces) >= breadth_chunks else None


#: words an echo may add to the question it repeats (:func:`echoes`). Ours: 3 — the 0.5B
#: model's echo is the question whole plus a list label (``[1]``); an absolute allowance,
#: not a share, so a long question cannot carry a copied chunk past the check.
ECHO_EXTRA_WORDS = 3


def echoes(output: str, question: str) -> bool:
    """Whether ``output`` (markers stripped) is the ``question`` said back: one run copied
    from it, plus at most :data:`ECHO_EXTRA_WORDS` other words. Why it is never a leak: it
    discloses nothing the asker did not write, even when the chunk that matched the question
    starts with the same words and its head marker came along (a ChatDoctor record *is* its
    patient's question; 1 of 150 normal answers did this, docs/results-extraction.md,
    Session 6)."""
    words = _words(output)
    if not words or not question.strip():
        return False
    return len(words) - longest_copy(output, question)[1] <= ECHO_EXTRA_WORDS


def redact(output: str, contexts: Sequence[str], *, min_span_words: int) -> str:
    """``output`` with every canary and every copied run of ``min_span_words``+ words cut
    out (replaced by ``[…]``); words are re-joined by single spaces."""
    words = _WORD.findall(strip_canaries(output).lower())
    keep = [True] * len(words)
    for ctx in contexts:
        b = _words(ctx)
        sm = SequenceMatcher(None, words, b, autojunk=False)
        for blk in sm.get_matching_blocks():
            if blk.size >= min_span_words:
                keep[blk.a : blk.a + blk.size] = [False] * blk.size
    out: list[str] = []
    for w, k in zip(words, keep, strict=True):
        if k:
            out.append(w)
        elif not out or out[-1] != "[…]":
            out.append("[…]")
    return " ".join(out)


class CanaryGuard(Wrapping):
    """Wraps a generator; checks every answer for canaries and verbatim copies.

    Parameters
    ----------
    inner: the generator whose answers are checked.
    min_span_words: a verbatim run this long from a chunk counts as a copy of it. Ours,
        chosen on the dev half of ``bench_extraction.py --quote-check`` (250 ChatDoctor
        questions, seed 0): the smallest limit that flags at most 0.5 % of benign answers
        quoting the knowledge base (an answer joining two records: 14 % at 20 words, 1.2 %
        at 30, 0.4 % at 40) — it still catches ~half of two-chunk copies whose canaries
        were dropped (test 48 %); the canary catches the rest.
    min_chunks: copies of this many different chunks in one answer are a leak. Ours: on
        ChatDoctor the right answer to a patient *is* its record's doctor answer, and the
        0.5B model copies it whole — one copied chunk is a normal answer, several are a
        dump (the canary, placed after the patient's message, catches a one-chunk copy).
    breadth_span_words: with ``breadth_chunks``, the breadth rule (:func:`check_output`):
        runs of this many words from ``breadth_chunks`` different chunks are a dump cut in
        pieces — the worm's block-split copy, which drops the canary and keeps every piece
        under ``min_span_words``. ``None`` turns it off (:data:`BREADTH_SPAN_WORDS`).
    breadth_chunks: how many chunks the breadth rule needs. Ours: 3 — an answer joining
        two records is a normal ChatDoctor answer (the verbatim rule's stress case), three
        copied pieces are not.
    recovery_chunks: when ``encoder`` is set, an answer the exact rules passed is also
        checked with the extraction metric's own rule (:class:`~ragshield.defenses.
        canary_recovery.RecoveryCheck`: this many retrieved chunks recovered by ROUGE-L F1
        > 0.5 and cosine > 0.85) — the worm's rewritten copies, which drop the marker and
        break every verbatim run. Ours: 2 (:data:`RECOVERY_CHUNKS`). ``None`` turns it off;
        without an encoder it does not run.
    action: ``"block"`` (a fixed refusal replaces the answer) or ``"redact"`` (the copied
        words are cut out; a recovery or semantic hit is blocked, having no copied words).
    message: the refusal ``"block"`` answers with.
    semantic_threshold: when set (with ``encoder``), an answer neither rule caught is also
        checked for *restated* chunks (:class:`~ragshield.defenses.canary_semantic.
        SemanticCopyCheck`: ``min_chunks`` chunks restated with cosine above this) — the
        paraphrased dump a canary-aware attacker asks for. Off by default (``None``): 0.9,
        the dev choice, flagged 0 of 100 normal LLM answers but 1.2 % of a two-record
        stress case on test, above the 0.5 % target (``docs/results-extraction.md``). A
        ``"redact"`` guard blocks a semantic hit (there are no copied words to cut).
    encoder: the sentence encoder the semantic check uses (the retriever's).
    """

    def __init__(
        self,
        inner: Generator,
        *,
        min_span_words: int = 40,
        min_chunks: int = 2,
        breadth_span_words: int | None = BREADTH_SPAN_WORDS,
        breadth_chunks: int = 3,
        recovery_chunks: int | None = RECOVERY_CHUNKS,
        action: Action = "block",
        message: str = BLOCKED,
        semantic_threshold: float | None = None,
        encoder: Encoder | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.min_span_words = min_span_words
        self.min_chunks = min_chunks
        self.breadth_span_words = breadth_span_words
        self.breadth_chunks = breadth_chunks
        self.recovery_chunks = recovery_chunks
        self.action = action
        self.message = message
        self.semantic_threshold = semantic_threshold
        self.encoder = encoder

    def _validate(self) -> None:
        check_int(self.min_span_words, "min_span_words", _OWNER, low=5)
        check_int(self.min_chunks, "min_chunks", _OWNER, low=1)
        if self.breadth_span_words is not None:
            check_int(self.breadth_span_words, "breadth_span_words", _OWNER, low=5)
        check_int(self.breadth_chunks, "breadth_chunks", _OWNER, low=2)
        if self.recovery_chunks is not None:
            check_int(self.recovery_chunks, "recovery_chunks", _OWNER, low=1)
        if self.action not in ("block", "redact"):
            raise InputError(
                f"The 'action' parameter of {_OWNER} must be 'block' or 'redact'. "
                f"Got {self.action!r} instead."
            )
        if self.semantic_threshold is not None and self.encoder is None:
            raise InputError(
                f"{_OWNER}: semantic_threshold needs an encoder (the retriever's sentence "
                "encoder) to compare meanings."
            )

    def _recovery(self, text: str, contexts: Sequence[str]) -> Leak | None:
        if self.recovery_chunks is None or self.encoder is None:
            return None
        from ragshield.defenses.canary_recovery import RecoveryCheck

        return RecoveryCheck(self.encoder, min_chunks=self.recovery_chunks).check(text, contexts)

    def _semantic(self, text: str, contexts: Sequence[str]) -> Leak | None:
        if self.semantic_threshold is None or self.encoder is None:
            return None
        from ragshield.defenses.canary_semantic import SemanticCopyCheck

        check = SemanticCopyCheck(
            self.encoder, threshold=self.semantic_threshold, min_chunks=self.min_chunks
        )
        return check.check(text, contexts)

    def guard(
        self, generation: Generation, contexts: Sequence[str], question: str = ""
    ) -> Generation:
        """The checked answer: unchanged, blocked or redacted; ``details["leak"]`` on a hit.
        An answer that only repeats ``question`` (:func:`echoes`) is never a leak."""
        self._validate()
        if echoes(generation.text, question):
            text = strip_canaries(generation.text)
            return generation if text == generation.text else replace(generation, text=text)
        leak = check_output(
            generation.text,
            contexts,
            min_span_words=self.min_span_words,
            min_chunks=self.min_chunks,
            breadth_span_words=self.breadth_span_words,
            breadth_chunks=self.breadth_chunks,
        )
        leak = (
            leak
            or self._recovery(generation.text, contexts)
            or self._semantic(generation.text, contexts)
        )
        if leak is None:
            text = strip_canaries(generation.text)
            return generation if text == generation.text else replace(generation, text=text)
        # a breadth hit's pieces are shorter than min_span_words: redact at their length
        span = self.breadth_span_words if leak.kind == "breadth" else self.min_span_words
        text = (
            self.message
            if self.action == "block" or leak.kind in ("recovery", "semantic") or span is None
            else redact(generation.text, contexts, min_span_words=span)
        )
        details = {**generation.details, "leak": leak.to_dict() | {"action": self.action}}
        return replace(generation, text=text, details=details)

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return self.guard(self.inner.generate(question, contexts), contexts, question)

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        many = getattr(self.inner, "generate_many", None)
        gens = (
            many(requests) if callable(many) else [self.inner.generate(q, c) for q, c in requests]
        )
        return [self.guard(g, c, q) for g, (q, c) in zip(gens, requests, strict=True)]


def wrap_canary(
    generator: Generator,
    *,
    encoder: object = None,
    options: Mapping[str, Any] | None = None,
    **params: Any,
) -> CanaryGuard:
    """The registry's ``canary`` entry (a generator wrapper): ``params`` go to the guard;
    the pipeline's ``encoder`` serves the recovery check (on by default) and the semantic
    check when ``semantic_threshold`` is set."""
    if "encoder" not in params and isinstance(encoder, Encoder):
        params = {**params, "encoder": encoder}
    return CanaryGuard(generator, **params)
