"""A local PostgreSQL + pgvector server for development and tests (PyPI ``pgserver``).

Production deployments point ragshield at their own server with a URI instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragshield.errors import RagshieldError

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
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    srv = _pgserver().get_server(str(data_dir), cleanup_mode=None if persistent else "stop")
    _HANDLES[data_dir] = srv
    uri = str(srv.get_uri())
    srv.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    (data_dir / _STATE).write_text(json.dumps({"uri": uri}), encoding="utf-8")
    return uri


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
