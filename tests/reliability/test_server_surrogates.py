"""A lone surrogate anywhere in a request body is a 422, not a 500, and costs the key
nothing (issue #27, root cause 8: ``/v1/filter`` with ``"title": "\\ud800"`` was an HTTP
500 charged to the key). The hostile pass then found the same on the newer endpoints (the
chat model name, a message or content part, a quarantine id: 500s, and the id's echo in
the audit reason killed the audit-writing thread)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from ragshield.server import Service, create_app

from ._server_env import bearer, burst, demo_index_fixture, make_fixture  # noqa: F401

PASSAGE = {"id": "p1", "text": "The Eiffel Tower was designed by Gustave Eiffel."}
BAD = "caf\ud800e"
USER = {"role": "user", "content": "Who designed the Eiffel Tower?"}

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "filter title": ("/v1/filter", {"query": "q?", "passages": [{**PASSAGE, "title": BAD}]}),
    "filter id": ("/v1/filter", {"query": "q?", "passages": [{**PASSAGE, "id": BAD}]}),
    "filter text": ("/v1/filter", {"query": "q?", "passages": [{**PASSAGE, "text": BAD}]}),
    "filter query": ("/v1/filter", {"query": BAD, "passages": [PASSAGE]}),
    "filter defenses": ("/v1/filter", {"query": "q?", "passages": [PASSAGE], "defenses": [BAD]}),
    "ask question": ("/v1/ask", {"question": BAD}),
    "ask defenses": ("/v1/ask", {"question": "Who?", "defenses": [BAD]}),
    "chat model": ("/v1/chat/completions", {"model": BAD, "messages": [USER]}),
    "chat content": ("/v1/chat/completions", {"messages": [{"role": "user", "content": BAD}]}),
    "chat part": ("/v1/chat/completions",
                  {"messages": [{"role": "user", "content": [{"type": "text", "text": BAD}]}]}),
    "chat system": ("/v1/chat/completions",
                    {"messages": [{"role": "system", "content": BAD}, USER]}),
    "chat extra field": ("/v1/chat/completions", {"messages": [USER], "user": BAD}),
    "chat key": ("/v1/chat/completions", {"messages": [USER], BAD: 1}),
    "admin add id": ("/v1/admin/index/add", {"documents": [{"id": BAD, "text": "t"}]}),
    "admin add source": ("/v1/admin/index/add",
                         {"documents": [{"id": "d", "text": "t"}], "source": BAD}),
    "quarantine release": ("/v1/admin/quarantine/release", {"ids": [BAD]}),
    "quarantine delete": ("/v1/admin/quarantine/delete", {"ids": [BAD]}),
}  # fmt: skip


def _raw(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()  # json escapes the surrogate as \ud800, as a client would


@pytest.mark.parametrize("case", list(CASES))
def test_lone_surrogate_is_422_and_free(make: Callable[..., Service], case: str) -> None:
    service = make(limits={"requests_per_minute": 1}, defenses={"chain": ["similarity-threshold"]})
    _, token = service.keys.create("alice", scopes="ask,filter,admin")
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


def test_audit_thread_survives_a_row_it_cannot_write(make: Callable[..., Service]) -> None:
    """A row the database refuses (here a reason with a lone surrogate, which no UTF-8
    writer takes) is dropped and counted; the thread goes on writing the next rows. It
    died before, so every later rejection went unaudited."""
    from ragshield.server.db import AuditRecord
    from ragshield.server.middleware import AuditQueue

    service = make()

    def row(reason: str) -> AuditRecord:
        return AuditRecord(
            "r", "k1", 0.0, "ask", 401, "rejected", "", None, [], [], [], None, None, reason, 1.0
        )

    q = AuditQueue(service)
    q.put(row(BAD))
    assert q.flush(10)
    q.put(row("ordinary"))
    assert q.flush(10)
    assert q._thread.is_alive()
    assert [r["reason"] for r in service.db.audit_rows("k1")] == ["ordinary"]
    q.close()


def test_error_detail_quoting_a_surrogate_is_escaped() -> None:
    from ragshield.server.middleware import json_error

    r = json_error(422, f"not in the quarantine: {BAD}")
    assert b"caf\\\\ud800e" in r.body  # JSON of the escaped text, not a 500
