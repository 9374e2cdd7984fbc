"""Helpers for the index / input reliability tests (issue #15): run the real CLI entry
point and check that a failure is exit code 2 with one line naming the problem, and no
traceback. Plain functions, not fixtures, so this file cannot clash with a conftest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from fakes import write_jsonl
from ragshield.cli import run

DIM = 384  # the packaged encoder's dimension, so a fixture index also answers real queries


def fail_line(capsys: pytest.CaptureFixture[str], argv: list[str], *needles: str) -> str:
    """Run ``ragshield ARGV``; assert exit 2, a single error line holding every needle,
    no traceback. Returns the line."""
    capsys.readouterr()
    rc = run([str(a) for a in argv])
    cap = capsys.readouterr()
    text = cap.err + cap.out
    assert "Traceback" not in text, text
    assert rc == 2, f"exit {rc}: {text}"
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert len(lines) == 1, cap.err
    assert lines[0].startswith("error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    return lines[0]


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a hash of its content, and the names of its siblings,
    to prove a refused command touched nothing and made nothing beside it.

    Siblings are named, not hashed: they are other tests' folders under the same pytest
    basetemp, among them the session's PostgreSQL data folder, whose WAL the running server
    writes at any moment (hashing it made these tests fail at random in a full run)."""
    parent = root.parent
    out = {f"sibling:{p.name}": "" for p in parent.iterdir() if p != root}
    for p in sorted([root, *root.rglob("*")]):
        rel = p.relative_to(parent).as_posix()
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.exists():
            out[rel] = "dir"
    return out


def make_store(n: int = 6, dim: int = DIM, seed: int = 0):  # type: ignore[no-untyped-def]
    """A small real FAISS store over random unit vectors (no encoder needed)."""
    from ragshield.store.faiss_store import FaissStore
    from ragshield.types import Passage

    rng = np.random.default_rng(seed)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = FaissStore(dim)
    store.add([Passage(f"p{i}", f"passage number {i}.") for i in range(n)], vecs)
    return store


def forbid_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail loudly if anything encodes: a bad target must be refused before encoding."""
    from ragshield.embed import sentence_transformer

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("encoded before checking --out")

    monkeypatch.setattr(sentence_transformer.SentenceTransformerEncoder, "encode", refuse)
    monkeypatch.setattr(sentence_transformer.SentenceTransformerEncoder, "warm_up", refuse)


def write_corpus(tmp_path: Path) -> Path:
    return write_jsonl(
        tmp_path / "corpus.jsonl",
        [
            {"id": "a", "text": "Paris is the capital of France."},
            {"id": "b", "text": "Cats purr when they are content."},
        ],
    )
