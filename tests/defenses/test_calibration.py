"""Index-time calibration: the profile is computed, saved, reloaded and reaches RAGDefender."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragshield.defenses.calibration import calibrate
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.errors import InputError
from ragshield.store.faiss_store import FaissStore
from ragshield.store.profile import IndexProfile, profile_vectors
from ragshield.types import Passage


def test_profile_of_known_vectors() -> None:
    v = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    p = profile_vectors(v)
    assert p is not None and p.n == 4 and p.sampled == 4
    # nearest neighbours: 0.8, 0.8, 0.6, 0.0 -> the 99.9th percentile is ~0.8
    assert p.natural_similarity == pytest.approx(0.8, abs=1e-3)
    assert profile_vectors(v[:2]) is None
    sampled = profile_vectors(np.random.default_rng(0).normal(size=(50, 8)), sample=10)
    assert sampled is not None and sampled.sampled == 10


def test_calibrate_sets_only_what_the_user_left_open() -> None:
    p = IndexProfile(n=10, sampled=10, quantiles={"p50": 0.5}, natural_similarity=0.93)
    rd = RAGDefender()
    calibrate(rd, p.to_dict())
    assert rd.natural_similarity == 0.93 and rd.evidence_threshold() == 0.93
    mine = RAGDefender(natural_similarity=0.8)
    calibrate(mine, p)
    assert mine.natural_similarity == 0.8
    calibrate(rd, None)  # no profile: nothing changes
    with pytest.raises(InputError, match="profile"):
        calibrate(rd, {"n": "x"})


def test_profile_is_saved_and_reloaded(tmp_path: Path) -> None:
    store = FaissStore(2)
    store.add([Passage(f"p{i}", f"t{i}") for i in range(3)],
              np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32))  # fmt: skip
    store.profile = {"n": 3, "sampled": 3, "quantiles": {}, "natural_similarity": 0.8}
    store.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["profile"]["natural_similarity"] == 0.8
    assert FaissStore.load(tmp_path / "idx").profile == store.profile


@pytest.mark.slow
def test_pipeline_over_a_built_index_is_calibrated(tmp_path: Path) -> None:
    from ragshield.config import PipelineConfig, build_pipeline
    from ragshield.corpus import read_corpus
    from ragshield.demo import demo_files
    from ragshield.indexing import build_index

    corpus, _ = demo_files()
    build_index(read_corpus(corpus), tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    natural = meta["profile"]["natural_similarity"]
    assert 0.0 < natural <= 1.0
    cfg = PipelineConfig(index=tmp_path / "idx").with_overrides(defenses="ragdefender")
    rag = build_pipeline(cfg)
    (rd,) = rag.chain.filters
    assert rd.natural_similarity == pytest.approx(natural, abs=1e-4)


def test_one_call_hands_both_parts_of_the_profile_to_a_chain() -> None:
    """The nearest-neighbour bars and the injection thresholds reach their filters through
    the same :func:`calibrate` (the ingestion screen used to get only the first)."""
    from fakes import HashEncoder
    from ragshield.defenses.compose import FilterChain
    from ragshield.defenses.injection.calibration import KEY
    from ragshield.defenses.injection.detector import InjectionGuard

    p = IndexProfile(n=10, sampled=10, quantiles={"p50": 0.5}, natural_similarity=0.93)
    guard = InjectionGuard(encoder=HashEncoder(dim=384))
    rd = RAGDefender()
    chain = FilterChain([rd, guard])
    calibrate(chain, {**p.to_dict(), KEY: {"thresholds": {"fpr1": 0.71, "fpr0.1": 0.83}}})
    assert rd.natural_similarity == 0.93
    assert guard.threshold_source() == "index" and guard.threshold_() == 0.71


def test_profile_index_records_both_parts() -> None:
    from fakes import HashEncoder
    from ragshield.defenses.calibration import profile_index
    from ragshield.defenses.injection.calibration import KEY

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(40, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = [f"Passage {i} says the harbour opened in {1800 + i}." for i in range(40)]
    out = profile_index(texts, vectors, HashEncoder(dim=8), trusted_ids=["p1"])
    assert out is not None and list(out["trusted_ids"]) == ["p1"] and KEY in out
    assert out[KEY] is None  # an 8-d encoder: the packaged head cannot read its vectors
    assert profile_index(texts[:2], vectors[:2], HashEncoder(dim=8)) is None
