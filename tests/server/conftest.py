"""Fixtures for the live-server tests: one uvicorn server on loopback per test module,
over the demo index with the demo's five PoisonedRAG passages planted in it, with a client
key (``ask`` scope) and an admin key."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.reliability._server_env import FAST_AUTH

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.indexing import build_index
from ragshield.server import Service, create_app, load_config
from ragshield.types import Passage

ATTACK = json.loads(demo_files()[1].read_text(encoding="utf-8"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, encoder: Any
) -> Iterator[tuple[str, Service, str, str]]:
    root = tmp_path_factory.mktemp("openai")
    # the demo corpus with the demo's five PoisonedRAG passages planted in it
    planted = [Passage(f"adv{i}", t) for i, t in enumerate(ATTACK["adv_texts"])]
    build_index([*read_corpus(demo_files()[0]), *planted], root / "idx", encoder=encoder)
    cfg = load_config(
        None,
        index=str(root / "idx"),
        auth=FAST_AUTH,
        storage={"sqlite_path": str(root / "audit.db")},
        defenses={"chain": ["ragdefender"]},
        limits={"requests_per_minute": 6},
    )
    service = Service.from_config(cfg, encoder=encoder)
    _, token = service.keys.create("client")
    _, admin = service.keys.create("ops", scopes=["admin"])
    port = _free_port()
    uvicorn = pytest.importorskip("uvicorn")
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(service),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            proxy_headers=False,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", service, token, admin
    server.should_exit = True
    thread.join(10)
    service.close()
