"""Ray paths for the embarrassingly parallel work: encoding a corpus (index, RAGFort
re-index) and spreading evaluation questions over workers.

Without Ray everything runs in-process; these functions are only called when a user asks
for ``--ray``. ``address`` is ``"local"`` (start a runtime on this machine), ``"auto"``
(join the cluster started with ``ray start --head``) or ``ray://HOST:PORT``.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
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
        # Ray starts its workers niced (background priority); here they *are* the job, and
        # on a busy machine a niced encoder actor was measured at 3 % of a core.
        os.environ.setdefault("RAY_worker_niceness", "0")
    else:
        kwargs["address"] = address
    ray.init(**kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


def pack_folder(path: str | os.PathLike[str]) -> bytes:
    """A model folder as an uncompressed tar in memory (weights do not compress)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"cannot ship {folder} to Ray workers: it is not a folder.")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(folder, arcname=".")
    return buf.getvalue()


def unpack_folder(archive: bytes, dest: str | os.PathLike[str]) -> Path:
    """Inverse of :func:`pack_folder`; the "data" filter refuses links and paths that
    would leave ``dest``."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        tar.extractall(dest, filter="data")
    return Path(dest)


class _EncodeActor:
    """One encoder per Ray worker, loaded once: from an offline model path every node has
    (the packaged model), or from a shipped archive of a folder only the driver has (a
    freshly trained RAGFort encoder). The unpacked copy is deleted once loaded."""

    def __init__(self, model: str | None, batch_size: int, archive: tuple[Any, ...] = ()) -> None:
        from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

        tmp = None
        if archive:
            # the object-store reference travels inside a tuple, so Ray passes it through
            # unresolved and each actor fetches the bytes itself, once
            data = _ray().get(archive[0])
            tmp = tempfile.mkdtemp(prefix="ragshield-encoder-")
            model = str(unpack_folder(data, tmp))
        try:
            self.encoder = SentenceTransformerEncoder(model, batch_size=batch_size, cache_size=0)
            self.encoder.warm_up()
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

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
    ship_model: bool = False,
    show_progress: bool = False,
) -> np.ndarray:
    """Encode ``texts`` with Ray Data ``map_batches`` on ``workers`` encoder actors.

    Rows come back in input order whatever order the workers finish in. ``ship_model``
    sends the ``model`` folder to the workers through Ray's object store, for a model that
    exists only on this machine (the nodes of a cluster need not share a disk).
    ``show_progress`` shows Ray Data's progress bars (stderr); its start-of-run messages
    are kept off stdout either way, so ``--json`` output stays parseable.
    """
    if workers < 1:
        raise InputError(f"workers must be >= 1; got {workers}")
    if not texts:
        raise InputError("nothing to encode")
    if ship_model and model is None:
        raise InputError("ship_model needs a model folder; the packaged model is on every node.")
    with ray_runtime(address, num_cpus=max(workers, 1)) as ray:
        import ray.data  # registers the data API on the module

        archive = (ray.put(pack_folder(model)),) if ship_model and model is not None else ()
        ctx = ray.data.DataContext.get_current()
        saved = (ctx.print_on_execution_start, ctx.enable_progress_bars)
        ctx.print_on_execution_start, ctx.enable_progress_bars = False, show_progress
        data_log = logging.getLogger("ray.data")  # its console handler writes to stdout
        saved_level = data_log.level
        data_log.setLevel(logging.ERROR)
        try:
            ds = ray.data.from_items([{"row": i, "text": t} for i, t in enumerate(texts)])
            encoded = ds.map_batches(
                _EncodeActor,
                fn_constructor_args=(model, min(batch_size, 64), archive),
                batch_size=batch_size,
                batch_format="numpy",
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=1,
                # a restarted actor could not re-read a shipped model; fail instead
                **({"max_restarts": 0} if archive else {}),
            )
            rows: list[int] = []
            vecs: list[np.ndarray] = []
            for batch in encoded.iter_batches(batch_size=4096, batch_format="numpy"):
                rows.extend(int(r) for r in batch["row"])
                vecs.append(np.asarray(batch["vector"], dtype=np.float32))
        finally:
            ctx.print_on_execution_start, ctx.enable_progress_bars = saved
            data_log.setLevel(saved_level)
    out = np.vstack(vecs)
    order = np.argsort(np.asarray(rows))
    return np.ascontiguousarray(out[order])


def ray_map(
    fn: Callable[[T], R], items: Sequence[T], *, address: str = "local", workers: int = 2
) -> list[R]:
    """``[fn(x) for x in items]`` with the items spread over Ray tasks, results in order.

    ``fn`` must be picklable (a module-level function or a functools.partial of one). It
    is put in the object store once, so data bound into it (a partial's arguments) travels
    to each node once rather than with every item.
    """
    if workers < 1:
        raise InputError(f"workers must be >= 1; got {workers}")
    with ray_runtime(address, num_cpus=workers) as ray:
        remote = ray.remote(num_cpus=1)(_apply)
        fn_ref = ray.put(fn)
        return list(ray.get([remote.remote(fn_ref, x) for x in items]))


def _apply(fn: Callable[[T], R], x: T) -> R:
    """Ray can only make Python functions remote; this one accepts any picklable callable."""
    return fn(x)
