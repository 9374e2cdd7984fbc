"""bench_adaptive_poisoning's hits cache: an entry is reused only for the planted passages
it was made from (a changed attack text is planted and retrieved again), and a cache file
of the older format (no fingerprints) is read as empty, not trusted."""

from __future__ import annotations

import pickle
from pathlib import Path
from types import SimpleNamespace

from bench_modules import benchmark

bench = benchmark("bench_adaptive_poisoning")


def _planted(*texts: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(passage=SimpleNamespace(id=f"adv{i}", text=t))
            for i, t in enumerate(texts)]  # fmt: skip


def test_the_fingerprint_follows_the_planted_texts() -> None:
    a = bench.fingerprint(_planted("one note", "another"))
    assert a == bench.fingerprint(_planted("one note", "another"))
    assert a != bench.fingerprint(_planted("one note", "another, reworded"))
    assert a != bench.fingerprint(_planted("another", "one note"))  # ids follow positions
    assert bench.fingerprint(_planted("ab", "c")) != bench.fingerprint(_planted("a", "bc"))


def test_an_old_cache_file_is_read_as_empty(tmp_path: Path) -> None:
    old = tmp_path / "old.pkl"
    old.write_bytes(pickle.dumps({"clean": ("hits", {}, 0.0, "-")}))  # keyed by name only
    assert bench._load_cache(old) == ({}, {})
    assert bench._load_cache(tmp_path / "missing.pkl") == ({}, {})
    new = tmp_path / "new.pkl"
    new.write_bytes(pickle.dumps({"version": bench.CACHE_VERSION, "entries": {"clean": 1},
                                  "prints": {"clean": "ab"}}))  # fmt: skip
    assert bench._load_cache(new) == ({"clean": 1}, {"clean": "ab"})
