"""``server.tables``: the per-key tables agree with ``api_keys`` on what a key id is, and a
fresh database holds every table at the newest schema version."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import inspect, select

from ragshield.server import tables


def test_every_key_id_column_has_the_api_key_id_type() -> None:
    key_type = tables.api_keys.c.id.type
    holders = [t for t in tables.metadata.sorted_tables if "key_id" in t.c]
    assert {t.name for t in holders} == {"rate_windows", "served_chunks", "key_state", "audit_log"}
    for t in holders:
        col = t.c.key_id
        assert type(col.type) is type(key_type) and col.type.length == key_type.length
        assert not col.nullable
        assert col.primary_key is (t.name != "audit_log")  # the audit log keys on its own id


def test_migrations_create_every_table(tmp_path: Path) -> None:
    engine = tables.make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    with engine.begin() as conn:
        tables.metadata.create_all(conn, tables=[tables.schema_version])
        for _version, step in tables.MIGRATIONS:
            step(conn)
    names = set(inspect(engine).get_table_names())
    assert {t.name for t in tables.metadata.sorted_tables} <= names
    with engine.connect() as conn:  # nothing recorded: recording is Database.migrate's job
        assert conn.execute(select(tables.schema_version)).first() is None
