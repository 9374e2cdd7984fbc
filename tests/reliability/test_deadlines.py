"""Hostile servers meet a deadline (issue #27, root causes 5 and 6).

A raw-socket server on loopback plays each misbehaviour the issue found: a pgvector host
that accepts TCP and never answers; an OpenAI-compatible endpoint that dribbles its headers
or body a byte at a time (httpx's timeout is per read, so it never fired); a reply far larger
than any answer; ``Retry-After: nan``. Each must end in one :class:`RagshieldError` within
its documented deadline, not a hang, a traceback or gigabytes of memory.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from ragshield.errors import RagshieldError
from ragshield.generate.openai_compat import EndpointError, OpenAICompatGenerator

Play = Callable[[socket.socket], None]
OK_BODY = b'{"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}]}'


class RawServer:
    """Accepts connections and hands each to ``play`` in a thread."""

    def __init__(self, play: Play) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.play = play
        self.stop = threading.Event()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            self.play(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def _dribble(data: bytes, every: float) -> Play:
    def play(conn: socket.socket) -> None:
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])
            time.sleep(every)

    return play


def _headers(extra: str = "", status: str = "200 OK", length: int | None = None) -> bytes:
    size = f"Content-Length: {length}\r\n" if length is not None else ""
    return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{size}{extra}\r\n".encode()


def _huge_chunked(conn: socket.socket) -> None:
    conn.sendall(_headers("Transfer-Encoding: chunked\r\n"))
    chunk = b"x" * 65536
    for _ in range(2000):  # 128 MiB if nobody stops reading
        conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))


def _huge_declared(conn: socket.socket) -> None:
    conn.sendall(_headers(length=300 * 1024 * 1024) + b"{")
    time.sleep(5)


def _silent(conn: socket.socket) -> None:
    time.sleep(30)


@pytest.fixture
def serve() -> Iterator[Callable[[Play], RawServer]]:
    servers: list[RawServer] = []

    def start(play: Play) -> RawServer:
        servers.append(RawServer(play))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


@pytest.mark.parametrize(
    ("play", "match"),
    [
        (_dribble(_headers(length=len(OK_BODY)) + OK_BODY, 0.05), "within 1.0 s"),
        (_dribble(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"a" * 500, 0.02), "within 1.0 s"),
        (_huge_chunked, "larger than max_response_bytes"),
        (_huge_declared, "300,0|314,572,800 bytes declared"),
        (_silent, "within 1.0 s"),
    ],
    ids=["body-dribble", "header-dribble", "huge-chunked", "huge-declared", "silent"],
)
def test_openai_endpoint_meets_deadline_and_cap(serve, play: Play, match: str) -> None:
    srv = serve(play)
    gen = OpenAICompatGenerator(
        f"http://127.0.0.1:{srv.port}/v1",
        "m",
        timeout=1.0,
        max_retries=0,
        max_response_bytes=1024 * 1024,
    )
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match=match):
        gen.complete([{"role": "user", "content": "hi"}])
    assert time.monotonic() - t0 < 3.0


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "-5", "soon", ""])
def test_retry_after_garbage_is_ignored(serve, value: str) -> None:
    busy = _headers(f"Retry-After: {value}\r\n", "503 Busy", 2) + b"{}"
    replies = iter([busy, _headers(length=len(OK_BODY)) + OK_BODY])
    srv = serve(lambda conn: conn.sendall(next(replies)))
    gen = OpenAICompatGenerator(f"http://127.0.0.1:{srv.port}/v1", "m", max_retries=1)
    t0 = time.monotonic()
    assert gen.complete([{"role": "user", "content": "hi"}]).text == "Paris"
    assert time.monotonic() - t0 < 5.0


def test_pgvector_connect_times_out(serve) -> None:
    pytest.importorskip("psycopg")
    from ragshield.store.pgvector_store import PgVectorStore

    srv = serve(_silent)  # accepts TCP, never speaks the protocol
    store = PgVectorStore(f"postgresql://u@127.0.0.1:{srv.port}/db", 4, connect_timeout=1)
    t0 = time.monotonic()
    with pytest.raises(RagshieldError, match="cannot connect to PostgreSQL"):
        store.connect()
    assert time.monotonic() - t0 < 5.0


@pytest.mark.parametrize(
    ("body", "outcome"),
    [
        (b"[" * 50_000, "nested too deeply"),
        (b'{"choices": [{"message": {"content": "Par\\ud800is"}}]}', "Par\ufffdis"),
    ],
    ids=["deep-json", "surrogate-content"],
)
def test_hostile_reply_bodies(serve, body: bytes, outcome: str) -> None:
    """Found by benchmarks/hostile_pass.py: RecursionError and a tokenizer TypeError."""
    srv = serve(lambda conn: conn.sendall(_headers(length=len(body)) + body))
    gen = OpenAICompatGenerator(f"http://127.0.0.1:{srv.port}/v1", "m", max_retries=0)
    try:
        text = gen.generate("Who?", ["Paris is the capital."]).text
    except EndpointError as exc:
        text = str(exc)
    assert outcome in text
