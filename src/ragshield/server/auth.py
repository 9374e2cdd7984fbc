"""API keys: created once, stored as argon2id hashes, checked in constant time.

A key reads ``rsk_<id>_<secret>``. The id is public (it names the key in ``keys list``,
the audit log and the metrics); the secret is 32 random bytes shown once at creation and
stored only as an argon2id hash (argon2-cffi). Verification looks the id up and lets
argon2 compare the secret; an unknown id is verified against a dummy hash so a wrong id
and a wrong secret cost the same time.

argon2 is deliberately slow (~50-100 ms and 64 MiB per check at the default cost), so
after one successful check the service keeps the SHA-256 of that secret in memory and
compares later requests against it with :func:`hmac.compare_digest`; the key row (and so
revocation) is still read from the database on every request.

Example::

    keys = KeyManager(db, AuthConfig())
    key_id, token = keys.create("alice", scopes=("ask",))
    assert keys.authenticate(token).id == key_id
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from ragshield.errors import InputError, RagshieldError
from ragshield.server.config import SCOPES, AuthConfig
from ragshield.server.db import Database, KeyRow

_TOKEN = re.compile(r"^rsk_([0-9a-f]{12})_([A-Za-z0-9_-]{20,128})$")


class AuthError(RagshieldError):
    """Missing, malformed, unknown, wrong or revoked key (HTTP 401)."""


class ScopeError(RagshieldError):
    """A valid key without the scope the endpoint needs (HTTP 403)."""


@dataclass(frozen=True)
class ApiKey:
    """An authenticated caller (never holds the secret)."""

    id: str
    name: str
    scopes: tuple[str, ...]
    rpm: int | None
    rpd: int | None

    def require(self, scope: str) -> None:
        if scope not in self.scopes:
            raise ScopeError(
                f"API key {self.id!r} lacks the {scope!r} scope (it has: "
                f"{', '.join(self.scopes) or 'none'}); create a key with --scopes {scope}."
            )


def check_scopes(scopes: Sequence[str] | str) -> tuple[str, ...]:
    items = [s.strip() for s in scopes.split(",")] if isinstance(scopes, str) else list(scopes)
    items = [s for s in items if s]
    bad = [s for s in items if s not in SCOPES]
    if bad or not items:
        raise InputError(
            f"scopes must be a non-empty subset of {', '.join(SCOPES)}. Got {items!r} instead."
        )
    return tuple(dict.fromkeys(items))


class KeyManager:
    """Create, list, revoke and verify keys against the database."""

    def __init__(
        self, db: Database, config: AuthConfig, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self.config = config
        self.clock = clock
        self._hasher: PasswordHasher | None = None
        self._dummy: str | None = None
        self._verified: dict[str, tuple[str, bytes]] = {}  # key id -> (stored hash, sha256)
        self._lock = threading.Lock()
        self._verify_slots: threading.BoundedSemaphore | None = None

    @property
    def hasher(self) -> PasswordHasher:
        if self._hasher is None:
            c = self.config
            self._hasher = PasswordHasher(
                time_cost=c.argon2_time_cost,
                memory_cost=c.argon2_memory_kib,
                parallelism=c.argon2_parallelism,
            )
            self._dummy = self._hasher.hash(secrets.token_urlsafe(32))
            self._verify_slots = threading.BoundedSemaphore(c.verify_concurrency)
        return self._hasher

    def create(
        self,
        name: str,
        scopes: Sequence[str] | str = ("ask", "filter"),
        rpm: int | None = None,
        rpd: int | None = None,
    ) -> tuple[str, str]:
        """Store a new key; return ``(key_id, token)``. The token is not kept anywhere."""
        if not isinstance(name, str) or not name.strip():
            raise InputError("a key needs a non-blank name (who or what will use it).")
        if len(name) > 200:
            raise InputError(f"key names are at most 200 characters; got {len(name)}.")
        for label, v in (("rpm", rpm), ("rpd", rpd)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise InputError(f"--{label} must be an int >= 1. Got {v!r} instead.")
        scope_t = check_scopes(scopes)
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        self.db.insert_key(
            KeyRow(
                id=key_id,
                name=name.strip(),
                secret_hash=self.hasher.hash(secret),
                scopes=scope_t,
                rpm=rpm,
                rpd=rpd,
                created_at=self.clock(),
                revoked_at=None,
            )
        )
        return key_id, f"rsk_{key_id}_{secret}"

    def list_keys(self) -> list[KeyRow]:
        return self.db.list_keys()

    def revoke(self, key_id: str) -> None:
        if self.db.get_key(key_id) is None:
            raise InputError(f"no API key with id {key_id!r}; see 'ragshield keys list'.")
        if not self.db.revoke_key(key_id, self.clock()):
            raise InputError(f"API key {key_id!r} is already revoked.")
        with self._lock:
            self._verified.pop(key_id, None)

    def _argon2_ok(self, stored: str, secret: str) -> bool:
        hasher = self.hasher
        assert self._verify_slots is not None
        with self._verify_slots:
            try:
                return bool(hasher.verify(stored, secret))
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                return False

    def authenticate(self, token: str | None) -> ApiKey:
        """The key behind ``token`` or :class:`AuthError` (one message per failure kind)."""
        if not token:
            raise AuthError(
                "missing API key: send 'Authorization: Bearer <key>' (create one with "
                "'ragshield keys create NAME')."
            )
        m = _TOKEN.match(token.strip())
        if m is None:
            raise AuthError("malformed API key: keys look like rsk_<12 hex>_<secret>.")
        key_id, secret = m.group(1), m.group(2)
        row = self.db.get_key(key_id)
        if row is None:
            self._argon2_ok(self._dummy_hash(), secret)  # same cost as a wrong secret
            raise AuthError("invalid API key.")
        digest = hashlib.sha256(secret.encode()).digest()
        with self._lock:
            cached = self._verified.get(key_id)
        if cached is not None and cached[0] == row.secret_hash:
            ok = hmac.compare_digest(cached[1], digest)
        else:
            ok = self._argon2_ok(row.secret_hash, secret)
            if ok:
                with self._lock:
                    self._verified[key_id] = (row.secret_hash, digest)
        if not ok:
            raise AuthError("invalid API key.")
        if row.revoked_at is not None:
            raise AuthError(f"API key {key_id!r} was revoked.")
        return ApiKey(row.id, row.name, row.scopes, row.rpm, row.rpd)

    def _dummy_hash(self) -> str:
        _ = self.hasher
        assert self._dummy is not None
        return self._dummy
