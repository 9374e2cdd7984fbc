"""How RAGFort's cascade asks a model for next-token logits: a ``transformers`` causal LM
with a KV cache rolled back to the longest common prefix, a backend's own scorer (a model
object with ``cascade_scorer()``: llama.cpp's, :mod:`ragshield.generate.llama_cascade`), or
a user callable over explicit prefixes, all counting forwards, tokens and seconds
(:mod:`ragshield.generate.cascade`).

Why apart: the cascade's loop needs only ``logits(ids, n_last)`` and the counts; how a
model's cache is kept and cropped is a separate concern of each kind of model.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragshield.errors import InputError

LogitsFn = Callable[[list[list[int]]], np.ndarray]

_OWNER = "CascadeGenerator"  # the class whose parameters these are


@dataclass
class _Counter:
    forwards: int = 0
    tokens: int = 0
    seconds: float = 0.0


class _Scorer:
    """Next-token logits for the last ``n_last`` prefixes of one growing sequence."""

    params: int | None = None
    counter: _Counter

    def logits(self, ids: list[int], n_last: int) -> np.ndarray:
        raise NotImplementedError

    def reset(self) -> None:
        self.counter = _Counter()


class _HFScorer(_Scorer):
    """KV-cached scoring with a ``transformers`` causal LM (batch of one sequence).

    The cache always matches ``self._ids``; a new call keeps the longest common prefix
    (cropping off rejected draft tokens) and feeds only the rest, so a draft step costs one
    token and a verification costs γ + 1 tokens.
    """

    def __init__(self, model: Any) -> None:
        import torch

        self.model = model
        self.params = int(sum(p.numel() for p in model.parameters()))
        self._torch = torch
        self._cache: Any = None
        self._ids: list[int] = []
        params = inspect.signature(model.forward).parameters
        self._keep_arg = "logits_to_keep" in params
        self.counter = _Counter()

    def reset(self) -> None:
        self._cache = None
        self._ids = []
        self.counter = _Counter()

    def _crop(self, keep: int) -> None:
        if self._cache is None:
            return
        have = int(self._cache.get_seq_length())
        if keep >= have:
            return
        if keep == 0:
            self._cache = None
            return
        # A negative argument removes that many tokens in transformers 4.x and 5.x alike.
        self._cache.crop(-(have - keep))

    def logits(self, ids: list[int], n_last: int) -> np.ndarray:
        torch = self._torch
        lcp = 0
        for a, b in zip(self._ids, ids, strict=False):
            if a != b:
                break
            lcp += 1
        keep = min(lcp, len(ids) - n_last)
        self._crop(keep)
        if self._cache is None:
            keep = 0
        new = ids[keep:]
        kwargs: dict[str, Any] = {"use_cache": True}
        if self._keep_arg:
            kwargs["logits_to_keep"] = n_last
        if self._cache is not None:
            kwargs["past_key_values"] = self._cache
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model(input_ids=torch.tensor([new], dtype=torch.long), **kwargs)
        self.counter.seconds += time.perf_counter() - t0
        self.counter.forwards += 1
        self.counter.tokens += len(new)
        self._cache = out.past_key_values
        self._ids = list(ids)
        result: np.ndarray = out.logits[0, -n_last:].float().numpy()
        return result


class _CallableScorer(_Scorer):
    """A user callable over explicit prefixes (no cache): one call counts as one forward."""

    def __init__(self, fn: LogitsFn, params: int | None) -> None:
        self.fn = fn
        self.params = params
        self.counter = _Counter()

    def logits(self, ids: list[int], n_last: int) -> np.ndarray:
        n = len(ids)
        prefixes = [ids[: n - n_last + 1 + i] for i in range(n_last)]
        t0 = time.perf_counter()
        out = np.asarray(self.fn(prefixes), dtype=np.float64)
        self.counter.seconds += time.perf_counter() - t0
        self.counter.forwards += 1
        self.counter.tokens += n_last
        if out.ndim != 2 or out.shape[0] != n_last:
            raise InputError(
                f"a logits callable must return shape (len(prefixes), vocab); got "
                f"{out.shape} for {n_last} prefixes."
            )
        return out


def _unwrap(obj: Any) -> Any:
    """Accept a ragshield LLM generator (``.model_``) as well as a bare model."""
    return getattr(obj, "model_", obj)


def _make_scorer(obj: Any, params: int | None, role: str) -> _Scorer:
    model = _unwrap(obj)
    own = getattr(model, "cascade_scorer", None)  # a backend's own (llama.cpp: llama_cascade)
    if callable(own):
        scorer: _Scorer = own()
        return scorer
    if hasattr(model, "forward") and hasattr(model, "config"):
        return _HFScorer(model)
    if callable(model):
        return _CallableScorer(model, params)
    raise InputError(
        f"The '{role}' parameter of {_OWNER} must be a transformers causal LM, an object with "
        f"a '.model_' attribute, or a callable returning next-token logits. Got "
        f"{type(obj).__name__} instead."
    )
