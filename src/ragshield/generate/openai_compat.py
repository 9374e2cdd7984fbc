"""A generator that calls any OpenAI-compatible ``/chat/completions`` endpoint.

Example::

    from ragshield.generate.openai_compat import OpenAICompatGenerator
    gen = OpenAICompatGenerator("http://127.0.0.1:8080/v1", "qwen2.5-7b-instruct")
    print(gen.generate("Who designed the tower?", ["Gustave Eiffel designed it."]).text)

Why: the papers evaluate with large hosted or served models (GPT-4o, Qwen-14B, Gemma-27B);
llama.cpp's server, vLLM, Ollama and the hosted APIs all speak this one protocol, so one
small client covers them. It sends the papers' prompt as chat messages, reports the token
counts the server bills (``usage``), and turns every transport or protocol failure into a
one-line :class:`EndpointError` instead of a traceback.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import math
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ragshield.errors import InputError, RagshieldError, check_float, check_int, check_query
from ragshield.generate.lines import first_line
from ragshield.generate.prompt import build_messages
from ragshield.types import Generation

_OWNER = "OpenAICompatGenerator"
_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(RagshieldError):
    """The endpoint could not be reached, refused the request, or answered nonsense."""


class OpenAICompatGenerator:
    """Chat-completions client with retries on transient failures.

    Parameters
    ----------
    base_url: the API root, e.g. ``http://127.0.0.1:8080/v1`` (``/chat/completions`` is
        appended).
    model: the model id the server expects.
    api_key: sent as a Bearer token; ``None`` reads ``OPENAI_API_KEY`` (may stay unset for
        local servers).
    timeout: seconds one HTTP request may take from connect to the last byte of the reply
        (a total deadline: a server dribbling a byte at a time is cut off at it, not reset
        per read). One call takes at most ``(max_retries + 1) * timeout`` plus the
        back-off sleeps (each at most 30 s).
    max_response_bytes: the largest reply accepted (a chat answer is a few kB; a larger
        one is refused as it streams in, before it fills memory).
    max_tokens, temperature: decoding settings sent with every request.
    seed: sent when not ``None`` (servers that support it become reproducible).
    max_retries: extra attempts on 408/409/429/5xx and transport errors, with exponential
        back-off (``Retry-After`` is honoured, capped at 30 s).
    stop_at_newline: keep only the first non-blank line of the reply (as the local
        generator does; off by default because served chat models rarely ramble).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        # The papers give no decoding settings; the prompt asks for a short answer
        # (PoisonedRAG template, RAGDefender §6.1), so 64 tokens and greedy decoding suffice.
        max_tokens: int = 64,
        temperature: float = 0.0,
        seed: int | None = None,
        max_retries: int = 2,
        stop_at_newline: bool = False,
        max_response_bytes: int = 8 * 1024 * 1024,  # 8 MiB: ~1,000x a 64-token answer
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.max_retries = max_retries
        self.stop_at_newline = stop_at_newline
        self.max_response_bytes = max_response_bytes
        self.name = f"openai:{model}"
        self._client: Any = None
        self._counter: Any = None

    def _validate(self) -> None:
        if not isinstance(self.base_url, str) or not self.base_url.startswith(
            ("http://", "https://")
        ):
            raise InputError(
                f"The 'base_url' parameter of {_OWNER} must be an http:// or https:// URL. "
                f"Got {self.base_url!r} instead."
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(
                f"The 'model' parameter of {_OWNER} must be a non-empty string. "
                f"Got {self.model!r} instead."
            )
        check_float(self.timeout, "timeout", _OWNER, low=0.0, high=3600.0, low_open=True)
        check_int(self.max_tokens, "max_tokens", _OWNER, low=1)
        check_float(self.temperature, "temperature", _OWNER, low=0.0, high=2.0)
        check_int(self.max_retries, "max_retries", _OWNER, low=0, high=10)
        check_int(self.max_response_bytes, "max_response_bytes", _OWNER, low=1024)
        if self.seed is not None:
            check_int(self.seed, "seed", _OWNER, low=0)
        if not isinstance(self.stop_at_newline, bool):
            raise InputError(
                f"The 'stop_at_newline' parameter of {_OWNER} must be a bool. "
                f"Got {self.stop_at_newline!r} instead."
            )

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def _http(self) -> Any:
        if self._client is None:
            self._validate()
            import httpx

            key = self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")
            headers = {"Content-Type": "application/json"}
            if key:
                headers["Authorization"] = f"Bearer {key}"
            # no kept-alive connections: each request opens its own, so its socket is known
            # (the trace hook below) and can be cut at the deadline
            self._client = httpx.Client(
                timeout=self.timeout,
                headers=headers,
                limits=httpx.Limits(max_keepalive_connections=0),
            )
        return self._client

    def close(self) -> None:
        """Close the pooled HTTP connection (also done by ``with`` blocks)."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> OpenAICompatGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def count_tokens(self, text: str) -> int:
        """Approximate count under the packaged MiniLM WordPiece tokenizer.

        A remote model's tokenizer is not available offline; the count is only used when
        the server omits ``usage``, and then it is the same yardstick the extractive
        generator uses, so token comparisons across generators stay consistent.
        """
        if not isinstance(text, str):
            raise InputError(f"count_tokens expects a string. Got {type(text).__name__} instead.")
        if self._counter is None:
            from tokenizers import Tokenizer

            from ragshield.embed.sentence_transformer import packaged_model_path

            counter = Tokenizer.from_file(str(packaged_model_path() / "tokenizer.json"))
            # The shipped tokenizer.json pads and truncates to 128 (the encoder's input
            # size); counting needs neither, or every count would be 128.
            counter.no_padding()
            counter.no_truncation()
            self._counter = counter
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def cache_identity(self) -> dict[str, Any]:
        """Everything that changes the output for a given prompt (used by CachedGenerator)."""
        return {
            "kind": "openai-compat",
            "base_url": self.base_url.rstrip("/"),
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "seed": self.seed,
            "stop_at_newline": self.stop_at_newline,
        }

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        """Answer ``question`` from ``contexts`` with the papers' prompt."""
        check_query(question)
        if isinstance(contexts, str) or not isinstance(contexts, Sequence):
            raise InputError("contexts must be a list of passage texts, not a bare string.")
        return self.complete(build_messages(question, list(contexts)))

    def complete(self, messages: Sequence[Mapping[str, str]]) -> Generation:
        """Send chat ``messages`` and return the first choice."""
        if isinstance(messages, (str, bytes)) or not messages:
            raise InputError("messages must be a non-empty list of role/content mappings.")
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
        }
        if self.seed is not None:
            payload["seed"] = self.seed
        t0 = time.perf_counter()
        body, attempts = self._post(payload)
        elapsed = time.perf_counter() - t0
        text, finish = self._parse_choice(body)
        usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else None
        prompt_tokens = usage.get("prompt_tokens") if usage else None
        completion_tokens = usage.get("completion_tokens") if usage else None
        if not isinstance(prompt_tokens, int):
            prompt_tokens = self.count_tokens(
                "\n\n".join(m["content"] for m in payload["messages"])
            )
        if not isinstance(completion_tokens, int):
            completion_tokens = self.count_tokens(text)
        return Generation(
            text=first_line(text) if self.stop_at_newline else text.strip(),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            timings={"request": elapsed},
            details={
                "model": body.get("model", self.model),
                "finish_reason": finish,
                "usage_reported": usage is not None,
                "attempts": attempts,
            },
        )

    def _post(self, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        import httpx

        client = self._http()
        attempt = 0
        while True:
            attempt += 1
            retry_after: float | None = None
            try:
                response = self._send(client, payload)
            except _DeadlineExceeded:
                error = EndpointError(
                    f"{self.url} did not answer within {self.timeout} s (a total deadline, "
                    "reply included); raise timeout= or check the server."
                )
            except httpx.TimeoutException as exc:
                error = EndpointError(
                    f"{self.url} did not answer within {self.timeout} s ({type(exc).__name__}); "
                    "raise timeout= or check the server."
                )
            except httpx.TransportError as exc:
                error = EndpointError(
                    f"cannot reach {self.url}: {exc or type(exc).__name__}. Is the server running "
                    "and the base_url right (it usually ends in /v1)?"
                )
            else:
                if response.status_code < 400:
                    return self._decode_json(response), attempt
                error = EndpointError(self._http_error_message(response))
                if response.status_code not in _RETRY_STATUS:
                    raise error
                retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt > self.max_retries:
                raise error
            time.sleep(retry_after if retry_after is not None else 0.5 * 2 ** (attempt - 1))

    def _send(self, client: Any, payload: dict[str, Any]) -> Any:
        """One POST under a total deadline and a size cap; the reply read into memory.

        httpx's timeout is per read, so a server sending a byte every few seconds never
        trips it. A timer shuts the request's socket down at the deadline (the blocked read
        then fails at once), and the body is read in chunks against the size cap.
        """
        import httpx

        sockets: list[Any] = []
        fired = threading.Event()

        def trace(event: str, info: Mapping[str, Any]) -> None:
            if event == "connection.connect_tcp.complete" and info.get("return_value"):
                sock = info["return_value"].get_extra_info("socket")
                if sock is not None:
                    sockets.append(sock)
                    if fired.is_set():
                        _cut(sock)

        def on_deadline() -> None:
            fired.set()
            for sock in sockets:
                _cut(sock)

        timer = threading.Timer(self.timeout, on_deadline)
        timer.daemon = True
        timer.start()
        try:
            with client.stream(
                "POST", self.url, json=payload, extensions={"trace": trace}
            ) as response:
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > self.max_response_bytes:
                    raise self._too_large(f"{int(declared):,} bytes declared")
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > self.max_response_bytes:
                        raise self._too_large(f"more than {len(body):,} bytes")
                    if fired.is_set():
                        raise _DeadlineExceeded
                # the body is already decoded: drop the headers that describe its encoding
                framing = {"content-encoding", "content-length", "transfer-encoding"}
                return httpx.Response(
                    response.status_code,
                    headers=[
                        (k, v) for k, v in response.headers.items() if k.lower() not in framing
                    ],
                    content=bytes(body),
                    request=response.request,
                )
        except httpx.TransportError:
            if fired.is_set():
                raise _DeadlineExceeded from None
            raise
        finally:
            timer.cancel()

    def _too_large(self, what: str) -> EndpointError:
        return EndpointError(
            f"{self.url} sent a reply larger than max_response_bytes "
            f"({self.max_response_bytes:,}): {what}; refused."
        )

    def _http_error_message(self, response: Any) -> str:
        detail = ""
        try:
            data = response.json()
            err = data.get("error") if isinstance(data, Mapping) else None
            if isinstance(err, Mapping):
                detail = str(err.get("message", ""))
            elif isinstance(err, str):
                detail = err
            elif isinstance(data, Mapping) and "detail" in data:
                detail = str(data["detail"])
        except (ValueError, json.JSONDecodeError):
            detail = response.text
        detail = " ".join(detail.split())[:300]
        hint = ""
        if response.status_code in (401, 403):
            hint = " Check api_key (or the OPENAI_API_KEY variable)."
        elif response.status_code == 404:
            hint = " Check base_url (it usually ends in /v1) and the model id."
        return (
            f"{self.url} answered HTTP {response.status_code}"
            f"{': ' + detail if detail else ''}.{hint}"
        )

    def _decode_json(self, response: Any) -> dict[str, Any]:
        try:
            body = response.json()
        except (ValueError, json.JSONDecodeError):
            snippet = " ".join(response.text.split())[:200]
            raise EndpointError(
                f"{self.url} returned invalid JSON (HTTP {response.status_code}): {snippet!r}"
            ) from None
        if not isinstance(body, dict):
            raise EndpointError(
                f"{self.url} returned JSON of type {type(body).__name__}, expected an object."
            )
        return body

    def _parse_choice(self, body: Mapping[str, Any]) -> tuple[str, str | None]:
        choices = body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, Mapping) else None
        content = message.get("content") if isinstance(message, Mapping) else None
        if content is None and isinstance(message, Mapping):
            content = ""  # a refusal or tool call: no text answer
        if not isinstance(content, str):
            raise EndpointError(
                f"{self.url} returned no choices[0].message.content; got keys "
                f"{sorted(body)[:8]}. Is this an OpenAI-compatible chat endpoint?"
            )
        finish = first.get("finish_reason") if isinstance(first, Mapping) else None
        return content, finish if isinstance(finish, str) else None


class _DeadlineExceeded(Exception):
    """The request's total deadline passed (internal: becomes an EndpointError)."""


def _cut(sock: Any) -> None:
    """Wake a read blocked on ``sock`` (shutdown, unlike close, interrupts it at once)."""
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date),
    capped at 30 s; None for anything else ("nan", "inf", "-1e999", garbage)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - time.time()
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), 30.0)
