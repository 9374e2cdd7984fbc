"""Issue #15 items 2 and 4: authentication on a fresh server and under a flood of bad keys."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ragshield.server import Service, create_app
from ragshield.server.auth import KeyManager

from ._server_env import FAST_AUTH, bearer, burst, demo_index, make  # noqa: F401

QUESTION = {"question": "Who designed the Eiffel Tower?"}


def _key_made_elsewhere(service: Service, scopes: str = "ask") -> str:
    """A key created by another process (``ragshield keys create``), as in production: the
    running service's own KeyManager has hashed nothing yet."""
    return KeyManager(service.db, service.config.auth).create("alice", scopes=scopes)[1]


def test_fresh_server_answers_parallel_requests(make: Callable[..., Service]) -> None:
    """Item 2: 8 parallel asks from one key right after start were 7 x 500 + 1 x 200."""
    for _ in range(3):  # the race showed every time; three fresh servers for good measure
        service = make(limits={"requests_per_minute": 0})
        token = _key_made_elsewhere(service)
        app = create_app(service)
        codes = [r.status_code for r in burst(app, [("POST", "/v1/ask", QUESTION, bearer(token))] * 8)]
        assert codes == [200] * 8
