"""Minor list of issue #27: ``serve`` binds before it loads anything or says "serving on";
slow-header and slow-body clients are cut off; help texts are not Rich markup; ``k = true``
is not k = 1."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line, make_store


@pytest.fixture
def config(tmp_path: Path) -> Path:
    make_store().save(tmp_path / "idx")
    cfg = tmp_path / "s.toml"
    cfg.write_text(f'index = "{tmp_path / "idx"}"\n[storage]\nsqlite_path = "k.db"\n')
    return cfg


@pytest.mark.parametrize("where", ["port in use", "bad host"])
def test_serve_refuses_before_loading(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    from ragshield.server import service

    def no_load(*_a: object, **_k: object) -> None:
        raise AssertionError("the service was loaded before the bind failed")

    monkeypatch.setattr(service.Service, "from_config", no_load)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        host = "127.0.0.1" if where == "port in use" else "no-such-host.invalid"
        line = fail_line(capsys, ["serve", "--config", config, "--host", host, "--port", port])
    assert "serving" not in line
    assert ("cannot listen" in line) if where == "port in use" else ("--host" in line)


@pytest.fixture
def slow_server() -> Iterator[int]:
    """uvicorn with the service's protocol and body middleware around a trivial app."""
    import uvicorn

    from ragshield.server.http import HeaderDeadlineH11, bind
    from ragshield.server.middleware import BodyLimitMiddleware

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    class Quick(HeaderDeadlineH11):
        header_timeout = 0.5

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(BodyLimitMiddleware(app, 1000, timeout=0.5), http=Quick, log_level="error")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(5)
    sock.close()


def _closed_within(conn: socket.socket, seconds: float) -> bytes:
    conn.settimeout(seconds)
    data = b""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        chunk = conn.recv(4096)
        if not chunk:
            return data
        data += chunk
    raise AssertionError("connection still open")


def test_slow_headers_are_cut(slow_server: int) -> None:
    with socket.create_connection(("127.0.0.1", slow_server)) as conn:
        conn.sendall(b"POST / HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
        assert _closed_within(conn, 3.0) == b""


def test_slow_keepalive_second_request_is_cut(slow_server: int) -> None:
    with socket.create_connection(("127.0.0.1", slow_server)) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.2)
        assert b"200" in conn.recv(4096)
        conn.sendall(b"GET / HTTP/1.1\r\n")  # the next request dribbles
        assert _closed_within(conn, 3.0) == b""


def test_slow_body_gets_408(slow_server: int) -> None:
    with socket.create_connection(("127.0.0.1", slow_server)) as conn:
        conn.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        reply = _closed_within(conn, 3.0)
    assert b" 408 " in reply and b"did not arrive" in reply


def test_normal_request_still_served(slow_server: int) -> None:
    async def go() -> int:
        import httpx

        async with httpx.AsyncClient() as c:
            r = await c.post(f"http://127.0.0.1:{slow_server}/", content=b"{}")
            return r.status_code

    assert asyncio.run(go()) == 200


def test_help_text_is_not_markup(capsys: pytest.CaptureFixture[str]) -> None:
    from ragshield.cli import run

    assert run(["ask", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "[retrieval], [defenses]" in text


@pytest.mark.parametrize("value", ["true", "false"])
def test_k_bool_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    cfg = tmp_path / "p.toml"
    cfg.write_text(f'index = "{tmp_path}"\n[retrieval]\nk = {value}\n')
    fail_line(capsys, ["ask", "--config", cfg, "Who?"], "k must be an integer")
