"""Who the client is behind reverse proxies (``auth.trusted_proxies``), without HTTP.

The HTTP wiring (failure limit and access log per resolved client) is in test_server.py.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer import Typer
from typer.testing import CliRunner

from ragshield.errors import InputError
from ragshield.server.config import load_config
from ragshield.server.proxies import TrustedProxies, parse_address

PROXIES = TrustedProxies.parse(["10.0.0.0/8", "192.0.2.1", "fd00::/8"])


# (peer, X-Forwarded-For values, expected client); the right-to-left rule as MDN's
# X-Forwarded-For page describes it ("the rightmost IP address that is not a trusted proxy").
@pytest.mark.parametrize(
    ("peer", "xff", "client"),
    [
        ("10.0.0.5", ["203.0.113.7"], "203.0.113.7"),  # one trusted proxy
        ("10.0.0.5", ["203.0.113.7, 10.1.2.3"], "203.0.113.7"),  # two trusted hops
        ("10.0.0.5", ["203.0.113.7", "10.1.2.3"], "203.0.113.7"),  # header sent twice
        ("10.0.0.5", ["1.1.1.1, 203.0.113.7"], "203.0.113.7"),  # client-written 1.1.1.1
        ("10.0.0.5", ["garbage, 203.0.113.7"], "203.0.113.7"),  # junk left of the client
        ("10.0.0.5", ["203.0.113.7:5123"], "203.0.113.7"),  # address with a port
        ("10.0.0.5", ["[2001:db8::1]:443"], "2001:db8::1"),
        ("fd00::1", ["2001:db8::1"], "2001:db8::1"),  # IPv6 proxy network
        ("::ffff:10.0.0.5", ["203.0.113.7"], "203.0.113.7"),  # dual-stack peer
        ("10.0.0.5", ["10.9.9.9, 192.0.2.1"], "10.9.9.9"),  # all trusted: the left-most
        ("10.0.0.5", [], "10.0.0.5"),  # no header: the proxy itself
        ("198.51.100.9", ["203.0.113.7"], "198.51.100.9"),  # untrusted peer: header ignored
        ("testclient", ["203.0.113.7"], "testclient"),  # a peer that is no IP
        (None, ["203.0.113.7"], "unknown"),  # no peer at all (Unix socket)
    ],
)
def test_client_is_the_rightmost_untrusted_forwarded_address(
    peer: str | None, xff: list[str], client: str
) -> None:
    assert PROXIES.client(peer, xff) == client


@pytest.mark.parametrize(
    "xff",
    ["not-an-ip", "", "203.0.113.7, ", "unknown", "[2001:db8::1", "203.0.113.7, 10.0.0.300"],
)
def test_malformed_forwarded_for_falls_back_to_the_peer(xff: str) -> None:
    assert PROXIES.client("10.0.0.5", [xff]) == "10.0.0.5"


def test_default_trusts_nobody() -> None:
    nobody = TrustedProxies.parse([])
    assert nobody.client("127.0.0.1", ["203.0.113.7"]) == "127.0.0.1"
    assert nobody.client("10.0.0.5", ["203.0.113.7"]) == "10.0.0.5"


def test_client_of_reads_the_asgi_scope() -> None:
    scope: dict[str, Any] = {
        "client": ("10.0.0.5", 40000),
        "headers": [
            (b"host", b"x"),
            (b"x-forwarded-for", b"198.51.100.1"),
            (b"x-forwarded-for", b"203.0.113.7"),
        ],
    }
    assert PROXIES.client_of(scope) == "203.0.113.7"
    assert PROXIES.client_of({"client": None, "headers": []}) == "unknown"


def test_parse_address() -> None:
    assert str(parse_address(" 203.0.113.7 ")) == "203.0.113.7"
    assert str(parse_address("::1")) == "::1"
    assert parse_address("[::1]x") is None
    assert parse_address("example.com") is None


# ---- config -----------------------------------------------------------------------------
def test_config_default_is_empty_and_accepts_ips_and_cidrs(tmp_path: Path) -> None:
    assert load_config(None, index="x").auth.trusted_proxies == []
    p = tmp_path / "s.toml"
    p.write_text(
        'index = "x"\n[auth]\ntrusted_proxies = ["127.0.0.1", "::1", "10.0.0.0/8"]\n', "utf-8"
    )
    assert load_config(p).auth.trusted_proxies == ["127.0.0.1", "::1", "10.0.0.0/8"]


def test_config_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSHIELD_SERVE_AUTH__TRUSTED_PROXIES", '["fd00::/8"]')
    assert load_config(None, index="x").auth.trusted_proxies == ["fd00::/8"]


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ("10.0.0.0/33", "'10.0.0.0/33' is not an IP address or CIDR network"),
        ("10.0.0.1/8", "'10.0.0.1/8' has host bits set: write 10.0.0.0/8 for the network"),
        ("proxy.internal", "'proxy.internal' is not an IP address or CIDR network"),
    ],
)
def test_bad_trusted_proxy_is_a_one_line_config_error(
    tmp_path: Path, entry: str, words: str
) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(f'index = "x"\n[auth]\ntrusted_proxies = ["::1", "{entry}"]\n', "utf-8")
    with pytest.raises(InputError, match=r"bad\.toml") as exc:
        load_config(p)
    assert "auth.trusted_proxies" in str(exc.value) and words in str(exc.value)
    assert "\n" not in str(exc.value).strip()


def test_serve_with_a_bad_trusted_proxy_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.reliability.io_checks import fail_line

    p = tmp_path / "bad.toml"
    p.write_text('index = "x"\n[auth]\ntrusted_proxies = ["10.0.0.0/33"]\n', "utf-8")
    fail_line(capsys, ["serve", "--config", p], "auth.trusted_proxies")


def test_serve_leaves_forwarded_headers_to_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's own proxy-header handling (it believes loopback peers) and logging config
    are turned off."""
    import uvicorn

    from ragshield.server import service as service_mod
    from ragshield.server.cli import serve

    # unit-test stand-in for the service: serve() only prints its size and storage, closes it
    url = SimpleNamespace(render_as_string=lambda hide_password: "sqlite://")
    stub = SimpleNamespace(
        store=[], db=SimpleNamespace(engine=SimpleNamespace(url=url)), close=lambda: None
    )
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(service_mod.Service, "from_config", lambda cfg: stub)
    monkeypatch.setattr("ragshield.server.app.create_app", lambda service: "app")
    # serve binds first (ragshield.server.http.bind), then runs a uvicorn.Server on it
    monkeypatch.setattr("ragshield.server.http.bind", lambda host, port: socket.socket())
    monkeypatch.setattr(
        uvicorn.Server,
        "run",
        lambda self, sockets=None: calls.append(
            {"proxy_headers": self.config.proxy_headers, "log_config": self.config.log_config}
        ),
    )
    p = tmp_path / "s.toml"
    p.write_text('index = "x"\n', "utf-8")
    cli = Typer()
    cli.command()(serve)
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # as in a fresh process
    res = CliRunner().invoke(cli, ["--config", str(p)])
    assert res.exit_code == 0, res.output
    assert calls and calls[0]["proxy_headers"] is False
    # uvicorn's own logging config would close every handler the process has (dictConfig)
    assert calls[0]["log_config"] is None
    # serve's log handler wrote to the runner's stream, now closed: it must not outlive serve
    assert logging.getLogger().handlers == []
