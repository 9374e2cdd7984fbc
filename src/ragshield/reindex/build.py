"""RAGFort inter-class protection end to end: cluster, fine-tune, re-index (§4.2).

``reindex(INDEX_DIR, NEW_DIR)`` reads a saved FAISS index, labels its chunks with HDBSCAN
(reusing the vectors the index already holds: they *are* the base encoder's embeddings),
fine-tunes a copy of the base encoder with SupCon on those labels, re-encodes every chunk
with it and writes a new index. The chunks' text is untouched, so the generator still reads
the original chunk (§4.2, last paragraph).

Layout of ``NEW_DIR`` (a normal ragshield index plus three entries)::

    index.faiss, vectors.npy, passages.jsonl, meta.json   the re-indexed FaissStore
    novelty.npy     its novelty table; meta.json its profile (what ``ragshield index``
                    records, :func:`ragshield.indexing.record_statistics`, over the new
                    vectors; the operator's trusted ids carried over)
    encoder/        the fine-tuned sentence-transformers model
    labels.npy      HDBSCAN pseudo-label per row (-1 = noise), for audit and evaluation
    ragfort.json    which encoder must embed queries, clustering and training record

Query encoder: the paper keeps the query encoder unchanged (``symmetric=False``, the
default: queries use the base encoder against chunk vectors from the trained one); the
symmetric variant embeds queries with the trained encoder too. ``ragfort.json`` names the
right one under ``"query_encoder"`` (``"encoder"`` = the folder inside the index, else the
base model name or path); :func:`ragshield.indexing.open_index` and :func:`load_reindexed`
follow it. The whole directory appears at once (built beside it, then renamed).

Example::

    from ragshield.reindex import reindex, load_reindexed
    result = reindex("kb-index", "kb-index-ragfort", epochs=1, seed=0)
    store, query_encoder = load_reindexed("kb-index-ragfort")
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ragshield.embed.sentence_transformer import (
    DEFAULT_ENCODER,
    SentenceTransformerEncoder,
    resolve_model_path,
)
from ragshield.errors import InputError, check_int
from ragshield.reindex.labels import NOISE_POLICIES, pseudo_labels, training_labels
from ragshield.reindex.spec import RAGFORT_FILE, read_spec_file
from ragshield.reindex.supcon import TrainResult, train_supcon
from ragshield.store.faiss_store import FaissStore
from ragshield.store.persist import check_out_dir, replace_dir

ENCODER_DIR = "encoder"
FORMAT_VERSION = 1


@dataclass
class ReindexResult:
    """Summary of one re-index run (also written to ``ragfort.json``)."""

    out_dir: Path
    symmetric: bool
    query_encoder: str
    n_chunks: int
    n_clusters: int
    noise_share: float
    train: TrainResult | None
    seconds: dict[str, float] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)


def _base_encoder_name(store: FaissStore, encoder: str | os.PathLike[str] | None) -> str:
    """The base encoder: explicit, else the one the index records, else the packaged one."""
    if encoder is not None:
        return str(encoder)
    return store.encoder_name or DEFAULT_ENCODER


def plan_labels(
    index_dir: str | os.PathLike[str],
    *,
    min_cluster_size: int = 5,
    min_samples: int | None = 2,
    cluster_selection_method: Literal["eom", "leaf"] = "leaf",
) -> tuple[FaissStore, np.ndarray]:
    """Load the index and cluster its vectors (the cheap first step; ``--dry-run`` stops here)."""
    store = FaissStore.load(Path(index_dir))
    if len(store) < 2:
        raise InputError(f"{index_dir} holds {len(store)} chunk(s); re-indexing needs at least 2.")
    labels = pseudo_labels(
        store.vectors,
        min_cluster_size=min_cluster_size,
        min_samples=min_samples,
        cluster_selection_method=cluster_selection_method,
    )
    return store, labels


def reindex(
    index_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    symmetric: bool = False,  # RAGFort §4.2: "we do not modify the query encoder"
    encoder: str | os.PathLike[str] | None = None,
    min_cluster_size: int = 5,
    min_samples: int | None = 2,
    cluster_selection_method: Literal["eom", "leaf"] = "leaf",
    noise: str = "nearest",  # not in RAGFort; chosen on dev recall (see labels.py)
    epochs: float = 1.0,
    batch_size: int = 64,
    lr: float = 2e-5,
    temperature: float = 0.1,
    seed: int = 0,
    patience: int = 2,
    val_fraction: float = 0.1,
    max_seq_length: int = 128,
    max_steps: int | None = None,
    num_threads: int | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    ray_address: str | None = None,
    ray_workers: int = 2,
) -> ReindexResult:
    """Build a RAGFort re-index of ``index_dir`` at ``out_dir`` (see the module docstring).

    ``encoder`` overrides the base encoder recorded in the index (a local
    sentence-transformers folder or the packaged default's name). Clustering parameters go
    to :func:`~ragshield.reindex.labels.pseudo_labels`, ``noise`` is the noise policy of
    :func:`~ragshield.reindex.labels.training_labels`, the rest to
    :func:`~ragshield.reindex.supcon.train_supcon`. ``out_dir`` must not exist unless
    ``overwrite``; it is never the input index.

    ``ray_address`` (``"local"``, ``"auto"`` or ``ray://HOST:PORT``) re-encodes the chunks
    with the trained encoder on ``ray_workers`` Ray actors
    (:func:`ragshield.distributed.ray_encode`) instead of in this process: the encoder is
    shipped to the workers through Ray's object store, so they need no shared disk.
    Clustering and training stay here (one model, one optimiser); the index is the same up
    to float rounding (vectors within 1e-5).
    """
    if not isinstance(symmetric, bool):
        raise InputError(f"The 'symmetric' parameter of reindex must be a bool. Got {symmetric!r}.")
    if noise not in NOISE_POLICIES:
        raise InputError(
            f"The 'noise' parameter of reindex must be one of {', '.join(NOISE_POLICIES)}. "
            f"Got {noise!r} instead."
        )
    check_int(seed, "seed", "reindex", low=0)
    check_int(ray_workers, "ray_workers", "reindex", low=1)
    src, out = Path(index_dir), Path(out_dir)
    if out.resolve() == src.resolve():
        raise InputError("out_dir must differ from the input index: the original is kept.")
    if out.exists() and not overwrite:
        raise InputError(f"{out} already exists: pass another folder or overwrite=True (--force).")
    check_out_dir(out, probe=True)  # --force replaces an index, never anything else
    times: dict[str, float] = {}

    t = time.perf_counter()
    store, labels = plan_labels(
        src,
        min_cluster_size=min_cluster_size,
        min_samples=min_samples,
        cluster_selection_method=cluster_selection_method,
    )
    times["cluster"] = time.perf_counter() - t
    base_name = _base_encoder_name(store, encoder)
    base_path = resolve_model_path(None if base_name == DEFAULT_ENCODER else base_name)
    y = training_labels(labels, store.vectors, noise=noise)

    from ragshield.defenses.canary_marks import strip_canaries
    from ragshield.indexing import index_text, record_statistics

    # the stored chunks may carry canaries; as `ragshield index`, encode the plain texts
    plain = [replace(p, text=strip_canaries(p.text)) for p in store.passages]
    texts = [index_text(p) for p in plain]
    keep = np.flatnonzero(y >= 0) if noise == "drop" else np.arange(len(texts))

    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.work.", dir=out.parent))
    try:
        t = time.perf_counter()
        trained = train_supcon(
            None if base_name == DEFAULT_ENCODER else base_path,
            [texts[i] for i in keep],
            y[keep],
            out_dir=work / ENCODER_DIR,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            temperature=temperature,
            seed=seed,
            patience=patience,
            val_fraction=val_fraction,
            max_seq_length=max_seq_length,
            max_steps=max_steps,
            num_threads=num_threads,
            show_progress=show_progress,
        )
        times["train"] = time.perf_counter() - t

        t = time.perf_counter()
        new_encoder = SentenceTransformerEncoder(work / ENCODER_DIR, cache_size=0)
        if ray_address:
            from ragshield.distributed import ray_encode

            vectors = ray_encode(
                texts,
                model=str(work / ENCODER_DIR),
                address=ray_address,
                workers=ray_workers,
                ship_model=True,  # the trained encoder exists only on this machine so far
                show_progress=show_progress,
            )
        else:
            vectors = new_encoder.encode(texts, show_progress=show_progress)
        times["encode"] = time.perf_counter() - t

        query_encoder = ENCODER_DIR if symmetric else base_name
        new_store = FaissStore(
            store.dim,
            store.index_type,
            hnsw_m=store.hnsw_m,
            ef_search=store.ef_search,
            nlist=store.nlist,
            nprobe=store.nprobe,
            encoder_name=(str((out / ENCODER_DIR).resolve()) if symmetric else base_name),
        )
        new_store.add(store.passages, vectors)
        t = time.perf_counter()  # what `ragshield index` records, over the new vectors
        queries = (
            new_encoder
            if symmetric
            else SentenceTransformerEncoder(None if base_name == DEFAULT_ENCODER else base_name)
        )  # the injection thresholds are the query pipeline's encoder's (config.assemble)
        trusted = (store.profile or {}).get("trusted_ids", ())  # the operator's, as ids
        record_statistics(new_store, plain, vectors, queries, trusted_ids=trusted)
        injection = (new_store.profile or {}).get("injection")
        if symmetric and isinstance(injection, dict):  # the encoder's folder once moved
            injection["encoder"] = new_store.encoder_name
        times["statistics"] = time.perf_counter() - t
        stage = work / "index"
        new_store.save(stage)
        os.replace(work / ENCODER_DIR, stage / ENCODER_DIR)
        np.save(stage / "labels.npy", labels)
        n_clusters = int(labels.max() + 1) if (labels >= 0).any() else 0
        spec: dict[str, Any] = {
            "format": "ragfort-reindex",
            "format_version": FORMAT_VERSION,
            "query_encoder": query_encoder,
            "index_encoder": ENCODER_DIR,
            "base_encoder": base_name,
            "symmetric": symmetric,
            "source_index": str(src.resolve()),
            "n_chunks": len(texts),
            "clustering": {
                "method": "sklearn.cluster.HDBSCAN",
                "min_cluster_size": min_cluster_size,
                "min_samples": min_samples,
                "cluster_selection_method": cluster_selection_method,
                "n_clusters": n_clusters,
                "noise_share": float((labels < 0).mean()),
                "noise_policy": noise,
            },
            "training": trained.to_dict() | {"path": ENCODER_DIR},
            "seconds": times,
        }
        if ray_address:
            spec["encoding"] = {"ray_address": ray_address, "ray_workers": ray_workers}
        (stage / RAGFORT_FILE).write_text(json.dumps(spec, indent=2), encoding="utf-8")
        replace_dir(stage, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    trained.path = out / ENCODER_DIR
    return ReindexResult(
        out_dir=out,
        symmetric=symmetric,
        query_encoder=query_encoder,
        n_chunks=len(texts),
        n_clusters=n_clusters,
        noise_share=float((labels < 0).mean()),
        train=trained,
        seconds=times,
        spec=spec,
    )


def read_spec(index_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``ragfort.json`` of a re-indexed folder (InputError if it is not one)."""
    path = Path(index_dir) / RAGFORT_FILE
    if not path.is_file():
        raise InputError(
            f"{index_dir} is not a RAGFort re-index (no {RAGFORT_FILE}). Build one with "
            "'ragshield reindex INDEX_DIR --out NEW_DIR'."
        )
    return read_spec_file(path)


def load_reindexed(
    index_dir: str | os.PathLike[str], *, symmetric: bool | None = None
) -> tuple[FaissStore, SentenceTransformerEncoder]:
    """The re-indexed store and the encoder its queries must use.

    ``symmetric`` overrides the recorded choice (both encoders ship in the folder, so one
    re-index serves both variants in an evaluation).
    """
    root = Path(index_dir)
    spec = read_spec(root)
    store = FaissStore.load(root)
    use_trained = spec.get("symmetric", False) if symmetric is None else symmetric
    if use_trained:
        return store, SentenceTransformerEncoder(root / spec.get("index_encoder", ENCODER_DIR))
    base = spec.get("base_encoder", DEFAULT_ENCODER)
    return store, SentenceTransformerEncoder(None if base == DEFAULT_ENCODER else base)
