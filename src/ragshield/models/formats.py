"""Weight formats the llama.cpp backend can run a packaged model in, made once from its GGUF.

Example::

    from ragshield.models.formats import weights_path
    weights_path("qwen2.5-0.5b", "packaged")   # the verified packaged GGUF, as is
    weights_path("qwen2.5-0.5b", "bf16")       # converted once into the cache (~3 s)
    weights_path("qwen2.5-0.5b", "auto")       # the registry's choice for this model

Why: the packaged files are "Q4_K_M" GGUFs, but for the Qwen2.5 models most matrices are
Q5_0 (their 896/1536-wide rows do not split into 256-wide K-quant blocks), and llama.cpp
has no tiled int8 GEMM for Q5_0 on x86: prefill of an 830-token RAG prompt reads ~170
tokens per CPU-second, 1.4x the float32 transformers path. The same weights widened to
bfloat16 run llama.cpp's AVX512-BF16 GEMM at ~310-320 tokens per CPU-second
(``docs/results-llm-engine.md``), and they are the packaged values to within bf16
rounding (8 mantissa bits), closer to the float32 reference than any re-quantisation
(Q8_0, Q4_0: measured there too). Decode reads every weight once per token, so it is
memory-bound and bfloat16's larger file decodes slower; the output matrix (a quarter of
the 0.5B's weights, read at every decode step, unused by prefill but for the last token)
and the token embedding (a row lookup) therefore stay as packaged.

The conversion is llama.cpp's own ``llama_model_quantize`` (``allow_requantize``: it
de-quantises each packaged tensor and writes it in the new type); the result lives beside
the assembled GGUF as ``<name>-<sha12>-<format>.gguf``, written in a temporary folder and
renamed into place under a cross-process lock (:func:`~ragshield.models.provision.build_once`).
"""

from __future__ import annotations

import ctypes
import functools
import os
from dataclasses import dataclass
from pathlib import Path

from ragshield.errors import InputError
from ragshield.models.locate import models_dir
from ragshield.models.provision import ModelCacheError, build_once, gguf_path
from ragshield.models.registry import MODELS

PACKAGED = "packaged"
AUTO = "auto"


@dataclass(frozen=True)
class WeightFormat:
    """One llama.cpp weight format: the ``LLAMA_FTYPE_*`` it converts to and why."""

    name: str
    ftype: str
    why: str


FORMATS: dict[str, WeightFormat | None] = {
    PACKAGED: None,  # the packaged GGUF as is
    "bf16": WeightFormat(
        name="bf16",
        ftype="LLAMA_FTYPE_MOSTLY_BF16",
        why="AVX512-BF16 GEMM: ~2x the packaged file's prefill; output/embedding as packaged",
    ),
}


def check_format(weights: str, owner: str) -> str:
    """``weights`` if it names a known format or ``"auto"``, else a one-line error."""
    if not isinstance(weights, str) or (weights not in FORMATS and weights != AUTO):
        raise InputError(
            f"The 'weights' parameter of {owner} must be one of {', '.join([AUTO, *FORMATS])}. "
            f"Got {weights!r} instead."
        )
    return weights


def resolve_format(weights: str, name: str) -> str:
    """``"auto"`` resolved for model ``name``: its registry's ``auto_weights`` (``"bf16"``
    where that measured faster, see :mod:`ragshield.models.registry`) where the installed
    llama.cpp was built with bf16 dot products for this CPU (AVX512-BF16; without them it
    widens bf16 in software and prefill gets slower than the packaged file), else the
    packaged file."""
    if weights != AUTO:
        return weights
    return MODELS[name].auto_weights if engine_has_bf16() else PACKAGED


@functools.cache
def engine_has_bf16() -> bool:
    """True when llama.cpp reports ``AVX512_BF16 = 1`` (its build and this CPU both have
    it: ``make setup`` compiles it with ``-march=native``)."""
    try:
        import llama_cpp
    except ImportError:
        return False
    info = llama_cpp.llama_print_system_info()
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    return "AVX512_BF16 = 1" in text


def weights_path(
    name: str,
    weights: str = PACKAGED,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    show_progress: bool | None = None,
) -> Path:
    """The GGUF file llama.cpp loads for ``name`` in ``weights`` (module docstring)."""
    check_format(weights, "weights_path")
    source = gguf_path(name, cache_dir=cache_dir, show_progress=show_progress)  # checks name
    fmt = FORMATS[resolve_format(weights, name)]
    if fmt is None:
        return source
    spec = MODELS[name]
    target = models_dir(cache_dir) / f"{spec.name}-{spec.sha256[:12]}-{fmt.name}.gguf"

    def build(work: Path) -> Path:
        out = work / target.name
        _convert(source, out, fmt)
        return out

    # bf16 is about twice the packaged 4-to-6-bit file (0.5B: 491 -> 960 MB)
    return build_once(
        target, f"{spec.name}-{fmt.name}", build, complete=Path.is_file, need=spec.size * 3
    )


def _packaged_types(path: Path) -> dict[str, int]:
    """ggml type ids of the output matrix and the token embedding in ``path``."""
    from gguf import GGUFReader

    wanted = {"output.weight", "token_embd.weight"}
    return {t.name: int(t.tensor_type) for t in GGUFReader(str(path)).tensors if t.name in wanted}


def _convert(source: Path, dest: Path, fmt: WeightFormat) -> None:
    import llama_cpp as lc
    from llama_cpp._logger import set_verbose

    set_verbose(False)  # llama.cpp logs every tensor it writes
    lc.llama_backend_init()
    kept = _packaged_types(source)
    params = lc.llama_model_quantize_default_params()
    params.ftype = getattr(lc, fmt.ftype)
    params.allow_requantize = True  # the source is already quantised: de-quantise, rewrite
    # The same type as the source copies the tensor untouched (llama.cpp skips it).
    if "output.weight" in kept:
        params.output_tensor_type = kept["output.weight"]
    if "token_embd.weight" in kept:
        params.token_embedding_type = kept["token_embd.weight"]
    params.nthread = 1
    code = lc.llama_model_quantize(str(source).encode(), str(dest).encode(), ctypes.byref(params))
    if code != 0:
        raise ModelCacheError(
            f"llama.cpp could not convert {source.name} to {fmt.name} (code {code}): "
            f"check free space in {dest.parent}."
        )
