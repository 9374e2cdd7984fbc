"""An encoder whose vectors persist to one ``.npz`` keyed by text hash: benchmark plumbing.

Why: the benchmarks re-encode the same evaluation passages on every run (the poisoning
sets' ~3,000 passages, the real-retrieval section's 1,888 passages and ~10k sentences:
minutes per run on a contended core). The vectors are exactly what the wrapped encoder
returned the first time; the latency sections use the plain encoder. One class for
``bench_poisoning`` (and ``bench_filter`` through it) and ``bench_ecosaferag`` (and the
injection benchmarks through it), which each had their own copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragshield.embed.sentence_transformer import SentenceTransformerEncoder


class DiskCachedEncoder:
    """``inner`` with a text-hash -> vector cache at ``path``.

    ``save()`` writes the cache when something new was encoded; ``autosave`` does that
    after every call that encoded something (a long run interrupted keeps its vectors).
    """

    def __init__(
        self, inner: SentenceTransformerEncoder, path: Path, *, autosave: bool = False
    ) -> None:
        self.inner, self.path, self.name = inner, path, inner.name
        self.autosave = autosave
        self._vec: dict[bytes, np.ndarray] = {}
        self._dirty = False
        if path.exists():
            with np.load(path, allow_pickle=False) as z:
                # bench_poisoning's cache predates this module: hex keys, "vectors"
                vecs = z["vecs"] if "vecs" in z else z["vectors"]
                # (numpy's "S" strips a digest's trailing NULs: padded back, or it would miss)
                keys = [
                    bytes.fromhex(k) if isinstance(k, str) else k.ljust(16, b"\0")
                    for k in z["keys"].tolist()
                ]
                self._vec = dict(zip(keys, vecs, strict=True))

    @property
    def dim(self) -> int:
        return self.inner.dim

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        keys = [SentenceTransformerEncoder._key(t) for t in texts]
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vec}
        if todo:
            vecs = self.inner.encode(list(todo.values()), show_progress=show_progress)
            self._vec.update(zip(todo, vecs, strict=True))
            self._dirty = True
            if self.autosave:
                self.save()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._vec[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        if self._dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = np.array(list(self._vec), dtype="S16")
            tmp = self.path.with_suffix(".tmp.npz")
            np.savez(tmp, keys=keys, vecs=np.vstack(list(self._vec.values())))
            tmp.replace(self.path)
            self._dirty = False
