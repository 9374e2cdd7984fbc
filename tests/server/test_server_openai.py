"""``POST /v1/chat/completions`` with the official ``openai`` client against a live server on
loopback: a defended answer (non-streaming and streaming), the same keys (401 with a bad
one), budgets and audit as ``/v1/ask``; and the admin ingestion API (issue #24, parts 2-3)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.indexing import build_index
from ragshield.server import Service, create_app, load_config
from ragshield.server.openai_chat import ChatMessage, last_user_message
from ragshield.types import Passage

openai = pytest.importorskip("openai")
uvicorn = pytest.importorskip("uvicorn")

FAST_AUTH = {"argon2_time_cost": 1, "argon2_memory_kib": 8, "argon2_parallelism": 1}
QUESTION = "What is the capital of Australia?"
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
        None, index=str(root / "idx"), auth=FAST_AUTH,
        storage={"sqlite_path": str(root / "audit.db")},
        defenses={"chain": ["ragdefender"]},
        limits={"requests_per_minute": 6},
    )  # fmt: skip
    service = Service.from_config(cfg, encoder=encoder)
    _, token = service.keys.create("client")
    _, admin = service.keys.create("ops", scopes=["admin"])
    port = _free_port()
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


def _client(base: str, key: str) -> Any:
    return openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=60)


def test_openai_client_gets_a_defended_answer(live: tuple[str, Service, str, str]) -> None:
    base, _, token, _ = live
    reply = _client(base, token).chat.completions.create(
        model="ragshield",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "hi"},
            {"role": "user", "content": QUESTION},
        ],
    )
    text = reply.choices[0].message.content
    assert reply.object == "chat.completion" and reply.choices[0].finish_reason == "stop"
    report = reply.model_extra["ragshield"]
    # the planted passages were retrieved, the chain removed them, none reached the answer
    assert any(i.startswith("adv") for i in report["retrieved_ids"])
    assert not any(i.startswith("adv") for i in report["passage_ids"])
    removed = {r["id"] for stage in report["defenses"] for r in stage["removed"]}
    assert any(i.startswith("adv") for i in removed)
    assert text and "Sydney" not in text
    # the same as /v1/ask answers for that question
    ask = httpx.post(f"{base}/v1/ask", json={"question": QUESTION},
                     headers={"Authorization": f"Bearer {token}"}, timeout=60)  # fmt: skip
    assert ask.status_code == 200 and ask.json()["answer"] == text


def test_streaming_returns_the_same_answer(live: tuple[str, Service, str, str]) -> None:
    base, _, token, _ = live
    client = _client(base, token)
    stream = client.chat.completions.create(
        model="ragshield", messages=[{"role": "user", "content": QUESTION}], stream=True
    )
    parts, finish = [], None
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk"
        parts.append(chunk.choices[0].delta.content or "")
        finish = chunk.choices[0].finish_reason or finish
    whole = client.chat.completions.create(
        model="ragshield", messages=[{"role": "user", "content": QUESTION}]
    )
    assert finish == "stop" and len(parts) > 2
    assert "".join(parts) == whole.choices[0].message.content


def test_bad_key_is_401(live: tuple[str, Service, str, str]) -> None:
    base, _, _, _ = live
    with pytest.raises(openai.AuthenticationError) as exc:
        _client(base, "rs_not-a-key").chat.completions.create(
            model="ragshield", messages=[{"role": "user", "content": QUESTION}]
        )
    assert exc.value.status_code == 401


def test_chat_is_audited_and_budgeted_like_ask(live: tuple[str, Service, str, str]) -> None:
    base, service, _, _ = live
    _, token = service.keys.create("budgeted")
    client = _client(base, token)
    codes = []
    for _ in range(8):  # limits.requests_per_minute = 6
        try:
            client.chat.completions.create(
                model="ragshield", messages=[{"role": "user", "content": QUESTION}]
            )
            codes.append(200)
        except openai.RateLimitError as exc:
            codes.append(exc.status_code)
    assert codes.count(200) == 6 and codes[-1] == 429
    usage = {u["name"]: u for u in service.key_usage()}
    assert usage["budgeted"]["requests"] >= 6


def test_bad_chat_input_is_422(live: tuple[str, Service, str, str]) -> None:
    base, _, token, _ = live
    with pytest.raises(openai.UnprocessableEntityError) as exc:
        _client(base, token).chat.completions.create(
            model="ragshield", messages=[{"role": "system", "content": "x"}]
        )
    assert "no message with role 'user'" in exc.value.response.json()["detail"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [("plain", "plain"), ([{"type": "text", "text": "a"}, {"type": "image_url"},
                           {"type": "text", "text": "b"}], "a\nb")],
)  # fmt: skip
def test_last_user_message_forms(content: Any, expected: str) -> None:
    msgs = [ChatMessage(role="user", content="first"), ChatMessage(role="user", content=content)]
    assert last_user_message(msgs) == expected
    with pytest.raises(ValueError, match="no text"):
        last_user_message([ChatMessage(role="user", content="  ")])


def test_admin_add_screens_and_serves_new_documents(live: tuple[str, Service, str, str]) -> None:
    base, _, token, admin = live
    docs = [
        {"id": "perth", "title": "Perth", "text": "Perth is the capital of Western Australia, "
         "on the Swan River. Kings Park overlooks its business district."},
        *({"id": f"new-adv{i}", "text": t} for i, t in enumerate(ATTACK["adv_texts"])),
    ]  # fmt: skip
    h = {"Authorization": f"Bearer {admin}"}
    denied = httpx.post(f"{base}/v1/admin/index/add", json={"documents": docs},
                        headers={"Authorization": f"Bearer {token}"}, timeout=120)  # fmt: skip
    assert denied.status_code == 403  # the ask scope may not write the index
    r = httpx.post(f"{base}/v1/admin/index/add",
                   json={"documents": docs, "screen": "ragdefender"}, headers=h, timeout=120)  # fmt: skip
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
