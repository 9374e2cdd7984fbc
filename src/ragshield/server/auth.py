"""API keys: created once, stored as argon2id hashes, checked without starving the server.

A key reads ``rsk_<id>_<secret>``. The id is public (it names the key in ``keys list``,
the audit log and the metrics); the secret is 32 random bytes shown once at creation and
stored only as an argon2id hash (argon2-cffi).

argon2 is deliberately slow (~50-100 ms and 64 MiB per check at the default cost), which
makes it a lever for anyone holding no key at all (issue #15 item 4: 64 clients sending
bad keys took a legitimate user from 169 to 0.19 requests/s). So:

* an unknown key id is rejected after one indexed lookup, without hashing (the id is
  public, so answering it faster than a wrong secret tells an attacker nothing new);
* a secret that verified recently is trusted by its SHA-256 for ``verify_cache_seconds``
  (compared with :func:`hmac.compare_digest`); the key row, and so revocation, is still
  read on every request;
* argon2 runs behind its own small limiter (``verify_concurrency``): in the async path
  (:meth:`KeyManager.authenticate_async`, used by the app) a request waiting for a
  verification slot holds no worker thread, so valid keys keep the thread pool;
* a client (IP) with ``failure_limit`` failed checks inside ``failure_window_seconds``
  gets :class:`AuthThrottled` (HTTP 429 + Retry-After) before any lookup or hash, except
  for a secret already in the verified cache; the app answers every failure after
  ``failure_delay_seconds`` (a sleeping coroutine), which caps how fast a connection can
  guess or flood.

The hasher is built in the constructor: built lazily, parallel first requests saw it
half-built and answered 500 (issue #15 item 2).

Example::

    keys = KeyManager(db, AuthConfig())
    key_id, token = keys.create("alice", scopes=("ask",))
    assert keys.authenticate(token).id == key_id
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import anyio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from ragshield.errors import InputError, RagshieldError, check_text
from ragshield.server.config import MAX_RATE, SCOPES, AuthConfig
from ragshield.server.db import Database, KeyRow

_TOKEN = re.compile(r"^rsk_([0-9a-f]{12})_([A-Za-z0-9_-]{20,128})$")


class AuthError(RagshieldError):
    """Missing, malformed, unknown, wrong or revoked key (HTTP 401)."""


class ScopeError(RagshieldError):
    """A valid key without the scope the endpoint needs (HTTP 403)."""


class AuthThrottled(RagshieldError):
    """Too many failed authentications from one client (HTTP 429 + Retry-After)."""

    def __init__(self, client: str, retry_after: float, limit: int, window: float) -> None:
        super().__init__(
            f"too many failed authentications from {client} ({limit} in {window:.0f} s); "
            f"retry in {max(1, math.ceil(retry_after))} s."
        )
        self.retry_after = retry_after


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


def presented_id(token: str | None) -> str:
    """The key id a token claims ('' if it is not a well-formed key): for logs and audit."""
    m = _TOKEN.match(token.strip()) if token else None
    return m.group(1) if m is not None else ""


def check_scopes(scopes: Sequence[str] | str) -> tuple[str, ...]:
    items = [s.strip() for s in scopes.split(",")] if isinstance(scopes, str) else list(scopes)
    items = [s for s in items if s]
    bad = [s for s in items if s not in SCOPES]
    if bad or not items:
        raise InputError(
            f"scopes must be a non-empty subset of {', '.join(SCOPES)}. Got {items!r} instead."
        )
    return tuple(dict.fromkeys(items))


class FailureThrottle:
    """Sliding window of failed authentications per client, in memory (one process).

    At most ``max_clients`` clients are tracked (least recently failing dropped first), so
    a flood from many addresses cannot grow it without bound.
    """

    def __init__(
        self,
        limit: int,
        window: float,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = 10_000,
    ) -> None:
        self.limit = limit
        self.window = window
        self.clock = clock
        self.max_clients = max_clients
        self._fails: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it is not throttled."""
        now = self.clock()
        with self._lock:
            q = self._fails.get(client)
            if q is None:
                return 0.0
            while q and q[0] <= now - self.window:
                q.popleft()
            if len(q) < self.limit:
                return 0.0
            return q[len(q) - self.limit] + self.window - now

    def fail(self, client: str) -> None:
        now = self.clock()
        with self._lock:
            q = self._fails.pop(client, None) or deque(maxlen=self.limit)
            q.append(now)
            self._fails[client] = q
            while len(self._fails) > self.max_clients:
                self._fails.popitem(last=False)


@dataclass(frozen=True)
class _Presented:
    key_id: str
    secret: str
    digest: bytes  # SHA-256 of the whole token: the verified-cache key


class KeyManager:
    """Create, list, revoke and verify keys against the database."""

    def __init__(
        self, db: Database, config: AuthConfig, clock: Callable[[], float] = time.time
    ) -> None:
        self.db = db
        self.config = config
        self.clock = clock
        c = config
        self.hasher = PasswordHasher(
            time_cost=c.argon2_time_cost,
            memory_cost=c.argon2_memory_kib,
            parallelism=c.argon2_parallelism,
        )
        self.failures = FailureThrottle(c.failure_limit, c.failure_window_seconds)
        # token digest -> (key id, stored hash it verified against, monotonic expiry)
        self._verified: OrderedDict[bytes, tuple[str, str, float]] = OrderedDict()
        self._lock = threading.Lock()
        self._verify_slots = threading.BoundedSemaphore(c.verify_concurrency)
        self._async_slots = anyio.CapacityLimiter(c.verify_concurrency)

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
        check_text(name, "the key name")  # a non-UTF-8 argv byte is a lone surrogate (#27)
        for label, v in (("rpm", rpm), ("rpd", rpd)):
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_RATE
            ):
                raise InputError(
                    f"--{label} must be an int >= 1 and <= {MAX_RATE:,}. Got {v!r:.40} instead."
                )
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
            for digest in [d for d, v in self._verified.items() if v[0] == key_id]:
                del self._verified[digest]

    # ---- verification, in steps shared by the sync and async paths ----------------------
    def _present(self, token: str | None, client: str) -> tuple[_Presented, bool]:
        """Parse the token; return it and whether its secret verified recently.

        Raises :class:`AuthThrottled` for a throttled client (unless cached) and
        :class:`AuthError` for a missing or malformed key.
        """
        if not token:
            raise AuthError(
                "missing API key: send 'Authorization: Bearer <key>' (create one with "
                "'ragshield keys create NAME')."
            )
        token = token.strip()
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        cached = self._cached(digest)
        if not cached:
            wait = self.failures.retry_after(client)
            if wait > 0:
                raise AuthThrottled(client, wait, self.failures.limit, self.failures.window)
        m = _TOKEN.match(token)
        if m is None:
            self.failures.fail(client)
            raise AuthError("malformed API key: keys look like rsk_<12 hex>_<secret>.")
        return _Presented(m.group(1), m.group(2), digest), cached

    def _cached(self, digest: bytes) -> bool:
        with self._lock:
            hit = self._verified.get(digest)
            if hit is None:
                return False
            if hit[2] <= time.monotonic():
                del self._verified[digest]
                return False
            return True

    def _cache_matches(self, p: _Presented, row: KeyRow) -> bool:
        """The cached verification still stands: same key id and same stored hash."""
        with self._lock:
            hit = self._verified.get(p.digest)
        return hit is not None and hit[0] == row.id and hmac.compare_digest(hit[1], row.secret_hash)

    def _remember(self, p: _Presented, row: KeyRow) -> None:
        ttl = self.config.verify_cache_seconds
        if ttl <= 0:
            return
        with self._lock:
            self._verified[p.digest] = (row.id, row.secret_hash, time.monotonic() + ttl)
            while len(self._verified) > 10_000:  # bounded: one entry per live secret
                self._verified.popitem(last=False)

    def _argon2(self, stored: str, secret: str) -> bool:
        try:
            return bool(self.hasher.verify(stored, secret))
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def _conclude(self, p: _Presented, row: KeyRow, ok: bool, client: str) -> ApiKey:
        if not ok:
            self.failures.fail(client)
            raise AuthError("invalid API key.")
        self._remember(p, row)
        if row.revoked_at is not None:
            self.failures.fail(client)
            raise AuthError(f"API key {row.id!r} was revoked.")
        return ApiKey(row.id, row.name, row.scopes, row.rpm, row.rpd)

    def _unknown(self, client: str) -> AuthError:
        self.failures.fail(client)
        return AuthError("invalid API key.")

    def authenticate(self, token: str | None, client: str = "local") -> ApiKey:
        """The key behind ``token`` or :class:`AuthError` (one message per failure kind)."""
        p, cached = self._present(token, client)
        row = self.db.get_key(p.key_id)
        if row is None:
            raise self._unknown(client)
        if cached and self._cache_matches(p, row):
            return self._conclude(p, row, True, client)
        with self._verify_slots:
            ok = self._argon2(row.secret_hash, p.secret)
        return self._conclude(p, row, ok, client)

    async def authenticate_async(self, token: str | None, client: str) -> ApiKey:
        """:meth:`authenticate` for the event loop: a request queued for an argon2 slot
        waits in an :class:`anyio.CapacityLimiter`, not in a worker thread."""
        p, cached = self._present(token, client)
        row = await anyio.to_thread.run_sync(self.db.get_key, p.key_id)
        if row is None:
            raise self._unknown(client)
        if cached and self._cache_matches(p, row):
            return self._conclude(p, row, True, client)
        ok = await anyio.to_thread.run_sync(
            self._argon2, row.secret_hash, p.secret, limiter=self._async_slots
        )
        return self._conclude(p, row, ok, client)
