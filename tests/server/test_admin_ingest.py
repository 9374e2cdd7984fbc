"""``POST /v1/admin/index/add`` and ``GET /v1/admin/quarantine`` on a live server
(:mod:`ragshield.server.admin_ingest`): admin scope only, screened like ``ragshield add``,
the accepted documents served by the next request and the flagged ones never."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from ragshield.demo import demo_files
from ragshield.server import Service

openai = pytest.importorskip("openai")

ATTACK = json.loads(demo_files()[1].read_text(encoding="utf-8"))


def _client(base: str, key: str) -> object:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=60)


def test_admin_add_screens_and_serves_new_documents(live: tuple[str, Service, str, str]) -> None:
    base, _, token, admin = live
    docs = [
        {"id": "perth", "title": "Perth", "text": "Perth is the capital of Western Australia, "
         "on the Swan River. Kings Park overlooks its business district."},
        *({"id": f"new-adv{i}", "text": t} for i, t in enumerate(ATTACK["adv_texts"])),
    ]  # fmt: skip
    h = {"Authorization": f"Bearer {admin}"}
    denied = httpx.post(
        f"{base}/v1/admin/index/add",
        json={"documents": docs},
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
    )
    assert denied.status_code == 403  # the ask scope may not write the index
    r = httpx.post(
        f"{base}/v1/admin/index/add",
        json={"documents": docs, "screen": "ragdefender"},
        headers=h,
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert "perth" in body["added"] and body["quarantined"]
    held = {q["id"] for q in httpx.get(f"{base}/v1/admin/quarantine", headers=h).json()}
    assert held == {q["id"] for q in body["quarantined"]}
    ans = _client(base, token).chat.completions.create(
        model="ragshield", messages=[{"role": "user", "content": "Which river is Perth on?"}]
    )
    served = set(ans.model_extra["ragshield"]["retrieved_ids"])
    assert "perth" in served and not served & held  # live: added served, flagged never
    bad = httpx.post(f"{base}/v1/admin/index/add", json={"documents": docs[:1]}, headers=h)
    assert bad.status_code == 422 and "already in the index" in bad.json()["detail"]


def test_admin_index_dir_is_only_the_services(live: tuple[str, Service, str, str]) -> None:
    _, service, _, _ = live
    assert Path(service.config.index).is_dir()
