"""``POST /v1/chat/completions`` with the official ``openai`` client against a live server on
loopback: a defended answer (non-streaming and streaming), the same keys (401 with a bad
one), budgets and audit as ``/v1/ask``. The live server is ``conftest.live``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from ragshield.server import Service
from ragshield.server.openai_chat import ChatMessage, last_user_message

openai = pytest.importorskip("openai")

QUESTION = "What is the capital of Australia?"


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
    ask = httpx.post(
        f"{base}/v1/ask",
        json={"question": QUESTION},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
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
