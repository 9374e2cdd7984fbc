"""A lone surrogate anywhere in a request body is a 422, not a 500, and costs the key
nothing (issue #27, root cause 8: ``/v1/filter`` with ``"title": "\\ud800"`` was an HTTP
500 charged to the key)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ragshield.server import Service, create_app

from ._server_env import bearer, burst, demo_index_fixture, make_fixture  # noqa: F401

PASSAGE = {"id": "p1", "text": "The Eiffel Tower was designed by Gustave Eiffel."}
BAD = "caf\ud800e"

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "filter title": ("/v1/filter", {"query": "q?", "passages": [{**PASSAGE, "title": BAD}]}),
    "filter id": ("/v1/filter", {"query": "q?", "passages": [{**PASSAGE, "id": BAD}]}),
    "filter text": ("/v1/filter", {"query": "q?", "passages": [{**PASSAGE, "text": BAD}]}),
    "filter query": ("/v1/filter", {"query": BAD, "passages": [PASSAGE]}),
    "filter defenses": ("/v1/filter", {"query": "q?", "passages": [PASSAGE], "defenses": [BAD]}),
    "ask question": ("/v1/ask", {"question": BAD}),
    "ask defenses": ("/v1/ask", {"question": "Who?", "defenses": [BAD]}),
}


def _raw(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()  # json escapes the surrogate as \ud800, as a client would


@pytest.mark.parametrize("case", list(CASES))
def test_lone_surrogate_is_422_and_free(make: Callable[..., Service], case: str) -> None:
    service = make(limits={"requests_per_minute": 1}, defenses={"chain": ["similarity-threshold"]})
    _, token = service.keys.create("alice", scopes="ask,filter")
    app = create_app(service)
    path, body = CASES[case]
    import asyncio

    import httpx

    async def send() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            headers = {**bearer(token), "Content-Type": "application/json"}
            return [await client.post(path, content=_raw(body), headers=headers) for _ in range(3)]

    for r in asyncio.run(send()):
        assert r.status_code == 422, r.text
        assert "surrogate" in r.json()["detail"] or "unicode" in r.json()["detail"]
    # the one request the minute allows is still there
    ok = burst(
        app, [("POST", "/v1/filter", {"query": "Who?", "passages": [PASSAGE]}, bearer(token))]
    )
    assert ok[0].status_code == 200, ok[0].text
