"""OpenAICompatGenerator against a tiny OpenAI-style server on loopback (port 0).

The server is ``http.server`` in a thread, scripted per test: each queued reply is
``(status, headers, body_bytes, delay_seconds)``; every request it receives is recorded.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ragshield.errors import InputError, RagshieldError
from ragshield.generate.openai_compat import EndpointError, OpenAICompatGenerator
from ragshield.generate.prompt import build_messages

QUESTION = "Who designed the Zorblat Bridge?"
CONTEXTS = ["The Zorblat Bridge was designed by Mirena Tolst.", "Kelvora sells cheese."]


def _completion(text: str, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body).encode()


class FakeOpenAI:
    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, str], bytes, float]] = []
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                fake.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "json": json.loads(self.rfile.read(length)),
                    }
                )
                status, headers, body, delay = (
                    fake.replies.pop(0) if fake.replies else (200, {}, _completion("ok"), 0.0)
                )
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # client timed out first
                    pass

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def reply(self, status: int, body: bytes, headers: dict[str, str] | None = None, delay=0.0):
        self.replies.append((status, headers or {}, body, delay))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    yield fake
    fake.close()


class TestSuccess:
    def test_sends_the_papers_prompt_and_reads_usage(self, server):
        server.reply(
            200, _completion(" Mirena Tolst ", {"prompt_tokens": 91, "completion_tokens": 4})
        )
        with OpenAICompatGenerator(server.url + "/", "my-model", api_key="sk-test") as gen:
            out = gen.generate(QUESTION, CONTEXTS)
        assert out.text == "Mirena Tolst"
        assert (out.prompt_tokens, out.completion_tokens) == (91, 4)
        assert out.details["usage_reported"] is True and out.details["attempts"] == 1
        assert out.details["finish_reason"] == "stop"
        req = server.requests[0]
        assert req["path"] == "/v1/chat/completions"
        assert req["headers"]["Authorization"] == "Bearer sk-test"
        assert req["json"]["messages"] == build_messages(QUESTION, CONTEXTS)
        assert req["json"]["model"] == "my-model"
        assert (req["json"]["temperature"], req["json"]["max_tokens"]) == (0.0, 64)
        assert "seed" not in req["json"]

    def test_missing_usage_falls_back_to_local_counts(self, server, monkeypatch):
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        server.reply(200, _completion("Mirena Tolst"))
        gen = OpenAICompatGenerator(server.url, "m", seed=7)
        out = gen.generate(QUESTION, CONTEXTS)
        assert out.details["usage_reported"] is False
        assert out.completion_tokens == gen.count_tokens("Mirena Tolst") > 0
        assert out.prompt_tokens > gen.count_tokens(QUESTION) + gen.count_tokens(CONTEXTS[0])
        assert gen.count_tokens("word " * 300) == 300  # not padded or truncated to 128
        assert "Authorization" not in server.requests[0]["headers"]
        assert server.requests[0]["json"]["seed"] == 7

    def test_api_key_from_environment(self, server, monkeypatch):
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        OpenAICompatGenerator(server.url, "m").generate(QUESTION, CONTEXTS)
        assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-env"

    def test_stop_at_newline_keeps_the_first_line(self, server):
        server.reply(200, _completion("\n Mirena Tolst\nShe also designed ..."))
        out = OpenAICompatGenerator(server.url, "m", stop_at_newline=True).generate(
            QUESTION, CONTEXTS
        )
        assert out.text == "Mirena Tolst"

    def test_retries_transient_errors(self, server):
        server.reply(503, b'{"error": {"message": "busy"}}', {"Retry-After": "0"})
        server.reply(429, b'{"error": "slow down"}', {"Retry-After": "0"})
        server.reply(200, _completion("Mirena Tolst"))
        out = OpenAICompatGenerator(server.url, "m", max_retries=2).generate(QUESTION, CONTEXTS)
        assert out.text == "Mirena Tolst" and out.details["attempts"] == 3
        assert len(server.requests) == 3


class TestFailures:
    def test_gives_up_after_max_retries(self, server):
        for _ in range(2):
            server.reply(503, b'{"error": {"message": "overloaded"}}', {"Retry-After": "0"})
        gen = OpenAICompatGenerator(server.url, "m", max_retries=1)
        with pytest.raises(EndpointError, match="HTTP 503: overloaded"):
            gen.generate(QUESTION, CONTEXTS)
        assert len(server.requests) == 2

    def test_auth_error_is_not_retried_and_says_what_to_check(self, server):
        server.reply(401, b'{"error": {"message": "Incorrect API key provided"}}')
        with pytest.raises(EndpointError) as info:
            OpenAICompatGenerator(server.url, "m", api_key="bad").generate(QUESTION, CONTEXTS)
        message = str(info.value)
        assert "HTTP 401: Incorrect API key provided" in message and "api_key" in message
        assert "\n" not in message and len(server.requests) == 1

    def test_not_found_hints_at_base_url(self, server):
        server.reply(404, b"<html>nope</html>")
        with pytest.raises(EndpointError, match=r"HTTP 404: <html>nope</html>\. Check base_url"):
            OpenAICompatGenerator(server.url, "m").generate(QUESTION, CONTEXTS)

    def test_malformed_json(self, server):
        server.reply(200, b"{not json")
        with pytest.raises(EndpointError, match="returned invalid JSON"):
            OpenAICompatGenerator(server.url, "m").generate(QUESTION, CONTEXTS)

    def test_wrong_shape(self, server):
        server.reply(200, b'{"data": []}')
        with pytest.raises(EndpointError, match=r"no choices\[0\]\.message\.content"):
            OpenAICompatGenerator(server.url, "m").generate(QUESTION, CONTEXTS)

    def test_connection_refused(self):
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        gen = OpenAICompatGenerator(f"http://127.0.0.1:{port}/v1", "m", max_retries=0)
        with pytest.raises(EndpointError, match=r"cannot reach .*Is the server running"):
            gen.generate(QUESTION, CONTEXTS)

    def test_timeout(self, server):
        server.reply(200, _completion("late"), delay=1.0)
        gen = OpenAICompatGenerator(server.url, "m", timeout=0.2, max_retries=0)
        with pytest.raises(EndpointError, match=r"did not answer within 0\.2 s"):
            gen.generate(QUESTION, CONTEXTS)

    def test_errors_are_ragshield_errors(self):
        assert issubclass(EndpointError, RagshieldError)


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            (
                {"base_url": "ftp://host/v1"},
                "The 'base_url' parameter of OpenAICompatGenerator must be an http:// or "
                "https:// URL. Got 'ftp://host/v1' instead.",
            ),
            ({"model": " "}, "The 'model' parameter of OpenAICompatGenerator"),
            ({"max_tokens": 0}, "The 'max_tokens' parameter of OpenAICompatGenerator"),
            ({"timeout": 0}, "The 'timeout' parameter of OpenAICompatGenerator"),
        ],
        ids=["base_url", "model", "max_tokens", "timeout"],
    )
    def test_bad_parameters(self, kwargs, message):
        args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
        gen = OpenAICompatGenerator(args.pop("base_url"), args.pop("model"), **args)
        with pytest.raises(InputError) as info:
            gen.generate(QUESTION, CONTEXTS)
        assert message in str(info.value)

    def test_bad_inputs(self):
        gen = OpenAICompatGenerator("http://127.0.0.1:1/v1", "m")
        with pytest.raises(InputError, match="bare string"):
            gen.generate(QUESTION, "a bare string")
        with pytest.raises(InputError, match="question is empty"):
            gen.generate("  ", CONTEXTS)

    def test_cache_identity(self):
        a = OpenAICompatGenerator("http://h/v1/", "m").cache_identity()
        b = OpenAICompatGenerator("http://h/v1", "m", temperature=0.7).cache_identity()
        assert a["base_url"] == b["base_url"] == "http://h/v1" and a != b
