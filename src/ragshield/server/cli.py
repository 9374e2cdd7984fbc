"""``ragshield serve`` and ``ragshield keys``: thin calls into :mod:`ragshield.server`.

Mounted by the main CLI as::

    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")

User mistakes raise :class:`~ragshield.errors.InputError` (the main CLI prints one line
and exits 2).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragshield.cli_options import JsonOpt
from ragshield.errors import InputError
from ragshield.server.config import AuthConfig, load_config

if TYPE_CHECKING:
    from ragshield.server.auth import KeyManager

keys_app = typer.Typer(help="Create, list and revoke the service's API keys.", no_args_is_help=True)

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Server config file (TOML/YAML); its storage is used."),
]
DbOpt = Annotated[
    str | None,
    typer.Option("--db", help="SQLite file or SQLAlchemy URL (instead of --config)."),
]
KeyIdArg = Annotated[str, typer.Argument(help="The key's id (see 'keys list').")]


def serve(
    config: Annotated[Path, typer.Option("--config", "-c", help="Server config file.")],
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
) -> None:
    """Serve the defended pipeline over HTTP (see examples/server.toml)."""
    import uvicorn

    from ragshield.server.app import create_app
    from ragshield.server.http import HeaderDeadlineH11, bind
    from ragshield.server.service import Service

    if not 0 < port < 65536:
        raise InputError(f"--port must be in 1..65535. Got {port}.")
    cfg = load_config(config)
    sock = bind(host, port)  # a bad host or a port in use is refused before the models load
    # the log handler lives as long as serve does: one left on the root logger would hold a
    # stream its caller may close (a test runner's capture), and the next log line would fail
    handler = _log_to_stderr()
    try:
        service = Service.from_config(cfg)
        try:
            # proxy_headers off: auth.trusted_proxies alone decides whose X-Forwarded-For
            # counts (uvicorn's default believes any loopback peer's, or $FORWARDED_ALLOW_IPS);
            # log_config None: uvicorn's lines go through the root handler above, and its
            # dictConfig does not close every handler the process already has
            server = uvicorn.Server(
                uvicorn.Config(
                    create_app(service),
                    log_level="warning",
                    log_config=None,
                    proxy_headers=False,
                    http=HeaderDeadlineH11,
                )
            )
            typer.echo(
                f"serving {len(service.store)} passages from {cfg.index} with defenses "
                f"[{', '.join(cfg.defenses.chain) or 'none'}] on http://{host}:{port} "
                f"(storage: {service.db.engine.url.render_as_string(hide_password=True)})",
                err=True,
            )
            server.run(sockets=[sock])
        finally:
            service.close()
    finally:
        sock.close()
        if handler is not None:
            logging.getLogger().removeHandler(handler)


def _log_to_stderr() -> logging.Handler | None:
    """INFO lines to stderr, as ``logging.basicConfig`` would, unless logging is configured."""
    root = logging.getLogger()
    if root.handlers:
        return None
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler


@contextmanager
def _keys(config: Path | None, db: str | None) -> Iterator[KeyManager]:
    """The key store a ``keys`` command names, closed when the command is done (an engine
    left to the garbage collector closes SQLite's -wal/-shm files at a time nobody chose)."""
    from ragshield.server.auth import KeyManager
    from ragshield.server.db import Database

    if (config is None) == (db is None):
        raise InputError("pass exactly one of --config FILE or --db PATH_OR_URL.")
    if config is not None:
        cfg = load_config(config)
        url, auth = cfg.storage.resolved_url(), cfg.auth
    else:
        assert db is not None
        url = db if "://" in db else f"sqlite:///{Path(db).expanduser()}"
        auth = AuthConfig()
    database = Database(url)
    try:
        database.migrate()
        yield KeyManager(database, auth)
    finally:
        database.close()


@keys_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="Who or what uses the key.")],
    scopes: Annotated[
        str, typer.Option(help="Comma-separated: ask, filter, admin.")
    ] = "ask,filter",
    rpm: Annotated[
        int | None, typer.Option(help="Requests per minute (default: the config's).")
    ] = None,
    rpd: Annotated[
        int | None, typer.Option(help="Requests per day (default: the config's).")
    ] = None,
    config: ConfigOpt = None,
    db: DbOpt = None,
) -> None:
    """Create a key and print it once (only its argon2 hash is stored)."""
    with _keys(config, db) as mgr:
        key_id, token = mgr.create(name, scopes, rpm=rpm, rpd=rpd)
    typer.echo(token)
    typer.echo(
        f"created key {key_id} ({name}; scopes {scopes}). Store it now: it is not shown again.",
        err=True,
    )


@keys_app.command("list")
def list_(
    config: ConfigOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List keys (ids, names, scopes, limits, state) — never secrets."""
    with _keys(config, db) as mgr:
        keys = mgr.list_keys()
    rows: list[dict[str, Any]] = [
        {
            "id": r.id,
            "name": r.name,
            "scopes": list(r.scopes),
            "rpm": r.rpm,
            "rpd": r.rpd,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.created_at)),
            "revoked": r.revoked_at is not None,
        }
        for r in keys
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no keys; create one with 'ragshield keys create NAME'.")
        return
    for r in rows:
        typer.echo(
            f"{r['id']}  {r['name']:<20}  {','.join(r['scopes']):<17}  "
            f"rpm={r['rpm'] or '-'} rpd={r['rpd'] or '-'}  {r['created']}"
            + ("  REVOKED" if r["revoked"] else "")
        )


@keys_app.command("revoke")
def revoke(key_id: KeyIdArg, config: ConfigOpt = None, db: DbOpt = None) -> None:
    """Revoke a key: every later request with it gets 401."""
    with _keys(config, db) as mgr:
        mgr.revoke(key_id)
    typer.echo(f"revoked key {key_id}")


@keys_app.command("unblock")
def unblock(key_id: KeyIdArg, config: ConfigOpt = None, db: DbOpt = None) -> None:
    """Lift an extraction-throttle block from a key."""
    with _keys(config, db) as mgr:
        if mgr.db.get_key(key_id) is None:
            raise InputError(f"no API key with id {key_id!r}; see 'ragshield keys list'.")
        done = mgr.db.unblock(key_id)
    typer.echo(f"unblocked key {key_id}" if done else f"key {key_id} was not blocked")
