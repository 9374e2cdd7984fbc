"""Disk cache for generator answers, so a rerun of an evaluation costs nothing.

Example::

    from ragshield.generate.cache import CachedGenerator
    from ragshield.generate.local_hf import LocalLLMGenerator
    gen = CachedGenerator(LocalLLMGenerator("qwen2.5-0.5b"), "runs/gen-cache")
    gen.generate("Who designed the tower?", ["Gustave Eiffel designed it."])  # computed
    gen.generate("Who designed the tower?", ["Gustave Eiffel designed it."])  # read back
    CachedGenerator(LocalLLMGenerator("qwen2.5-0.5b"))  # no folder: kept in memory only

Why: a local LLM answers at a few tokens per second on this CPU, and the evaluations ask
the same (question, contexts) many times across defenses, ratios and reruns. The key is a
sha256 over the generator's identity (model id and checksum, decoding parameters) and the
exact chat messages, so changing the model, a decoding setting or the prompt template
never returns a stale answer. Each answer is one JSON file written to a temporary name and
renamed, so concurrent workers never read half a file and a crash loses at most the answer
being computed. Without a folder the answers live in memory for the wrapper's lifetime:
what the evaluation harnesses use to answer a repeated (question, contexts) once per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ragshield.errors import InputError, check_query
from ragshield.generate import counters
from ragshield.generate.base import Generator
from ragshield.generate.prompt import build_messages
from ragshield.types import Generation

_FORMAT = 1


def generator_identity(generator: Generator) -> dict[str, Any]:
    """What identifies a generator's behaviour: its ``cache_identity()`` if it has one.

    Generators without one are identified by class and name only; give such a generator a
    ``cache_identity`` method if its output depends on settings that are not in its name.
    """
    method = getattr(generator, "cache_identity", None)
    if callable(method):
        ident = method()
        if isinstance(ident, Mapping):
            return dict(ident)
    cls = type(generator)
    return {
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "name": getattr(generator, "name", None),
    }


def wrapper_chain(generator: Any) -> Iterator[Any]:
    """``generator`` and each generator it wraps (``.inner``), outermost first: what reads
    a property of the model behind the answer cache, the micro-batcher or an output check.
    At most 16 deep (a chain is a few deep; a cycle must not hang)."""
    seen = generator
    for _ in range(16):
        if seen is None:
            return
        yield seen
        seen = getattr(seen, "inner", None)


def prompt_style_of(generator: Generator) -> str:
    """The prompt template a generator renders, read through wrappers (``.inner``): the
    cache can then sit outside the micro-batcher and still key on the model's prompt."""
    for seen in wrapper_chain(generator):
        style = getattr(seen, "prompt_style", None)
        if isinstance(style, str):
            return style
    return "poisonedrag"


class Wrapping:
    """What a generator that wraps another (``self.inner``) hands straight through: the
    model load, token counting and the answer cache's identity (a wrapper that does not
    change the answers must not change the cache key). Mixed into the answer cache, the
    micro-batcher and the canary output check, which each wrote these three methods."""

    inner: Generator

    def warm_up(self) -> None:
        method = getattr(self.inner, "warm_up", None)
        if callable(method):
            method()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def cache_identity(self) -> dict[str, Any]:
        return generator_identity(self.inner)


class CachedGenerator(Wrapping):
    """Wraps any :class:`Generator`; answers are read from ``cache_dir`` when present
    (``cache_dir=None``: from this instance's memory).

    A hit returns the stored :class:`Generation` (its original token counts and timings,
    so cost reports stay those of the real model) with ``details["cache"] == "hit"``.
    ``hits`` and ``misses`` count this instance's lookups.
    """

    def __init__(self, inner: Generator, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self.inner = inner
        self.cache_dir = cache_dir
        self._memory: dict[str, dict[str, Any]] = {}
        self.name = inner.name
        self.hits = 0
        self.misses = 0

    def key(self, question: str, contexts: Sequence[str]) -> str:
        """The cache key of one call (hex sha256)."""
        return hashlib.sha256(_canonical(self._payload(question, contexts))).hexdigest()

    def _payload(self, question: str, contexts: Sequence[str]) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "generator": generator_identity(self.inner),
            "messages": build_messages(question, list(contexts), prompt_style_of(self.inner)),
        }

    def _file(self, key: str) -> Path:
        assert self.cache_dir is not None
        return Path(self.cache_dir).expanduser() / key[:2] / f"{key}.json"

    def _stored(self, question: str, contexts: Sequence[str]) -> tuple[dict[str, Any], Any]:
        check_query(question)
        if isinstance(contexts, str) or not isinstance(contexts, Sequence):
            raise InputError("contexts must be a list of passage texts, not a bare string.")
        payload = self._payload(question, contexts)
        key = hashlib.sha256(_canonical(payload)).hexdigest()
        stored = self._memory.get(key) if self.cache_dir is None else _read(self._file(key))
        return payload, stored

    def _store(self, payload: dict[str, Any], gen: Generation) -> Generation:
        key = hashlib.sha256(_canonical(payload)).hexdigest()
        record: dict[str, Any] = {
            "key": key,
            "request": payload,
            "generation": _from_generation(gen),
        }
        if self.cache_dir is None:
            self._memory[key] = record
        else:
            _write_atomic(self._file(key), record)
        return _to_generation(record["generation"], cache="miss")

    def lookup(self, question: str, contexts: Sequence[str]) -> Generation | None:
        """The stored answer, or ``None``; never calls the generator (and counts nothing)."""
        _, stored = self._stored(question, contexts)
        return None if stored is None else _to_generation(stored["generation"], cache="hit")

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        payload, stored = self._stored(question, contexts)
        if stored is not None:
            self.hits += 1
            counters.add(cache_hits=1)
            return _to_generation(stored["generation"], cache="hit")
        self.misses += 1
        return self._store(payload, self.inner.generate(question, contexts))

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        """:meth:`generate` for many requests: hits are read back, the misses go to the
        inner generator's ``generate_many`` in one call when it has one (a local model
        then decodes them in batches), else one by one. Answers are stored when that
        call returns: callers that must resume after a stop pass modest chunks."""
        out: list[Generation | None] = []
        missing: dict[str, tuple[dict[str, Any], tuple[str, Sequence[str]], list[int]]] = {}
        for i, (question, contexts) in enumerate(requests):
            payload, stored = self._stored(question, contexts)
            if stored is None:
                key = hashlib.sha256(_canonical(payload)).hexdigest()
                missing.setdefault(key, (payload, (question, contexts), []))[2].append(i)
                out.append(None)
            else:
                self.hits += 1
                out.append(_to_generation(stored["generation"], cache="hit"))
        self.misses += len(missing)
        counters.add(cache_hits=len(requests) - len(missing))  # stored or repeated
        todo = list(missing.values())
        many = getattr(self.inner, "generate_many", None)
        if todo and callable(many):
            made = many([req for _, req, _ in todo])
        else:
            made = [self.inner.generate(q, c) for _, (q, c), _ in todo]
        for (payload, _, where), gen in zip(todo, made, strict=True):
            stored_gen = self._store(payload, gen)
            for i in where:  # a request repeated in the list is computed once
                out[i] = stored_gen
        return [g for g in out if g is not None]


def answer_once(generator: Generator | None) -> CachedGenerator | None:
    """``generator`` behind an in-memory :class:`CachedGenerator` (unless it already is
    one), so an evaluation asks it each distinct (question, contexts) once."""
    if generator is None or (
        isinstance(generator, CachedGenerator) and generator.cache_dir is None
    ):
        return generator
    return CachedGenerator(generator)


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def _read(path: Path) -> dict[str, Any] | None:
    """A stored record, or ``None`` when absent or unreadable (then it is recomputed)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("generation"), dict):
        return None
    return data


def _write_atomic(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, ensure_ascii=False, default=str)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _from_generation(gen: Generation) -> dict[str, Any]:
    return {
        "text": gen.text,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": gen.completion_tokens,
        "timings": dict(gen.timings),
        "details": json.loads(json.dumps(dict(gen.details), default=str)),
    }


def _to_generation(data: Mapping[str, Any], *, cache: str) -> Generation:
    return Generation(
        text=str(data.get("text", "")),
        prompt_tokens=int(data.get("prompt_tokens", 0)),
        completion_tokens=int(data.get("completion_tokens", 0)),
        timings={str(k): float(v) for k, v in dict(data.get("timings", {})).items()},
        details={**dict(data.get("details", {})), "cache": cache},
    )
