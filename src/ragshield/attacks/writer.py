"""The LLM that writes attack text (passages, target answers, questions), behind one seam.

Example::

    from ragshield.attacks.writer import TextWriter

    writer = TextWriter()                        # packaged Qwen2.5-0.5B, disk-cached
    out = writer.write("Write one sentence about the moon.")
    print(out.text, out.seconds, out.cached)

Why it goes through :meth:`Generator.generate` (``question=instruction, contexts=[]``)
rather than a model-specific call: any generator then works (a packaged local model, a
local folder, an OpenAI-compatible endpoint), and :class:`~ragshield.generate.cache.CachedGenerator`
keys and stores every reply, so a scan that is stopped resumes where it was. The default
generator uses the ``"ragfort"`` prompt style (no system instruction): PoisonedRAG's system
prompt tells the model to answer briefly or say "I don't know", which is the wrong brief
for writing a passage. Decoding is greedy, so the same instruction always gives the same
text; attacks vary the instruction (not a sampling seed) to get distinct passages.

Batching: an attack asks its instructions one after another (a retry depends on the reply
before it), which on a CPU wastes the cheap width of a decode step. :meth:`TextWriter.collecting`
runs such code as a dry run — replies come from the cache, an uncached instruction is
recorded and answered with a stand-in — and :meth:`TextWriter.prefetch` then writes all
recorded instructions in batches into the cache; repeated until nothing new is recorded,
the real run reads every reply back (:func:`write_in_batches`). The result is what the
sequential run would produce from the same cached replies.

``spec="template"`` means no LLM at all: attacks then fall back to their fixed wording and
report ``generated_by == "template"`` so every table can label such rows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragshield.errors import InputError
from ragshield.generate.base import Generator

#: Packaged model that writes attack text by default (``ragshield models list``).
DEFAULT_WRITER_MODEL = "qwen2.5-0.5b"
TEMPLATE = "template"


def default_cache_dir() -> Path:
    """``$RAGSHIELD_CACHE/attack-text`` or ``~/.cache/ragshield/attack-text``."""
    root = os.environ.get("RAGSHIELD_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "ragshield"
    return base / "attack-text"


@dataclass(frozen=True)
class Written:
    """One reply: the cleaned text, who wrote it and what it cost."""

    text: str
    raw: str
    generated_by: str
    seconds: float
    completion_tokens: int
    cached: bool


class TextWriter:
    """Writes text for an instruction with a generator (or reports that it cannot).

    Parameters
    ----------
    generator: a :class:`Generator`, a generator spec for
        :func:`ragshield.generate.factory.make_generator` (e.g. ``"qwen2.5-0.5b"``,
        ``"openai:http://127.0.0.1:8080/v1#m"``), ``"template"`` for no LLM, or ``None`` for
        the packaged default.
    cache_dir: where replies are cached when a spec is given (``None`` = the ragshield
        cache, :func:`default_cache_dir`; a :class:`Generator` object is used as passed).
    max_new_tokens: reply budget; 96 tokens holds a ~50-word passage (Tan et al.'s
        passages in the shared data have a median of 52 words).
    local_options: extra constructor options for a local model spec (e.g.
        :func:`ragshield.generate.factory.batch_job_options`); ignored otherwise.
    """

    def __init__(
        self,
        generator: Generator | str | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        max_new_tokens: int = 96,
        local_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.generator = generator
        self.cache_dir = cache_dir
        self.max_new_tokens = max_new_tokens
        self.local_options = dict(local_options or {})
        self._gen: Generator | None = None
        self._collect: list[str] | None = None

    @property
    def is_template(self) -> bool:
        return isinstance(self.generator, str) and self.generator.strip() == TEMPLATE

    @property
    def generator_(self) -> Generator:
        """The generator, built on first use (a spec is resolved here, not in ``__init__``)."""
        if self.is_template:
            raise InputError("this writer is 'template': it has no LLM to call.")
        if self._gen is None:
            if self.generator is None or isinstance(self.generator, str):
                from ragshield.generate.factory import make_generator

                spec = self.generator or DEFAULT_WRITER_MODEL
                options: dict[str, Any] = {"max_new_tokens": self.max_new_tokens}
                if not spec.startswith("openai:"):
                    options.update(stop_at_newline=False, prompt_style="ragfort")
                    options.update(self.local_options)
                self._gen = make_generator(
                    spec, cache_dir=self.cache_dir or default_cache_dir(), **options
                )
            else:
                self._gen = self.generator
        return self._gen

    @property
    def generated_by(self) -> str:
        """``"template"`` or ``"llm:<generator name>"`` — the label every result carries."""
        if self.is_template:
            return TEMPLATE
        name = self.generator if isinstance(self.generator, str) else None
        if name is None:
            name = getattr(self.generator, "name", None) or DEFAULT_WRITER_MODEL
        return f"llm:{name}"

    def warm_up(self) -> None:
        if not self.is_template:
            method = getattr(self.generator_, "warm_up", None)
            if callable(method):
                method()

    @property
    def can_prefetch(self) -> bool:
        """True when replies are cached and can be looked up (see the module docstring)."""
        return not self.is_template and callable(getattr(self.generator_, "lookup", None))

    @contextmanager
    def collecting(self) -> Iterator[list[str]]:
        """A dry run: inside, :meth:`write` answers from the cache only; an instruction not
        in it is appended to the yielded list and answered with the instruction itself (a
        stand-in that carries the target answer, so attacks do not ask for retries)."""
        if not self.can_prefetch:
            raise InputError("this writer's generator has no cache to collect against")
        self._collect = []
        try:
            yield self._collect
        finally:
            self._collect = None

    def prefetch(
        self,
        instructions: Sequence[str],
        *,
        chunk: int = 64,
        on_chunk: Callable[[int], None] | None = None,
    ) -> None:
        """Write every ``instruction`` not yet cached, ``chunk`` at a time (the generator
        batches each chunk; a stop loses at most one chunk)."""
        todo = list(dict.fromkeys(instructions))
        many = getattr(self.generator_, "generate_many", None)
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            if callable(many):
                many([(ins, []) for ins in part])
            else:
                for ins in part:
                    self.generator_.generate(ins, [])
            if on_chunk is not None:
                on_chunk(len(part))

    def write(self, instruction: str) -> Written:
        """The generator's reply to ``instruction``, cleaned by :func:`clean_reply`."""
        if self._collect is not None:
            hit = self.generator_.lookup(instruction, [])  # type: ignore[attr-defined]
            if hit is None:
                self._collect.append(instruction)
                return Written(
                    clean_reply(instruction), instruction, self.generated_by, 0.0, 0, False
                )
            out = hit
        else:
            out = self.generator_.generate(instruction, [])
        timings = dict(out.timings)
        details = dict(out.details)
        return Written(
            text=clean_reply(out.text),
            raw=out.text,
            generated_by=self.generated_by,
            seconds=float(sum(v for k, v in timings.items() if k in ("prefill", "decode"))),
            completion_tokens=int(out.completion_tokens),
            cached=details.get("cache") == "hit",
        )


def write_in_batches(
    writer: TextWriter,
    run: Callable[[], object],
    *,
    max_rounds: int = 8,
    on_chunk: Callable[[int], None] | None = None,
) -> None:
    """Fill ``writer``'s cache for everything ``run`` will ask, in batches: dry runs of
    ``run`` (:meth:`TextWriter.collecting`) alternate with :meth:`TextWriter.prefetch`
    until a dry run records nothing new (or ``max_rounds``). ``run`` is then called for
    real by the caller and reads every reply from the cache. A writer without a cache
    is left alone (``run`` then writes one reply at a time)."""
    if not writer.can_prefetch:
        return
    for _ in range(max_rounds):
        with writer.collecting() as pending:
            run()
        if not pending:
            return
        writer.prefetch(pending, on_chunk=on_chunk)


_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:corpus|passage|answer|text|paragraph|document|question|q|a)\s*"
    r"(?:\d+)?\s*(?:\*\*)?\s*[:：]\s*",
    re.IGNORECASE,
)


def clean_reply(text: str) -> str:
    """Strip what chat models wrap a passage in: labels ("Corpus:"), markdown bold and
    headings, surrounding quotes, blank lines (joined into one paragraph)."""
    lines = []
    for line in text.replace("\r", "").split("\n"):
        line = line.strip()
        if not line or line.startswith("#") or set(line) <= {"-", "*", "=", "_"}:
            continue
        lines.append(_LABEL.sub("", line).replace("**", "").strip())
    out = " ".join(x for x in lines if x).strip()
    if len(out) >= 2 and out[0] == out[-1] and out[0] in "\"'“”":
        out = out[1:-1].strip()
    return out.strip('"“” ')


def truncate_words(text: str, max_words: int) -> str:
    """At most ``max_words`` words, cut after the last full sentence inside the budget when
    there is one (so a passage does not end mid-sentence)."""
    words = text.split()
    if len(words) <= max_words:
        return text.strip()
    cut = " ".join(words[:max_words])
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    if cut.endswith((".", "!", "?")):
        return cut
    return cut[: end + 1] if end > len(cut) // 3 else cut


def drop_unfinished(text: str) -> str:
    """Cut a trailing unfinished sentence (a reply that hit the token budget), when at
    least one full sentence comes before it."""
    text = text.strip()
    if not text or text.endswith((".", "!", "?", '"', "”", ")")):
        return text
    end = max(text.rfind(". "), text.rfind("! "), text.rfind("? "))
    return text[: end + 1] if end > 0 else text
