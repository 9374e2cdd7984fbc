"""Ray paths for the embarrassingly parallel work: encoding a corpus (index, RAGFort
re-index) and spreading evaluation questions over workers.

Without Ray everything runs in-process; these functions are only called when a user asks
for ``--ray``. ``address`` is ``"local"`` (start a runtime on this machine), ``"auto"``
(join the cluster started with ``ray start --head``) or ``ray://HOST:PORT``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from ragshield.errors import InputError, RagshieldError

T = TypeVar("T")
R = TypeVar("R")


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RagshieldError(
            'Ray paths need the [ray] extra: pip install "ragshield[ray]"'
        ) from exc
    return ray


@contextmanager
def ray_runtime(address: str = "local", num_cpus: int | None = None) -> Iterator[Any]:
    """Connect to (or start) Ray for the duration of the block; leaves an existing
    connection made by the caller alone."""
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "configure_logging": False,
    }
    if address == "local":
        kwargs["num_cpus"] = num_cpus or os.cpu_count() or 1
    else:
        kwargs["address"] = address
    ray.init(**kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


class _EncodeActor:
    """One encoder per Ray worker, loaded once (offline model path)."""

    def __init__(self, model: str | None, batch_size: int) -> None:
        from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

        self.encoder = SentenceTransformerEncoder(model, batch_size=batch_size, cache_size=0)
        self.encoder.warm_up()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vecs = self.encoder.encode([str(t) for t in batch["text"]])
        return {"row": batch["row"], "vector": vecs}


def ray_encode(
    texts: Sequence[str],
    *,
    model: str | None = None,
    address: str = "local",
    workers: int = 1,
    batch_size: int = 256,
) -> np.ndarray:
    """Encode ``texts`` with Ray Data ``map_batches`` on ``workers`` encoder actors.

    Rows come back in input order whatever order the workers finish in.
    """
    if workers < 1:
        raise InputError(f"workers must be >= 1; got {workers}")
    if not texts:
        raise InputError("nothing to encode")
    with ray_runtime(address, num_cpus=max(workers, 1)) as ray:
        import ray.data  # registers the data API on the module

        ds = ray.data.from_items([{"row": i, "text": t} for i, t in enumerate(texts)])
        encoded = ds.map_batches(
            _EncodeActor,
            fn_constructor_args=(model, min(batch_size, 64)),
            batch_size=batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=1,
        )
        rows: list[int] = []
        vecs: list[np.ndarray] = []
        for batch in encoded.iter_batches(batch_size=4096, batch_format="numpy"):
            rows.extend(int(r) for r in batch["row"])
            vecs.append(np.asarray(batch["vector"], dtype=np.float32))
    out = np.vstack(vecs)
    order = np.argsort(np.asarray(rows))
    return np.ascontiguousarray(out[order])


def ray_map(
    fn: Callable[[T], R], items: Sequence[T], *, address: str = "local", workers: int = 2
) -> list[R]:
    """``[fn(x) for x in items]`` with the items spread over Ray tasks, results in order.

    ``fn`` must be picklable (a module-level function or a functools.partial of one).
    """
    with ray_runtime(address, num_cpus=workers) as ray:
        remote = ray.remote(num_cpus=1)(_apply)
        return list(ray.get([remote.remote(fn, x) for x in items]))


def _apply(fn: Callable[[T], R], x: T) -> R:
    """Ray can only make Python functions remote; this one accepts any picklable callable."""
    return fn(x)
