"""A local PostgreSQL + pgvector server for development and tests (PyPI ``pgserver``).

Production deployments point ragshield at their own server with a URI instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ragshield.errors import InputError, RagshieldError

_STATE = "ragshield-server.json"
_HANDLES: dict[Path, Any] = {}


def _pgserver() -> Any:
    try:
        import warnings

        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:
        raise RagshieldError(
            'a local server needs the [pg] extra: pip install "ragshield[pg]"'
        ) from exc
    return pgserver


def start(data_dir: str | Path, *, persistent: bool = True) -> str:
    """Start (or reuse) the server whose data lives in ``data_dir``; return its URI.

    ``persistent`` keeps it running after this process exits (``ragshield db start``);
    tests pass False so the server stops with them.
    """
    data_dir = check_data_dir(data_dir)
    pgserver = _pgserver()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        srv = pgserver.get_server(str(data_dir), cleanup_mode=None if persistent else "stop")
    except Exception as exc:  # pgserver raises bare Exceptions and subprocess errors
        msg = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise RagshieldError(f"cannot start PostgreSQL in {data_dir}: {msg}") from None
    _HANDLES[data_dir] = srv
    uri = str(srv.get_uri())
    srv.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    (data_dir / _STATE).write_text(json.dumps({"uri": uri}), encoding="utf-8")
    return uri


def check_data_dir(data_dir: str | Path) -> Path:
    """The resolved ``data_dir`` if a server may live there: a new or empty folder, or one
    holding a PostgreSQL cluster (``PG_VERSION``). Anything else — a file, a user's folder —
    is refused before pgserver runs initdb in it and hands it to its own system user
    (issue #27, root cause 7)."""
    given = Path(data_dir)
    try:
        path = given.resolve()
        if path.exists():
            if not path.is_dir():
                raise InputError(f"--data {given} is a file; name a new folder for the server")
            if any(path.iterdir()) and not (path / "PG_VERSION").is_file():
                raise InputError(
                    f"--data {given} holds files that are not a PostgreSQL data folder; "
                    "name a new or empty folder (nothing was changed)"
                )
            return path
        ancestor = path.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise InputError(f"--data {given}: {ancestor} is a file, not a folder")
        if not os.access(ancestor, os.W_OK):
            raise InputError(f"--data {given}: {ancestor} is not writable")
    except OSError as exc:
        raise InputError(f"--data {given}: {exc.strerror or exc}") from None
    return path


def status(data_dir: str | Path) -> str | None:
    """The URI of a running server for ``data_dir``, or None."""
    data_dir = Path(data_dir).resolve()
    pid_file = data_dir / "postmaster.pid"
    if not pid_file.is_file():
        return None
    try:
        pid = int(pid_file.read_text().split()[0])
        import os

        os.kill(pid, 0)
    except (ValueError, OSError, IndexError):
        return None
    state = data_dir / _STATE
    return str(json.loads(state.read_text())["uri"]) if state.is_file() else "running"


def stop(data_dir: str | Path) -> bool:
    """Stop the server for ``data_dir``; False when none was running."""
    data_dir = Path(data_dir).resolve()
    if status(data_dir) is None:
        return False
    srv = _HANDLES.pop(data_dir, None) or _pgserver().get_server(str(data_dir), cleanup_mode="stop")
    srv.cleanup()  # pgserver runs pg_ctl as its own system user (it refuses root)
    return True
