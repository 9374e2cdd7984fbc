"""Issue #15 items 2 and 4: authentication on a fresh server and under a flood of bad keys."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ragshield.server import Service, create_app
from ragshield.server.auth import KeyManager

from ._server_env import FAST_AUTH, bearer, burst, demo_index_fixture, make_fixture  # noqa: F401

QUESTION = {"question": "Who designed the Eiffel Tower?"}


def _key_made_elsewhere(service: Service, scopes: str = "ask") -> str:
    """A key created by another process (``ragshield keys create``), as in production: the
    running service's own KeyManager has hashed nothing yet."""
    return KeyManager(service.db, service.config.auth).create("alice", scopes=scopes)[1]


def test_fresh_server_answers_parallel_requests(make: Callable[..., Service]) -> None:
    """Item 2: 8 parallel asks from one key right after start were 7 x 500 + 1 x 200."""
    # a real argon2 cost (16 MiB): building the hasher takes long enough for the race to show
    cost = {"argon2_time_cost": 2, "argon2_memory_kib": 16_384, "argon2_parallelism": 1}
    for _ in range(3):  # the race showed every time; three fresh servers for good measure
        service = make(limits={"requests_per_minute": 0}, auth=cost)
        token = _key_made_elsewhere(service)
        app = create_app(service)
        codes = [
            r.status_code for r in burst(app, [("POST", "/v1/ask", QUESTION, bearer(token))] * 8)
        ]
        assert codes == [200] * 8


def test_unknown_key_ids_are_rejected_without_hashing(
    make: Callable[..., Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 4: an unknown id cost a full argon2 verification (against a dummy hash)."""
    from argon2 import PasswordHasher

    service = make()
    _, token = service.keys.create("alice")
    calls: list[str] = []
    real = PasswordHasher.verify

    def counting(self: PasswordHasher, hash: str, password: str | bytes) -> bool:
        calls.append(hash)
        return real(self, hash, password)

    monkeypatch.setattr(PasswordHasher, "verify", counting)
    unknown = "rsk_000000000000_" + token.split("_", 2)[2]
    reqs = [("POST", "/v1/ask", QUESTION, bearer(unknown))] * 10
    assert [r.status_code for r in burst(create_app(service), reqs)] == [401] * 10
    assert calls == []


def test_bad_keys_do_not_starve_a_valid_key(
    make: Callable[..., Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 4: 64 requests stuck in argon2 took every worker thread, so a valid key waited.

    Verifications are held open (an event) while a valid, already verified key asks: it
    must be answered while all 64 bad requests are still waiting for argon2.
    """
    import asyncio
    import threading

    import httpx
    from argon2 import PasswordHasher

    service = make(limits={"requests_per_minute": 0})
    _, alice = service.keys.create("alice")
    _, bob = service.keys.create("bob")
    app = create_app(service)
    assert burst(app, [("POST", "/v1/ask", QUESTION, bearer(alice))])[0].status_code == 200
    release = threading.Event()
    real = PasswordHasher.verify

    def held(self: PasswordHasher, hash: str, password: str | bytes) -> bool:
        release.wait(30)
        return real(self, hash, password)

    monkeypatch.setattr(PasswordHasher, "verify", held)
    wrong = bob[:-4] + ("AAAA" if not bob.endswith("AAAA") else "BBBB")

    async def run() -> tuple[int, list[int]]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.2", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            bad = [
                asyncio.create_task(c.post("/v1/ask", json=QUESTION, headers=bearer(wrong)))
                for _ in range(64)
            ]
            try:
                await asyncio.sleep(0.5)  # every bad request is now waiting on argon2
                good = await asyncio.wait_for(
                    c.post("/v1/ask", json=QUESTION, headers=bearer(alice)), timeout=20
                )
                assert not release.is_set()
            finally:
                release.set()
            return good.status_code, [r.status_code for r in await asyncio.gather(*bad)]

    good, bad = asyncio.run(run())
    assert good == 200
    assert set(bad) <= {401, 429} and 401 in bad


def test_repeated_failures_from_one_client_are_throttled(make: Callable[..., Service]) -> None:
    """Item 4: failed authentications from one client get 429 + Retry-After after the limit,
    before any lookup; another client, and a key already verified, are not affected."""
    service = make(auth={**FAST_AUTH, "failure_limit": 5, "failure_window_seconds": 60})
    _, alice = service.keys.create("alice")
    app = create_app(service)
    ask_alice = ("POST", "/v1/ask", QUESTION, bearer(alice))
    assert burst(app, [ask_alice], client_host="127.0.0.7")[0].status_code == 200
    unknown = ("POST", "/v1/ask", QUESTION, bearer("rsk_000000000000_" + "x" * 43))
    codes = [burst(app, [unknown], client_host="127.0.0.7")[0].status_code for _ in range(5)]
    assert codes == [401] * 5
    r = burst(app, [unknown], client_host="127.0.0.7")[0]
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= 60
    assert "too many failed authentications" in r.json()["detail"]
    assert burst(app, [unknown], client_host="127.0.0.8")[0].status_code == 401
    assert burst(app, [ask_alice], client_host="127.0.0.7")[0].status_code == 200
    t0 = time.monotonic()
    service.keys.failures.clock = lambda: t0 + 61  # the window passes
    assert burst(app, [unknown], client_host="127.0.0.7")[0].status_code == 401


def test_parallel_requests_after_restart_share_one_argon2_check(
    make: Callable[..., Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #27 (minor): after a restart (empty verification cache) 16 parallel requests
    with one key each ran their own argon2 check; now the first check's answer is shared."""
    from argon2 import PasswordHasher

    service = make(limits={"requests_per_minute": 0})
    token = _key_made_elsewhere(service)
    calls: list[str] = []
    real = PasswordHasher.verify

    def counting(self: PasswordHasher, hash: str, password: str | bytes) -> bool:
        calls.append(hash)
        time.sleep(0.2)  # a real-cost check: the other 15 arrive while it runs
        return real(self, hash, password)

    monkeypatch.setattr(PasswordHasher, "verify", counting)
    reqs = [("POST", "/v1/ask", QUESTION, bearer(token))] * 16
    assert [r.status_code for r in burst(create_app(service), reqs)] == [200] * 16
    assert len(calls) == 1
    bad = token[:-4] + "AAAA"
    calls.clear()
    reqs = [("POST", "/v1/ask", QUESTION, bearer(bad))] * 8
    assert [r.status_code for r in burst(create_app(service), reqs)] == [401] * 8
    assert len(calls) == 1
