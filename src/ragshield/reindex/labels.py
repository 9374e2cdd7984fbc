"""Pseudo-labels for RAGFort's re-indexing (§4.2, "Pseudo-Labeling via HDBSCAN Clustering").

HDBSCAN finds the latent topics of a knowledge base without being told how many there are,
and leaves outliers unlabelled (-1). What happens to those noise points is a design choice
the paper does not make; on real text embeddings it matters, because HDBSCAN calls half or
more of the chunks noise (ChatDoctor, MiniLM: ~50-70 %). :func:`training_labels` offers
three documented policies:

``"nearest"`` (default)
    noise joins the cluster with the nearest centroid (cosine), so every chunk has a topic
    and is pulled towards it.
``"singleton"``
    every noise point is its own class: it is never an anchor (it has no positive) but it
    is a negative for everybody else, so SupCon pushes topics away from outliers without
    pulling outliers into a topic they do not belong to.
``"drop"``
    noise is left out of training entirely (it is still re-encoded and re-indexed).

Why ``"nearest"`` by default (benchmarks/bench_ragfort.py, ChatDoctor 5,452 chunks, seed 0,
1 epoch, choice made on the dev half): with the paper's asymmetric index, recall@5 of the
right chunk fell from 0.306 to 0.270 with ``"nearest"`` and to 0.234 with ``"singleton"``,
while an extraction walk reached about as few chunks (112 vs 109 of base 138).
``"singleton"`` isolates far more in the symmetric variant (41 vs 86 chunks reached) at a
larger recall cost (dev 0.234 vs 0.276): the choice when isolation matters more than recall.

Example::

    from ragshield.reindex import pseudo_labels, training_labels
    labels = pseudo_labels(store.vectors)            # -1 = noise
    y = training_labels(labels, store.vectors, noise="nearest")
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ragshield.errors import InputError, check_int

NoisePolicy = Literal["singleton", "nearest", "drop"]
NOISE_POLICIES: tuple[str, ...] = ("singleton", "nearest", "drop")


def _check_vectors(vectors: object, owner: str) -> np.ndarray:
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or not np.isfinite(x).all():
        raise InputError(
            f"{owner} needs a finite (n >= 2, dim) array of chunk vectors; got shape "
            f"{getattr(x, 'shape', None)}."
        )
    return x


def pseudo_labels(
    vectors: np.ndarray,
    *,
    min_cluster_size: int = 5,  # scikit-learn HDBSCAN default; RAGFort §4.2 gives none
    min_samples: int | None = 2,  # not in RAGFort; sklearn's None (= 5) calls ~70 % noise
    # not in RAGFort; sklearn's "eom" put 96 % of ChatDoctor (input + output) in one cluster
    cluster_selection_method: Literal["eom", "leaf"] = "leaf",
) -> np.ndarray:
    """HDBSCAN cluster ids per chunk vector, ``-1`` for noise.

    Measured on ChatDoctor's 5,452 records with MiniLM vectors: ``leaf`` finds 223 topics
    (66 % noise) on patient + doctor text and 336 (51 % noise) on doctor answers alone;
    ``eom`` finds 4 topics on the former (one of 5,211 chunks) and 317 on the latter.

    Vectors are L2-normalised first, so the Euclidean distance HDBSCAN uses is a monotone
    function of cosine similarity (what the retriever ranks by). ``min_cluster_size`` is
    clipped to the number of vectors so a tiny index still clusters.
    """
    owner = "pseudo_labels"
    x = _check_vectors(vectors, owner)
    check_int(min_cluster_size, "min_cluster_size", owner, low=2)
    if min_samples is not None:
        check_int(min_samples, "min_samples", owner, low=1)
    if cluster_selection_method not in ("eom", "leaf"):
        raise InputError(
            f"The 'cluster_selection_method' parameter of {owner} must be 'eom' or 'leaf'. "
            f"Got {cluster_selection_method!r} instead."
        )
    from sklearn.cluster import HDBSCAN

    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    size = min(min_cluster_size, x.shape[0])
    labels: np.ndarray = HDBSCAN(
        min_cluster_size=size,
        min_samples=None if min_samples is None else min(min_samples, size),
        cluster_selection_method=cluster_selection_method,
        copy=True,
    ).fit_predict(x)
    return labels.astype(np.int64)


def training_labels(
    labels: np.ndarray, vectors: np.ndarray | None = None, *, noise: str = "nearest"
) -> np.ndarray:
    """Labels for SupCon training from HDBSCAN labels, per the noise policy above.

    The result keeps -1 for noise under ``"singleton"`` and ``"drop"`` (the trainer treats
    -1 as "negative only" and :func:`~ragshield.reindex.build.reindex` removes dropped
    points before training); under ``"nearest"`` every point gets a cluster id, which needs
    ``vectors``. If HDBSCAN found no cluster at all, nothing can be learned and this fails
    with advice.
    """
    lab = np.asarray(labels, dtype=np.int64)
    if lab.ndim != 1:
        raise InputError(f"labels must be 1-D; got shape {lab.shape}.")
    if noise not in NOISE_POLICIES:
        raise InputError(
            f"The 'noise' parameter must be one of {', '.join(NOISE_POLICIES)}. "
            f"Got {noise!r} instead."
        )
    clustered = lab >= 0
    if not clustered.any():
        raise InputError(
            "HDBSCAN labelled every chunk as noise, so there are no topics to separate. "
            "Lower min_cluster_size or min_samples, or use cluster_selection_method='leaf'."
        )
    if noise != "nearest" or clustered.all():
        return lab.copy()
    if vectors is None:
        raise InputError("noise='nearest' needs the chunk vectors to find nearest centroids.")
    x = _check_vectors(vectors, "training_labels")
    if x.shape[0] != lab.shape[0]:
        raise InputError(f"{lab.shape[0]} labels but {x.shape[0]} vectors: they must match.")
    ids = np.unique(lab[clustered])
    # centroid of each cluster via one sparse-free matrix product: onehot.T @ x / counts
    onehot = (lab[clustered][:, None] == ids[None, :]).astype(np.float64)
    cents = onehot.T @ x[clustered] / onehot.sum(axis=0)[:, None]
    cents /= np.maximum(np.linalg.norm(cents, axis=1, keepdims=True), 1e-12)
    out = lab.copy()
    out[~clustered] = ids[np.argmax(x[~clustered] @ cents.T, axis=1)]
    return out
