"""PostgreSQL + pgvector behind the VectorStore protocol: the shared, server-side store.

One table per index holds passages and their vectors; an HNSW index (``vector_ip_ops``)
serves approximate search, and ``exact=True`` forces a sequential scan. Ingest is one
transaction — rows are COPYed into a staging table and upserted by passage id — so an
interrupted ingest leaves the previous contents intact, and re-ingesting the same corpus is
idempotent.

A local server for development and tests: ``ragshield db start --data DIR`` (PyPI
``pgserver`` ships PostgreSQL 16 with pgvector); in production pass your own URI.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.errors import DataFormatError, InputError, RagshieldError
from ragshield.store.base import check_batch, check_k, check_queries
from ragshield.types import Passage, RetrievedPassage

_MEM = re.compile(r"^[0-9]+\s*(kB|MB|GB|TB)$")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _psycopg() -> Any:
    try:
        import psycopg
        from pgvector.psycopg import register_vector
    except ImportError as exc:
        raise RagshieldError(
            'PgVectorStore needs the [pg] extra: pip install "ragshield[pg]"'
        ) from exc
    return psycopg, register_vector


class PgVectorStore:
    """Inner-product search over L2-normalised vectors in PostgreSQL.

    Parameters
    ----------
    uri: libpq connection string (``postgresql://user:pw@host:5432/db``).
    dim: vector dimension; checked against an existing table.
    table: table name (lower-case identifier).
    hnsw_m, ef_construction: HNSW build parameters (pgvector defaults 16 / 64).
    ef_search: HNSW beam width at query time (pgvector default 40; raise for recall).
    exact: search by sequential scan (exact) instead of the HNSW index.
    encoder_name: recorded so the table is not searched with another model.
    read_only: open an existing table for search only: the connection is read-only and
        nothing is created (no extension, table or ``ragshield_meta`` row); a pointer to a
        missing table is an error. Pointer directories open this way (:meth:`from_meta`).
    connect_timeout: seconds to wait for the server's handshake (libpq
        ``connect_timeout``; a server that accepts TCP and never answers fails after this).
    """

    def __init__(
        self,
        uri: str,
        dim: int,
        *,
        table: str = "ragshield_passages",
        hnsw_m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 40,
        exact: bool = False,
        encoder_name: str = "",
        read_only: bool = False,
        connect_timeout: float = 10.0,  # libpq's own default is to wait forever
    ) -> None:
        if not _IDENT.match(table):
            raise InputError(
                f"The 'table' parameter of PgVectorStore must be a lower-case SQL identifier. "
                f"Got {table!r} instead."
            )
        if not isinstance(dim, int) or dim < 1:
            raise InputError(
                f"The 'dim' parameter of PgVectorStore must be an int >= 1. Got {dim!r}."
            )
        self.uri = uri
        self._dim = dim
        self.table = table
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.exact = exact
        self.encoder_name = encoder_name
        self.read_only = read_only
        self.connect_timeout = connect_timeout
        #: nearest-neighbour statistics recorded at index time (defenses/calibration.py)
        self.profile: dict[str, Any] | None = None
        self._conn: Any = None

    # ---- connection & schema ------------------------------------------------------------
    def connect(self) -> Any:
        if self._conn is None or self._conn.closed:
            psycopg, register_vector = _psycopg()
            # libpq takes whole seconds; 0 would mean "wait forever"
            timeout = max(1, math.ceil(self.connect_timeout))
            try:
                conn = psycopg.connect(self.uri, autocommit=False, connect_timeout=timeout)
            except (psycopg.OperationalError, psycopg.ProgrammingError) as exc:
                where = _strip_password(self.uri)
                raise RagshieldError(
                    f"cannot connect to PostgreSQL at {where}: {exc}".strip()
                ) from None
            if self.read_only:
                conn.read_only = True
                self._conn = conn
                self._check_schema()
                register_vector(conn)
                conn.rollback()
                return self._conn
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.commit()
            register_vector(conn)
            self._conn = conn
            self._ensure_schema()
        return self._conn

    def _check_schema(self) -> None:
        """Read-only open: the table and its ``ragshield_meta`` row must already exist."""
        c = self._conn
        exists = c.execute(
            "SELECT to_regclass('ragshield_meta') IS NOT NULL, to_regclass(%s) IS NOT NULL, "
            "EXISTS (SELECT 1 FROM pg_type WHERE typname = 'vector')",
            (self.table,),
        ).fetchone()
        row = None
        if exists[0]:
            row = c.execute(
                "SELECT dim FROM ragshield_meta WHERE name = %s", (self.table,)
            ).fetchone()
        if not (exists[1] and exists[2]) or row is None:
            self.close()
            raise InputError(
                f"table {self.table} is not a ragshield index in {_strip_password(self.uri)} "
                "(the pointer names a table that does not exist; nothing was created). "
                "Build it with 'ragshield index CORPUS --store pgvector'."
            )
        if row[0] != self._dim:
            self.close()
            raise InputError(
                f"table {self.table} holds {row[0]}-d vectors; this store was opened with "
                f"dim={self._dim}: the index was built with another encoder."
            )

    def _ensure_schema(self) -> None:
        c = self._conn
        c.execute(
            "CREATE TABLE IF NOT EXISTS ragshield_meta (name text PRIMARY KEY, dim int NOT NULL, "
            "encoder_name text NOT NULL DEFAULT '', schema_version int NOT NULL)"
        )
        row = c.execute("SELECT dim FROM ragshield_meta WHERE name = %s", (self.table,)).fetchone()
        if row is not None and row[0] != self._dim:
            raise InputError(
                f"table {self.table} holds {row[0]}-d vectors; this store was opened with "
                f"dim={self._dim}: the index was built with another encoder."
            )
        c.execute(
            f"CREATE TABLE IF NOT EXISTS {self.table} (row_id bigserial PRIMARY KEY, "
            "id text UNIQUE NOT NULL, title text NOT NULL DEFAULT '', text text NOT NULL, "
            f"metadata jsonb NOT NULL DEFAULT '{{}}', embedding vector({self._dim}) NOT NULL)"
        )
        c.execute(
            "INSERT INTO ragshield_meta (name, dim, encoder_name, schema_version) "
            "VALUES (%s, %s, %s, 1) ON CONFLICT (name) DO UPDATE SET encoder_name = "
            "CASE WHEN EXCLUDED.encoder_name = '' THEN ragshield_meta.encoder_name "
            "ELSE EXCLUDED.encoder_name END",
            (self.table, self._dim, self.encoder_name),
        )
        c.commit()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        row = self.connect().execute(f"SELECT count(*) FROM {self.table}").fetchone()
        self._conn.commit()
        return int(row[0])

    # ---- ingest -------------------------------------------------------------------------
    def add(self, passages: Sequence[Passage], vectors: np.ndarray) -> None:
        vectors = check_batch(passages, vectors, self._dim)
        ids = [p.id for p in passages]
        if len(set(ids)) != len(ids):
            raise InputError("duplicate passage ids within one batch")
        if not passages:
            return
        conn = self.connect()
        try:
            with conn.transaction():
                from psycopg.types.json import Jsonb

                conn.execute(
                    f"CREATE TEMP TABLE staging (LIKE {self.table} INCLUDING DEFAULTS) ON COMMIT DROP"
                )
                with conn.cursor().copy(
                    "COPY staging (id, title, text, metadata, embedding) FROM STDIN WITH (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["text", "text", "text", "jsonb", "vector"])
                    for p, v in zip(passages, vectors, strict=True):
                        copy.write_row([p.id, p.title, p.text, Jsonb(dict(p.metadata)), v])
                conn.execute(
                    f"INSERT INTO {self.table} (id, title, text, metadata, embedding) "
                    "SELECT id, title, text, metadata, embedding FROM staging "
                    "ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, text = EXCLUDED.text, "
                    "metadata = EXCLUDED.metadata, embedding = EXCLUDED.embedding"
                )
                self.on_ingest_batch()
        finally:
            if (
                conn.info.transaction_status != 0
            ):  # leave the connection idle, never mid-transaction
                conn.rollback()

    def on_ingest_batch(self) -> None:
        """Hook inside the ingest transaction (tests raise here to simulate a crash)."""

    def build_index(self, maintenance_work_mem: str | None = None) -> None:
        """(Re)build the HNSW index; cheaper once after bulk ingest than row by row.

        ``maintenance_work_mem`` (e.g. ``"2GB"``) is set for this transaction only: pgvector
        builds fast while the graph fits in it and slows sharply once it spills (its notice
        "hnsw graph no longer fits into maintenance_work_mem"); the server default is 64MB,
        about 40k 384-d vectors.
        """
        conn = self.connect()
        if maintenance_work_mem is not None:
            if not _MEM.match(maintenance_work_mem):
                raise InputError(
                    "maintenance_work_mem must look like '512MB' or '2GB'. "
                    f"Got {maintenance_work_mem!r} instead."
                )
            conn.execute(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'")
        conn.execute(f"DROP INDEX IF EXISTS {self.table}_hnsw")
        conn.execute(
            f"CREATE INDEX {self.table}_hnsw ON {self.table} USING hnsw (embedding vector_ip_ops) "
            f"WITH (m = {int(self.hnsw_m)}, ef_construction = {int(self.ef_construction)})"
        )
        conn.commit()

    # ---- search -------------------------------------------------------------------------
    def search(
        self, query_vectors: np.ndarray, k: int, *, where: Mapping[str, Any] | None = None
    ) -> list[list[RetrievedPassage]]:
        """Top-k per query row; ``where`` keeps passages whose metadata contains those pairs."""
        check_k(k)
        q = check_queries(query_vectors, self._dim)
        conn = self.connect()
        filt = " WHERE metadata @> %s::jsonb" if where else ""
        sql = (
            f"SELECT id, title, text, metadata, embedding, -(embedding <#> %s) AS score "
            f"FROM {self.table}{filt} ORDER BY embedding <#> %s LIMIT %s"
        )
        out: list[list[RetrievedPassage]] = []
        with conn.transaction():
            if self.exact:
                conn.execute("SET LOCAL enable_indexscan = off")
            else:
                conn.execute(f"SET LOCAL hnsw.ef_search = {max(int(self.ef_search), k)}")
            for row in q:
                params: list[Any] = [row]
                if where:
                    params.append(json.dumps(dict(where)))
                params += [row, k]
                rows = conn.execute(sql, params).fetchall()
                if len(rows) < k and not where:  # count only when the index is too small
                    self._check_k(conn, k)
                out.append(
                    [
                        RetrievedPassage(
                            Passage(pid, text, title, meta),
                            float(score),
                            rank,
                            _to_numpy(emb),
                        )
                        for rank, (pid, title, text, meta, emb, score) in enumerate(rows)
                    ]
                )
        return out

    def export(self) -> tuple[list[Passage], np.ndarray]:
        """Every passage and its vector, in insertion order, read in a read-only
        transaction: how a caller copies the index (``ragshield scan`` works on an
        in-memory copy) without writing SQL outside the store."""
        conn = self.connect()
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            rows = conn.execute(
                f"SELECT id, title, text, metadata, embedding FROM {self.table} ORDER BY row_id"
            ).fetchall()
        passages = [Passage(i, text, title, dict(meta or {})) for i, title, text, meta, _ in rows]
        if not rows:
            return passages, np.zeros((0, self.dim), dtype=np.float32)
        return passages, np.stack([_to_numpy(r[4]) for r in rows]).astype(np.float32)

    def _check_k(self, conn: Any, k: int) -> None:
        check_k(k, int(conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]))

    # ---- pointer files ------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write a small index directory pointing at this table (data stays in PostgreSQL).

        The URI is stored without its password; pass credentials via ``PGPASSWORD``.
        """
        from ragshield.store.persist import write_meta_dir

        write_meta_dir(
            path,
            {
                "format_version": 1,
                "store": "pgvector",
                "uri": _strip_password(self.uri),
                "table": self.table,
                "dim": self._dim,
                "encoder_name": self.encoder_name,
                "hnsw_m": self.hnsw_m,
                "ef_search": self.ef_search,
                **({"profile": self.profile} if self.profile is not None else {}),
            },
        )

    @classmethod
    def from_meta(
        cls, meta: Mapping[str, Any], path: str | Path | None = None, uri: str | None = None
    ) -> PgVectorStore:
        """The table a pointer directory names; ``uri`` overrides the recorded address (the
        pointer holds no password)."""
        where = Path(path) / "meta.json" if path is not None else Path("meta.json")
        fields = {
            "uri": (str, uri),
            "table": (str, None),
            "hnsw_m": (int, 16),
            "ef_search": (int, 40),
            "encoder_name": (str, ""),
        }
        got: dict[str, Any] = {}
        for name, (kind, default) in fields.items():
            value = meta.get(name, default) if name != "uri" or uri is None else uri
            if value is None:
                raise DataFormatError(where, None, f"the pgvector pointer lacks {name!r}")
            if not isinstance(value, kind) or isinstance(value, bool):
                raise DataFormatError(
                    where, None, f"{name!r} must be a {kind.__name__}, got {value!r:.80}"
                )
            got[name] = value
        if not 1 <= got["hnsw_m"] <= 100 or not 1 <= got["ef_search"] <= 1000:
            raise DataFormatError(
                where, None, "'hnsw_m' must be in [1, 100], 'ef_search' in [1, 1000]"
            )
        if not re.match(r"^postgres(?:ql)?://", got["uri"]) and "=" not in got["uri"]:
            raise DataFormatError(
                where,
                None,
                f"'uri' is not a PostgreSQL address: {_strip_password(got['uri'])!r:.80}",
            )
        store = cls(
            got["uri"],
            int(meta["dim"]),
            table=got["table"],
            hnsw_m=got["hnsw_m"],
            ef_search=got["ef_search"],
            encoder_name=got["encoder_name"],
            read_only=True,
        )
        if isinstance(meta.get("profile"), dict):
            store.profile = dict(meta["profile"])
        return store


def _to_numpy(value: Any) -> np.ndarray:
    """pgvector returns numpy arrays or ``Vector`` objects depending on the transfer format."""
    to_numpy = getattr(value, "to_numpy", None)
    return np.asarray(to_numpy() if to_numpy else value, dtype=np.float32)


def _strip_password(uri: str) -> str:
    return re.sub(r"(postgres(?:ql)?://[^:/@]+):[^@]*@", r"\1@", uri)
