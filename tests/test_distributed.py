"""Ray paths give the same results as in-process runs (a real local Ray runtime)."""

from __future__ import annotations

import operator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray", reason="the [ray] extra is not installed")

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.distributed import ray_map, ray_runtime
from ragshield.indexing import build_index


@pytest.mark.slow
def test_ray_index_matches_in_process(encoder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    passages = read_corpus(demo_files()[0])
    with ray_runtime("local", num_cpus=2):
        ray_store = build_index(
            passages, tmp_path / "ray", encoder=encoder, ray_address="local", ray_workers=2
        )
        assert ray_map(operator.neg, [3, 1, 2]) == [-3, -1, -2]  # importable on workers
    local = build_index(passages, tmp_path / "local", encoder=encoder)
    assert np.allclose(ray_store.vectors, local.vectors, atol=1e-5)  # type: ignore[attr-defined]
    q = encoder.encode(["Who discovered penicillin?", "capital of Canada"])
    for a, b in zip(ray_store.search(q, 5), local.search(q, 5), strict=True):
        assert [h.id for h in a] == [h.id for h in b]
