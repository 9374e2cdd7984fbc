"""``POST /v1/chat/completions``: the defended pipeline behind the OpenAI chat API.

Example::

    from openai import OpenAI

    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="rs_...")
    reply = client.chat.completions.create(
        model="ragshield", messages=[{"role": "user", "content": "Capital of Australia?"}]
    )
    print(reply.choices[0].message.content, reply.ragshield["passage_ids"])

Why: most RAG front ends and clients speak the OpenAI chat-completions API (Haystack's
Hayhooks and the LlamaIndex servers expose it), so pointing an existing client at
``ragshield serve`` is a change of base URL. The *last user message* is the question (its
text parts joined, for the list-of-parts form); earlier turns and system prompts are not
part of the retrieval question — the pipeline's prompt is the defended one. The request
goes through exactly what ``/v1/ask`` does: the same key (scope ``ask``), budget,
extraction throttle (a refusal is a 429 the client retries or reports), audit row and
defense chain; the reply carries the ``ragshield`` report (served passage ids, every
removal and why) beside the OpenAI fields, which clients keep as an extra attribute.

``stream: true`` answers as server-sent events in the OpenAI chunk format
(``chat.completion.chunk``, then ``data: [DONE]``). The pipeline generates the whole
answer first (defenses run on the retrieved set before any token exists), so the stream
sends the finished answer in word-sized chunks: clients that only speak streaming work,
with no earlier first token.
"""

import json
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from ragshield.errors import InputError
from ragshield.server.auth import ApiKey
from ragshield.server.schemas import AskRequest, UnicodeBody

MODEL = "ragshield"


class ChatMessage(BaseModel):
    """One message; ``content`` is a string or OpenAI's list of typed parts."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(UnicodeBody):
    """The fields ragshield reads; the client's other sampling fields are accepted and
    ignored (the server's generator settings hold)."""

    model_config = ConfigDict(extra="allow")
    model: str = MODEL
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False


def last_user_message(messages: list[ChatMessage]) -> str:
    """The text of the last ``user`` message (InputError when there is none or it is
    empty)."""
    for m in reversed(messages):
        if m.role != "user":
            continue
        if isinstance(m.content, str):
            text = m.content
        else:
            text = "\n".join(
                str(p.get("text", "")) for p in m.content or [] if p.get("type") == "text"
            )
        if not text.strip():
            raise InputError("messages: the last user message has no text")
        return text
    raise InputError("messages: no message with role 'user' (it is the question)")


def completion(result: dict[str, Any], model: str, created: int) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` object from a ``/v1/ask`` result."""
    return {
        "id": f"chatcmpl-{result['request_id']}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": result["answer"], "refusal": None},
            }
        ],
        "ragshield": _report(result),
    }


def _report(result: dict[str, Any]) -> dict[str, Any]:
    keys = ("request_id", "passage_ids", "retrieved_ids", "defenses", "throttle", "timings_ms")
    return {k: result.get(k) for k in keys}


def chunks(result: dict[str, Any], model: str, created: int) -> Iterator[str]:
    """Server-sent events in the OpenAI streaming format (see the module docstring)."""
    cid = f"chatcmpl-{result['request_id']}"

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    yield event({"role": "assistant", "content": ""})
    text = result["answer"]
    start = 0
    while start < len(text):  # word-sized pieces, spaces kept, so joining restores the text
        end = text.find(" ", start + 1)
        end = len(text) if end < 0 else end
        yield event({"content": text[start:end]})
        start = end
    yield event({}, "stop", ragshield=_report(result))
    yield "data: [DONE]\n\n"


def mount(
    app: FastAPI,
    service: Any,
    requires: Callable[[str], Callable[..., Any]],
    run_admitted: Callable[..., Any],
) -> None:
    """Add the route to ``app`` (called by :func:`ragshield.server.app.create_app` with its
    own key dependency and admitted-run helper, so nothing differs from ``/v1/ask``)."""
    import anyio

    @app.post("/v1/chat/completions", tags=["openai"], response_model=None)
    async def chat_completions(
        request: Request, body: ChatRequest, key: Annotated[ApiKey, Depends(requires("ask"))]
    ) -> Any:
        """OpenAI-compatible chat completion through the defended pipeline."""
        t0 = time.perf_counter()
        try:
            ask = AskRequest(question=last_user_message(body.messages))
        except ValidationError as exc:  # was a 500 (#27 hostile pass)
            raise InputError("messages: " + "; ".join(e["msg"] for e in exc.errors())) from None
        verdict = await run_in_threadpool(service.admit_ask, key, ask)
        assert verdict.admission is not None
        request.state.admission = verdict.admission
        if verdict.delay > 0:
            await anyio.sleep(verdict.delay)
        result = await run_admitted(request, verdict.admission, service.ask, key, ask, verdict, t0)
        created = int(time.time())
        model = body.model or MODEL
        if body.stream:
            # the answer is complete: every event in one write (as many small writes, the
            # stream took ~68 ms instead of ~6 on loopback: TCP delayed ACKs between them)
            events = "".join(chunks(result, model, created))
            return StreamingResponse(
                iter([events]),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Request-Id": str(result["request_id"])},
            )
        return completion(result, model, created)
