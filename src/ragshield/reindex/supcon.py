"""Supervised contrastive fine-tuning of a sentence encoder on pseudo-labels (RAGFort §4.2).

The loss is Eq. 1 of the paper (Khosla et al. 2020's SupCon with cosine similarity and
temperature τ). Batches are built so every anchor that belongs to a topic has positives in
its batch: topics are cut into groups of ``samples_per_class`` chunks and whole groups are
packed into a batch; noise chunks (label -1) fill a share of each batch as negatives only.

Training is real torch training of a *copy* of a sentence-transformers model on CPU: AdamW,
linear warm-up, gradient clipping, a seeded run, a progress bar, and early stopping on the
SupCon loss of a held-out validation split (whole pairs of each sampled topic, so
validation anchors have positives too). The best checkpoint is what gets saved.

Example::

    from ragshield.reindex import train_supcon
    result = train_supcon(None, texts, labels, out_dir="new-index/encoder", epochs=1)
    print(result.best_val_loss, result.seconds)
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.errors import InputError, check_float, check_int

_OWNER = "train_supcon"


def supcon_loss(
    features: Any, labels: Any, temperature: float = 0.1, *, reduction: str = "mean"
) -> Any:
    """Eq. 1: Σ_i −1/|P(i)| Σ_{p∈P(i)} log( exp(sim(z_i,z_p)/τ) / Σ_{a∈A(i)} exp(sim(z_i,z_a)/τ) ).

    ``features``: (B, d) torch tensor (normalised here: sim is cosine); ``labels``: (B,)
    ints. P(i) = other samples with i's label, A(i) = every sample but i. Anchors without a
    positive in the batch have an undefined term and are skipped. ``reduction="sum"`` is
    Eq. 1 as printed; ``"mean"`` (default) divides by the number of anchors with
    positives, so the learning rate does not depend on how many anchors a batch has.
    """
    import torch
    import torch.nn.functional as F

    if reduction not in ("mean", "sum"):
        raise InputError(f"reduction must be 'mean' or 'sum'. Got {reduction!r} instead.")
    if temperature <= 0:
        raise InputError(f"temperature must be > 0. Got {temperature!r} instead.")
    z = F.normalize(features, dim=1)
    lab = torch.as_tensor(labels, device=z.device).reshape(-1)
    if lab.shape[0] != z.shape[0]:
        raise InputError(f"{z.shape[0]} feature rows but {lab.shape[0]} labels.")
    n = z.shape[0]
    self_mask = torch.eye(n, dtype=torch.bool, device=z.device)
    logits = (z @ z.T / temperature).masked_fill(self_mask, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    pos = (lab[:, None] == lab[None, :]) & ~self_mask
    n_pos = pos.sum(dim=1)
    has_pos = n_pos > 0
    if not bool(has_pos.any()):
        return features.sum() * 0.0  # keeps the graph: a batch without pairs teaches nothing
    per_anchor = -log_prob.masked_fill(~pos, 0.0).sum(dim=1) / n_pos.clamp(min=1)
    per_anchor = per_anchor[has_pos]
    return per_anchor.sum() if reduction == "sum" else per_anchor.mean()


def make_batches(
    labels: np.ndarray,
    batch_size: int,
    rng: np.random.Generator,
    *,
    samples_per_class: int = 4,
    noise_per_batch: float = 0.25,
) -> list[np.ndarray]:
    """One epoch of index batches in which every labelled anchor has ≥ 1 positive.

    Each topic (label ≥ 0) is shuffled and cut into groups of ``samples_per_class`` (a
    leftover single joins the previous group); groups are shuffled and packed whole into
    batches of up to ``batch_size − noise slots``; the noise slots (``noise_per_batch`` of the
    batch) take noise points (label < 0) in shuffled order, cycling if there are few.
    Topics with a single member cannot form a pair and are treated as noise.
    """
    lab = np.asarray(labels)
    groups: list[np.ndarray] = []
    lonely: list[int] = []
    for c in np.unique(lab[lab >= 0]):
        members = rng.permutation(np.flatnonzero(lab == c))
        if members.size < 2:
            lonely.extend(members.tolist())
            continue
        cut = [
            members[i : i + samples_per_class] for i in range(0, members.size, samples_per_class)
        ]
        if cut[-1].size == 1:
            cut[-2] = np.concatenate([cut[-2], cut[-1]])
            cut.pop()
        groups.extend(cut)
    noise = rng.permutation(np.concatenate([np.flatnonzero(lab < 0), np.asarray(lonely, int)]))
    n_noise = round(batch_size * noise_per_batch) if noise.size else 0
    room = max(2, batch_size - n_noise)
    order = rng.permutation(len(groups))
    batches: list[np.ndarray] = []
    current: list[np.ndarray] = []
    size = 0
    cursor = 0

    def flush() -> None:
        nonlocal cursor, current, size
        parts = list(current)
        if n_noise:
            take = np.take(noise, np.arange(cursor, cursor + n_noise), mode="wrap")
            cursor = (cursor + n_noise) % noise.size
            parts.append(take)
        batches.append(np.unique(np.concatenate(parts)))
        current, size = [], 0

    for g in order:
        grp = groups[g]
        if size and size + grp.size > room:
            flush()
        current.append(grp)
        size += grp.size
    if current:
        flush()
    return batches


def _split_validation(
    labels: np.ndarray, val_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Train/validation index split that leaves validation anchors with positives.

    A topic with ≥ 4 members gives a pair (or ``val_fraction`` of its members if that is
    more) with probability chosen so about ``val_fraction`` of labelled chunks validate;
    the same fraction of noise chunks joins as negatives. Small topics stay in training.
    """
    lab = np.asarray(labels)
    n = lab.size
    val: list[int] = []
    if val_fraction > 0:
        for c in np.unique(lab[lab >= 0]):
            members = np.flatnonzero(lab == c)
            if members.size < 4:
                continue
            k = max(2, round(members.size * val_fraction))
            if k == 2 and rng.random() > members.size * val_fraction / 2:
                continue
            val.extend(rng.choice(members, size=k, replace=False).tolist())
        noise = np.flatnonzero(lab < 0)
        if noise.size:
            k = round(noise.size * val_fraction)
            val.extend(rng.choice(noise, size=k, replace=False).tolist())
    val_idx = np.array(sorted(val), dtype=np.int64)
    train_mask = np.ones(n, dtype=bool)
    train_mask[val_idx] = False
    return np.flatnonzero(train_mask), val_idx


@dataclass
class TrainResult:
    """What :func:`train_supcon` did: where the encoder is, and how training went."""

    path: Path
    steps: int
    epochs_run: float
    best_step: int
    best_val_loss: float | None
    initial_val_loss: float | None
    stopped_early: bool
    seconds: float
    n_train: int
    n_val: int
    history: list[dict[str, float]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def _bars_disabled() -> bool:
    return os.environ.get("RAGSHIELD_NO_PROGRESS", "") not in ("", "0") or bool(
        os.environ.get("CI")
    )


def train_supcon(
    encoder_path: str | os.PathLike[str] | None,
    texts: Sequence[str],
    labels: Sequence[int] | np.ndarray,
    *,
    out_dir: str | os.PathLike[str],
    epochs: float = 1.0,  # RAGFort gives no schedule; 1 epoch fits "minutes on a CPU"
    batch_size: int = 64,  # not in RAGFort; SupCon needs many negatives per batch
    lr: float = 2e-5,  # not in RAGFort; the usual sentence-transformers fine-tuning rate
    temperature: float = 0.1,  # RAGFort gives no τ; 0.1 is SupCon's (Khosla et al. 2020)
    seed: int = 0,
    patience: int = 2,
    samples_per_class: int = 4,
    noise_per_batch: float = 0.25,
    val_fraction: float = 0.1,
    evals_per_epoch: int = 4,
    max_seq_length: int = 128,
    warmup_fraction: float = 0.1,
    max_steps: int | None = None,
    num_threads: int | None = None,
    show_progress: bool = True,
) -> TrainResult:
    """Fine-tune a copy of a sentence-transformers model with SupCon; save the best one.

    ``encoder_path``: a local sentence-transformers folder, or ``None`` for the packaged
    all-MiniLM-L6-v2. ``labels``: one per text, ``-1`` = noise (negative only). The model is
    saved to ``out_dir`` (created; must not already hold a model). Early stopping watches
    the validation SupCon loss every ``1/evals_per_epoch`` epoch and stops after
    ``patience`` evaluations without improvement; the best weights are restored before
    saving. ``num_threads`` sets torch's intra-op threads for the run (process-wide).
    """
    from ragshield.embed.sentence_transformer import resolve_model_path

    texts = _check_texts(texts)
    lab = np.asarray(labels, dtype=np.int64)
    if lab.shape != (len(texts),):
        raise InputError(f"{len(texts)} texts but labels of shape {lab.shape}: one label per text.")
    if (
        epochs is None
        or isinstance(epochs, bool)
        or not isinstance(epochs, (int, float))
        or not (0 < float(epochs) <= 100)
    ):
        raise InputError(
            f"The 'epochs' parameter of {_OWNER} must be a float in (0, 100]. Got {epochs!r} instead."
        )
    check_int(batch_size, "batch_size", _OWNER, low=4)
    check_float(lr, "lr", _OWNER, low=0.0, high=1.0, low_open=True)
    check_float(temperature, "temperature", _OWNER, low=0.0, high=10.0, low_open=True)
    check_int(seed, "seed", _OWNER, low=0)
    check_int(patience, "patience", _OWNER, low=1)
    check_int(samples_per_class, "samples_per_class", _OWNER, low=2)
    check_float(noise_per_batch, "noise_per_batch", _OWNER, low=0.0, high=0.9)
    check_float(val_fraction, "val_fraction", _OWNER, low=0.0, high=0.5)
    check_int(evals_per_epoch, "evals_per_epoch", _OWNER, low=1)
    check_int(max_seq_length, "max_seq_length", _OWNER, low=8)
    check_float(warmup_fraction, "warmup_fraction", _OWNER, low=0.0, high=1.0)
    if max_steps is not None:
        check_int(max_steps, "max_steps", _OWNER, low=1)
    if num_threads is not None:
        check_int(num_threads, "num_threads", _OWNER, low=1)
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise InputError(f"{out} is not empty: pass a new folder for the trained encoder.")
    if not (lab >= 0).any():
        raise InputError("no chunk has a topic label (all -1): nothing to contrast.")

    import torch
    from sentence_transformers import SentenceTransformer

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    model = SentenceTransformer(str(resolve_model_path(encoder_path)), device="cpu")
    model.max_seq_length = max_seq_length

    train_idx, val_idx = _split_validation(lab, val_fraction, rng)
    val_batches = (
        [
            val_idx[b]
            for b in make_batches(
                lab[val_idx],
                batch_size,
                np.random.default_rng(seed + 1),
                samples_per_class=samples_per_class,
                noise_per_batch=noise_per_batch,
            )
        ]
        if val_idx.size
        else []
    )

    def embed(idx: np.ndarray) -> Any:
        # sentence-transformers >= 6 renamed tokenize to preprocess
        prep = getattr(model, "preprocess", None) or model.tokenize
        feats = prep([texts[i] for i in idx])  # CPU tensors already
        return model(feats)["sentence_embedding"]

    def val_loss() -> float | None:
        if not val_batches:
            return None
        model.eval()
        total, count = 0.0, 0
        with torch.inference_mode():
            for b in val_batches:
                loss = supcon_loss(embed(b), torch.as_tensor(_singletons(lab[b])), temperature)
                total += float(loss) * len(b)
                count += len(b)
        model.train()
        return total / max(count, 1)

    per_epoch = len(
        make_batches(
            lab[train_idx],
            batch_size,
            np.random.default_rng(seed),
            samples_per_class=samples_per_class,
            noise_per_batch=noise_per_batch,
        )
    )
    total_steps = max(1, math.ceil(per_epoch * float(epochs)))
    if max_steps is not None:
        total_steps = min(total_steps, max_steps)
    eval_every = max(1, per_epoch // evals_per_epoch)
    warmup = int(total_steps * warmup_fraction)

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup > 0 else 1.0
    )
    history: list[dict[str, float]] = []
    initial = val_loss()
    best = initial if initial is not None else math.inf
    best_state = copy.deepcopy(model.state_dict())
    best_step = 0
    bad_evals = 0
    stopped_early = False
    step = 0
    running = 0.0

    from tqdm.auto import tqdm

    bar = tqdm(
        total=total_steps, desc="SupCon", unit="step", disable=not show_progress or _bars_disabled()
    )
    model.train()
    try:
        while step < total_steps and not stopped_early:
            for b in make_batches(
                lab[train_idx],
                batch_size,
                rng,
                samples_per_class=samples_per_class,
                noise_per_batch=noise_per_batch,
            ):
                idx = train_idx[b]
                loss = supcon_loss(embed(idx), torch.as_tensor(_singletons(lab[idx])), temperature)
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                step += 1
                value = loss.item()
                running = value if step == 1 else 0.9 * running + 0.1 * value
                bar.update(1)
                bar.set_postfix(loss=f"{running:.3f}")
                if step % eval_every == 0 or step == total_steps:
                    v = val_loss()
                    history.append(
                        {
                            "step": step,
                            "train_loss": running,
                            **({"val_loss": v} if v is not None else {}),
                        }
                    )
                    if v is not None:
                        if v < best - 1e-4:
                            best, best_step, bad_evals = v, step, 0
                            best_state = copy.deepcopy(model.state_dict())
                        else:
                            bad_evals += 1
                            if bad_evals >= patience:
                                stopped_early = True
                                break
                    else:
                        best_state, best_step = copy.deepcopy(model.state_dict()), step
                if step >= total_steps:
                    break
    finally:
        bar.close()

    model.load_state_dict(best_state)
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save(str(out))
    return TrainResult(
        path=out,
        steps=step,
        epochs_run=step / per_epoch if per_epoch else 0.0,
        best_step=best_step,
        best_val_loss=None if best == math.inf else float(best),
        initial_val_loss=initial,
        stopped_early=stopped_early,
        seconds=time.perf_counter() - t0,
        n_train=int(train_idx.size),
        n_val=int(val_idx.size),
        history=history,
        params={
            "epochs": epochs,
            "batch_size": batch_size,
            "lr": lr,
            "temperature": temperature,
            "seed": seed,
            "patience": patience,
            "samples_per_class": samples_per_class,
            "noise_per_batch": noise_per_batch,
            "val_fraction": val_fraction,
            "evals_per_epoch": evals_per_epoch,
            "max_seq_length": max_seq_length,
            "warmup_fraction": warmup_fraction,
            "max_steps": max_steps,
        },
    )


def _singletons(labels: np.ndarray) -> np.ndarray:
    """Give each noise point (label < 0) its own class so it is a negative only."""
    lab = np.asarray(labels, dtype=np.int64).copy()
    noise = lab < 0
    lab[noise] = -1 - np.arange(int(noise.sum()))
    return lab


def _check_texts(texts: object) -> list[str]:
    if isinstance(texts, str):
        raise InputError(f"{_OWNER} expects a list of chunk texts, got a bare string.")
    items = list(texts)  # type: ignore[call-overload]
    if len(items) < 2:
        raise InputError(f"{_OWNER} needs at least 2 texts; got {len(items)}.")
    bad = [i for i, t in enumerate(items) if not isinstance(t, str)]
    if bad:
        raise InputError(f"text {bad[0]} is {type(items[bad[0]]).__name__}, not a string.")
    return items
