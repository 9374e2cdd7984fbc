"""Binding and the HTTP protocol the service runs on: refuse before loading, and time out
clients that send their request too slowly.

Why: ``serve`` printed "serving on ..." and loaded the models before discovering a bad host
or a port in use; and uvicorn (h11) starts no timer until a request's headers are complete,
so clients that dribble headers held 1,000 connections open indefinitely (issue #27, minor
list). :func:`bind` opens the listening socket first; :class:`HeaderDeadlineH11` closes a
connection whose request headers are not complete within ``header_timeout`` seconds (a
slow *body* is cut by :class:`ragshield.server.middleware.BodyLimitMiddleware`).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from ragshield.errors import InputError

# Apache mod_reqtimeout's default allows 20 s for the first header byte to the last
# (header=20-40,MinRate=500); a request here is one small JSON header block.
HEADER_TIMEOUT_SECONDS = 20.0


def bind(host: str, port: int, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port``, or an InputError saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(f"--host {host!r} is not an address this machine has: {exc}") from None
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


class HeaderDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers.

    The timer starts when the connection opens and again after each response; it stops
    once a request's headers are complete (a request/response cycle has begun).
    """

    header_timeout: float = HEADER_TIMEOUT_SECONDS
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None and not self.cycle.response_complete:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()
