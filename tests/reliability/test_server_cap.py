"""Issue #15 item 3 and the budget target: no coverage-cap or budget overrun under 64-way
concurrency, on SQLite and on a real PostgreSQL (pgserver)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ragshield.server import Service, create_app

from ._server_env import (  # noqa: F401
    bearer,
    burst,
    demo_index_fixture,
    fresh_pg_url,
    make_fixture,
)

CAP = 12  # distinct chunks per key; the demo index has 30, each answer serves 5


@pytest.fixture(params=["sqlite", "postgresql"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    if request.param == "sqlite":
        return {"sqlite_path": str(tmp_path / "cap.db")}
    return {"url": fresh_pg_url(request.getfixturevalue("pg_uri"))}


def _sweep(service: Service, token: str, n: int) -> list[int]:
    """``n`` parallel asks, each about a different passage (a signature-free sweep)."""
    titles = [p.title for p in service.store.passages]
    reqs = [
        (
            "POST",
            "/v1/ask",
            {"question": f"Tell me about {titles[i % len(titles)]}."},
            bearer(token),
        )
        for i in range(n)
    ]
    return [r.status_code for r in burst(create_app(service), reqs)]


Swept = Callable[..., tuple[Service, str, list[int]]]


@pytest.fixture
def swept(make: Callable[..., Service], storage: dict[str, str]) -> Swept:
    """``swept(**config)``: a service on ``storage`` built with ``config``, a new key, and
    the status codes of that key's 64 parallel asks."""

    def run(**config: Any) -> tuple[Service, str, list[int]]:
        service = make(storage=storage, **config)
        key_id, token = service.keys.create("sweeper")
        return service, key_id, _sweep(service, token, 64)

    return run


def test_coverage_cap_holds_under_64_parallel_requests(swept: Swept) -> None:
    service, key_id, codes = swept(
        limits={"requests_per_minute": 0, "requests_per_day": 0, "concurrency": 4},
        throttle={"signatures": {}, "coverage_min_chunks": CAP, "novelty_limit": 1.0},
    )
    assert set(codes) <= {200, 429} and 429 in codes
    served = service.db.coverage(key_id, 0.0)
    assert served <= CAP, f"{served} distinct chunks served against a cap of {CAP}"
    # every request left exactly one audit row, and what the rows say reached the key is
    # exactly the ledger
    rows = service.db.audit_rows(key_id)
    assert len(rows) == 64
    assert sorted({c for r in rows if r["status"] == 200 for c in r["chunk_ids"]}) == sorted(
        service.db.served_chunk_ids(key_id)
    )
    assert service.db.block_state(key_id)[0] is not None  # the sweeper is blocked


def test_budget_holds_under_64_parallel_requests(swept: Swept) -> None:
    service, key_id, codes = swept(
        # the daily budget, not the per-minute one: at load average 25 the 64 requests can
        # outlast a minute, and a window that resets mid-test is not a broken budget
        limits={"requests_per_minute": 0, "requests_per_day": 20, "concurrency": 4},
        throttle={"enabled": False},
    )
    assert codes.count(200) == 20 and codes.count(429) == 44
    rows = service.db.audit_rows(key_id)
    assert len(rows) == 64
    assert sum(r["outcome"] == "ok" for r in rows) == 20
