"""A small classifier head on MiniLM sentence vectors: how much a sentence reads like an
instruction to the model. Weights are plain JSON (no pickle); the trained head ships as
``ragshield/data/injection_head.json``.

Example::

    from ragshield.defenses.injection.head import InjectionHead

    head = InjectionHead.packaged()                 # the shipped weights
    scores = head.score(sentence_vectors)           # (n,) in [0, 1], higher = injection
    head.save("my_head.json"); InjectionHead.load("my_head.json")

Why a head on the vectors ragshield already computes rather than a new model: no download,
no second encoder pass, ~10 µs per sentence (a dot product). A logistic-regression or
one-hidden-layer MLP head is enough to separate "addresses the model and tells it what to
do" from reference prose; what it cannot separate on its own (wording it was never shown,
encodings) is left to the deterministic rules and to per-index calibration
(:mod:`ragshield.defenses.injection.calibration`). Training data and licences:
``benchmarks/train_injection_head.py`` and the ``trained_on`` field of the JSON.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.errors import InputError

__all__ = ["PACKAGED", "InjectionHead"]

PACKAGED = "injection_head.json"


@dataclass(frozen=True)
class InjectionHead:
    """``layers`` = [(W, b), ...]; hidden layers use ReLU, the last one a sigmoid.

    ``thresholds`` are the head's own operating points measured when it was trained
    (``{"fpr1": t, "fpr0.1": t}`` on the training benign text), used only when an index
    carries no calibration of its own.
    """

    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    encoder: str = ""
    thresholds: Mapping[str, float] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: hand-made features appended to each sentence vector, in this order
    #: (:data:`ragshield.defenses.injection.features.FEATURES`)
    features: tuple[str, ...] = ()
    #: factor on the score of a sentence that :func:`~ragshield.defenses.injection.
    #: features.mention_kind` reads as a notice to a person or a description of AI (1.0:
    #: none; the shipped head's value is a dev choice, docs/results-injection.md)
    mention_discount: float = 1.0
    #: weight of :func:`~ragshield.defenses.injection.context.offtopic` added to a
    #: sentence's own score (0.0: none; the shipped value is a dev choice,
    #: docs/results-injection.md)
    offtopic_boost: float = 0.0

    @property
    def dim(self) -> int:
        """Input width: the sentence vector plus :attr:`features`."""
        return int(self.layers[0][0].shape[0])

    @property
    def ident(self) -> str:
        """The head's id (``meta["id"]``, written by the training script; else a digest of
        its weights): what an index's calibration records, so that thresholds measured with
        one head are never read with another."""
        if self.meta.get("id"):
            return str(self.meta["id"])
        raw = b"".join(
            np.ascontiguousarray(a, np.float32).tobytes() for wb in self.layers for a in wb
        )
        return "weights-" + hashlib.blake2b(raw, digest_size=6).hexdigest()

    @property
    def vector_dim(self) -> int:
        """Width of the sentence vector the head reads (the encoder's dimension)."""
        return self.dim - len(self.features)

    def score(self, vectors: np.ndarray) -> np.ndarray:
        """Injection probability per row of ``vectors`` (unit sentence vectors)."""
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim != 2 or (x.shape[0] and x.shape[1] != self.dim):
            raise InputError(
                f"the injection head takes {self.dim}-d sentence vectors; got shape {x.shape}: "
                "use the encoder it was trained on, or retrain it."
            )
        for i, (w, b) in enumerate(self.layers):
            x = x @ w + b
            if i < len(self.layers) - 1:
                x = np.maximum(x, 0.0)
        z = np.clip(x[:, 0].astype(np.float64), -60.0, 60.0)
        out: np.ndarray = 1.0 / (1.0 + np.exp(-z))
        return out

    # ------------------------------------------------------------------ files

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "ragshield-injection-head/1",
            "encoder": self.encoder,
            "layers": [{"W": w.tolist(), "b": b.tolist()} for w, b in self.layers],
            "thresholds": dict(self.thresholds),
            "meta": dict(self.meta),
            "features": list(self.features),
            "mention_discount": self.mention_discount,
            "offtopic_boost": self.offtopic_boost,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InjectionHead:
        try:
            layers = tuple(
                (np.asarray(layer["W"], dtype=np.float32), np.asarray(layer["b"], dtype=np.float32))
                for layer in data["layers"]
            )
            if not layers or any(w.ndim != 2 or b.shape != (w.shape[1],) for w, b in layers):
                raise ValueError("layer shapes do not chain")
            for (w1, _), (w2, _) in itertools.pairwise(layers):
                if w1.shape[1] != w2.shape[0]:
                    raise ValueError("layer shapes do not chain")
            if layers[-1][0].shape[1] != 1:
                raise ValueError("the last layer must have one output")
            from ragshield.defenses.injection.features import FEATURES

            features = tuple(str(f) for f in data.get("features", ()))
            if unknown := [f for f in features if f not in FEATURES]:
                raise ValueError(f"unknown features {unknown}")
            _check_feature_version(features, dict(data.get("meta", {})))
            if len(features) >= layers[0][0].shape[0]:
                raise ValueError("more features than inputs")
            discount = float(data.get("mention_discount", 1.0))
            if not 0.0 < discount <= 1.0:
                raise ValueError(f"mention_discount must be in (0, 1], got {discount}")
            boost = float(data.get("offtopic_boost", 0.0))
            if not 0.0 <= boost <= 10.0:
                raise ValueError(f"offtopic_boost must be in [0, 10], got {boost}")
            return cls(
                layers=layers,
                encoder=str(data.get("encoder", "")),
                thresholds={str(k): float(v) for k, v in dict(data.get("thresholds", {})).items()},
                meta=dict(data.get("meta", {})),
                features=features,
                mention_discount=discount,
                offtopic_boost=boost,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"unreadable injection head ({exc}); retrain or reinstall it") from exc

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> InjectionHead:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the injection head {p}: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def packaged(cls) -> InjectionHead:
        """The head shipped in ``ragshield/data`` (trained by
        ``benchmarks/train_injection_head.py``)."""
        return _packaged()

    @classmethod
    def from_sklearn(
        cls,
        model: Any,
        *,
        encoder: str = "",
        thresholds: Mapping[str, float] | None = None,
        meta: Mapping[str, Any] | None = None,
        features: Sequence[str] = (),
    ) -> InjectionHead:
        """From a fitted ``LogisticRegression`` (binary) or ``MLPClassifier`` (ReLU)."""
        if hasattr(model, "coefs_"):
            if getattr(model, "activation", "relu") != "relu":
                raise InputError("only ReLU MLP heads are supported")
            layers: Sequence[tuple[np.ndarray, np.ndarray]] = [
                (np.asarray(w, np.float32), np.asarray(b, np.float32))
                for w, b in zip(model.coefs_, model.intercepts_, strict=True)
            ]
        else:
            layers = [
                (
                    np.asarray(model.coef_, np.float32).T,
                    np.asarray(model.intercept_, np.float32).reshape(1),
                )
            ]
        return cls(
            tuple(layers), encoder, dict(thresholds or {}), dict(meta or {}), tuple(features)
        )


def _check_feature_version(features: Sequence[str], meta: Mapping[str, Any]) -> None:
    """A head reads ``addressed`` as it was trained (:data:`~ragshield.defenses.injection.
    features.ADDRESSED_VERSION`; a head trained before the version was recorded read 1):
    weights fitted to another reading of the feature would score every sentence off the
    thresholds they were calibrated for, so such a head is refused, not silently mixed;
    and the reading needs its English lexicon."""
    from ragshield.defenses.injection.features import ADDRESSED_VERSION, lexicon_available

    if "addressed" not in features:
        return
    version = int(meta.get("addressed_version", 1))
    if version != ADDRESSED_VERSION:
        raise ValueError(
            f"it was trained with version {version} of the 'addressed' feature and this "
            f"ragshield computes version {ADDRESSED_VERSION}: retrain it with "
            "benchmarks/train_injection_head.py"
        )
    if not lexicon_available():
        raise ValueError(
            "its 'addressed' feature reads English verbs with lemminflect, which is not "
            "installed (pip install lemminflect)"
        )


_CACHE: dict[str, InjectionHead] = {}


def _packaged() -> InjectionHead:
    if PACKAGED not in _CACHE:
        try:
            raw = resources.files("ragshield").joinpath(f"data/{PACKAGED}").read_text("utf-8")
        except FileNotFoundError as exc:
            raise InputError(
                f"the packaged injection head ragshield/data/{PACKAGED} is missing; run "
                "benchmarks/train_injection_head.py or reinstall ragshield"
            ) from exc
        _CACHE[PACKAGED] = InjectionHead.from_dict(json.loads(raw))
    return _CACHE[PACKAGED]
