"""The Encoder seam: text in, L2-normalised float32 rows out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns texts into unit-length vectors.

    Contract: ``encode`` returns an array of shape ``(len(texts), dim)``, dtype float32, each
    row with L2 norm 1 (so inner product == cosine everywhere downstream). ``name`` identifies
    the model so an index built with one encoder is never searched with another.
    """

    name: str

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray: ...


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-normalise; zero rows stay zero instead of becoming NaN."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
