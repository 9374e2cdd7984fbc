"""The service's one configuration file (TOML or YAML), validated by pydantic.

Every value can be overridden by an environment variable ``RAGSHIELD_SERVE_<SECTION>__<FIELD>``
(e.g. ``RAGSHIELD_SERVE_LIMITS__REQUESTS_PER_MINUTE=30``; lists and tables as JSON), so a
container can change a limit without editing the file. Relative paths in the file are
relative to the file's own folder, so a config and its index can move together.

Example (see ``examples/server.toml`` for every field)::

    from ragshield.server.config import load_config
    cfg = load_config("examples/server.toml")
    print(cfg.limits.requests_per_minute, cfg.storage.resolved_url())
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ragshield.config import DefensesConfig as PipelineDefenses
from ragshield.config import PipelineConfig, format_validation_error, read_config_file
from ragshield.config import RetrievalConfig as PipelineRetrieval
from ragshield.defenses import registry
from ragshield.errors import InputError
from ragshield.server.proxies import parse_networks

ENV_PREFIX = "RAGSHIELD_SERVE_"
SCOPES = ("ask", "filter", "admin")

# Extraction signatures: requests to repeat / print / continue the retrieved context, the
# commands RAG-Thief (Jiang et al. 2024 §4) and the RAG worm (Cohen et al. 2024 §3) rely on,
# and the "repeat all the context" family of Zeng et al. 2024a. Case-insensitive regexes.
# What the system holds, as an extraction request names it.
_CONTEXT = (
    r"contexts?|documents?|passages?|chunks?|knowledge[- ]base|retrieved (?:text|data)|"
    r"system prompt|text (?:above|below)|(?:text|everything) you (?:were|are|have been) given"
)
# "verbatim" alone is ordinary English ("a nearly verbatim record of the debates", a SQuAD
# dev question): the signature needs a request — a clause-initial copy verb, optionally
# after "please" / "can you" / "I want you to" — whose object is the system's context, with
# the verbatim qualifier anywhere in that sentence. A wh-word between verb and object
# ("show me which documents quote Luther verbatim") is a question about the documents.
_REQUEST = (
    r"(?:^|[.!?:;,\n])[\s\"'(\[*-]*(?:(?:and|but|please|kindly|just|now|then|instead|also|"
    r"simply|so|first|finally)\s+)*(?:(?:can|could|would|will) you\s+(?:please\s+)?|"
    r"(?:you (?:must|should|need to|have to)|i (?:want|need|would like) you to)\s+)?"
    r"(?:repeat|print|output|copy|reproduce|recite|dump|echo|reveal|write|show|display|give|"
    r"list|return|type|quote|tell|provide|paste|transcribe|read)\b"
    r"(?:(?!\b(?:which|what|who|whom|whose|where|when|why|how|whether|if)\b)[^.?!\n]){0,80}?"
)
_HELD = (
    rf"\b(?:{_CONTEXT}|everything|(?:what(?:ever)?|all) you (?:were|are|have been|have) "
    r"(?:given|told|shown|provided|received|retrieved))\b"
)
_VERBATIM = (
    r"\b(?:word[- ]for[- ]word|verbatim|character[- ]for[- ]character|"
    r"exactly as (?:it is |they are |it was |they were )?(?:written|given|shown|provided)|"
    r"without (?:summari[sz]ing|paraphrasing))\b"
)
DEFAULT_SIGNATURES: dict[str, str] = {
    "repeat-context": (
        r"\b(?:repeat|print|output|copy|reproduce|recite|dump|echo|reveal|write|show|"
        rf"display)\b[^.?!\n]{{0,60}}?\b(?:{_CONTEXT})\b"
    ),
    "verbatim": (
        rf"{_REQUEST}(?:{_HELD}[^.?!\n]{{0,80}}?{_VERBATIM}|{_VERBATIM}[^.?!\n]{{0,80}}?{_HELD})"
    ),
    "ignore-instructions": (
        r"\bignore (?:the|all|any|your|previous|prior|above)\b[^.?!\n]{0,30}?"
        r"\b(?:question|instructions?|prompt)\b"
    ),
    "continue-context": (
        r"\b(?:continue|complete|extend)\b[^.?!\n]{0,40}?\b(?:context|passage|document|chunk)\b"
    ),
    "self-replicating": r"<\s*(?:START|END)\s*>|\bself[- ]replicat",
}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RetrievalConfig(PipelineRetrieval):
    """How much is retrieved and how much reaches the generator (and what a request may ask)."""

    model_config = ConfigDict(frozen=False)

    max_k: int = Field(default=20, ge=1)
    context_k: int | None = 5  # RAGDefender §6.1: top-5 survivors reach the LLM


class DefensesConfig(PipelineDefenses):
    """The defense chain, by registry name (``ragshield.defenses.registry``)."""

    model_config = ConfigDict(frozen=False)

    # names a request may pick with "defenses": [...]; empty = the chain's own names
    allowed: list[str] = Field(default_factory=list)
    # may a request ask for no defense at all ("defenses": [])?
    allow_none: bool = False

    @field_validator("allowed")
    @classmethod
    def _known_allowed(cls, value: list[str]) -> list[str]:
        for name in value:
            registry.entry(name)
        return value

    def allowed_names(self) -> list[str]:
        return list(dict.fromkeys([*self.chain, *self.allowed]))


MAX_RATE = 10**9  # a budget above this is unlimited in practice; larger overflows the DB


class LimitsConfig(_Section):
    """Per-key budgets (0 or ``None`` = unlimited) and input limits."""

    requests_per_minute: int | None = Field(default=60, ge=0, le=MAX_RATE)
    requests_per_day: int | None = Field(default=10_000, ge=0, le=MAX_RATE)
    max_body_bytes: int = Field(default=65_536, ge=256)
    max_question_chars: int = Field(default=2_000, ge=1)
    max_filter_passages: int = Field(default=100, ge=1)
    max_passage_chars: int = Field(default=20_000, ge=1)
    # pipeline runs at once (encode / search / filter / generate are CPU-bound)
    concurrency: int = Field(default=2, ge=1)


class ThrottleConfig(_Section):
    """Extraction-aware throttling (see :mod:`ragshield.server.throttle`)."""

    enabled: bool = True
    signatures: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SIGNATURES))
    # what a signature match does: refuse the request and block the key, slow it, only log
    signature_action: Literal["refuse", "slow", "log"] = "refuse"
    # distinct chunks one key may receive inside the window, as a share of the index
    # (0.1: a user asking 30 diverse questions receives ~145 of 1,888 SQuAD chunks, 7.7%;
    # 0.05 blocked every such user at query ~20 — benchmarks/bench_throttle.py, dev) ...
    coverage_limit: float = Field(default=0.1, gt=0.0, le=1.0)
    # ... but never fewer than this many (small indexes): one normal day, 30 diverse
    # questions at top-5 (~145 chunks on the bench above). 50 refused both normal
    # ChatDoctor sessions (500 chunks) at their 12th-13th question (results-extraction.md)
    coverage_min_chunks: int = Field(default=150, ge=1)
    coverage_window_seconds: float = Field(default=86_400.0, gt=0.0)
    # mean share of never-seen-before chunks over the key's last `novelty_window` answers;
    # window 0 = off (the default: it slowed every diverse user at query ~21, bench dev)
    novelty_limit: float = Field(default=0.9, gt=0.0, le=1.0)
    novelty_window: int = Field(default=0, ge=0)
    # distinct chunks in the largest connected region of the key's last `region_window`
    # answers (answers sharing a chunk join); limit 0 = off. 100: the choice on the dev
    # halves of both throttle benches pooled (SQuAD, extractive answers: 30 normal + 18
    # 200-query sweeps; ChatDoctor, LLM-answered with the leak signal: 40 normal + 5
    # attacks; fewest misses with FP <= 5 %; 80 slowed 4 of 40 topical ChatDoctor users):
    # test FP 3 of 70 / misses 3 of 23 (docs/results-extraction.md, Session 7)
    region_limit: int = Field(default=100, ge=0)
    region_window: int = Field(default=200, ge=1)
    slow_seconds: float = Field(default=2.0, ge=0.0)
    cooldown_seconds: float = Field(default=900.0, gt=0.0)
    # what an answer caught copying its chunks (the ``canary`` defense's output check: a
    # canary or verbatim runs from several chunks) does to the key: block it for
    # `cooldown_seconds` (no ordinary answer carries a canary: 0 of the bench's benign
    # sessions) or only log it
    leak_action: Literal["refuse", "log"] = "refuse"

    @field_validator("signatures")
    @classmethod
    def _compile(cls, value: dict[str, str]) -> dict[str, str]:
        import re

        for name, pattern in value.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"signature {name!r} is not a valid regex: {exc}") from None
        return value


class AuthConfig(_Section):
    """argon2id cost of *new* key hashes (a stored hash carries its own parameters), the
    failed-authentication limit, and who the client is.

    The failure limit counts per client address. Behind a reverse proxy, list it in
    ``trusted_proxies`` (e.g. ``["127.0.0.1", "::1"]`` for nginx on the same host,
    ``["10.0.0.0/8"]`` for a load balancer's subnet): a request from one of them is then
    counted against the right-most ``X-Forwarded-For`` address that is not itself a trusted
    proxy. Without it, every user behind the proxy shares the proxy's one bucket; the
    header of a peer not listed is never read, so a client cannot choose its own address.
    """

    # argon2-cffi defaults = RFC 9106 §4 second recommended option (t=3, 64 MiB, p=4)
    # upper bounds: beyond them one verification takes minutes or more RAM than a host has
    # (a 30-digit memory cost was accepted and failed inside argon2; issue #27)
    argon2_time_cost: int = Field(default=3, ge=1, le=64)
    argon2_memory_kib: int = Field(default=65_536, ge=8, le=4 * 1024 * 1024)  # <= 4 GiB
    argon2_parallelism: int = Field(default=4, ge=1, le=64)
    # concurrent argon2 verifications (each holds `argon2_memory_kib` of RAM)
    verify_concurrency: int = Field(default=2, ge=1)
    # protect /metrics with an admin-scoped key
    metrics_require_key: bool = False
    # serve /docs and /openapi.json (they need no key; the shipped config turns them off)
    docs_enabled: bool = False
    # a verified secret is trusted (by its SHA-256) this long without argon2; 0 = never
    verify_cache_seconds: float = Field(default=300.0, ge=0.0)
    # failed authentications one client (IP) may make per window before it gets 429
    failure_limit: int = Field(default=20, ge=1)
    failure_window_seconds: float = Field(default=60.0, gt=0.0)
    # a 401 / auth 429 is answered after this delay (a sleeping coroutine, no thread): it
    # caps how fast one connection can guess or flood
    failure_delay_seconds: float = Field(default=0.5, ge=0.0)
    # reverse proxies (IPs / CIDRs) whose X-Forwarded-For names the client for the failure
    # limit and the access log; empty = the socket peer is the client, the header is
    # ignored (anyone could write it). See :mod:`ragshield.server.proxies`.
    trusted_proxies: list[str] = Field(default_factory=list)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        parse_networks(value)
        return value

    @field_validator("argon2_parallelism")
    @classmethod
    def _memory_per_lane(cls, value: int, info: ValidationInfo) -> int:
        memory = info.data.get("argon2_memory_kib")
        if memory is not None and memory < 8 * value:  # argon2 refuses it at the first hash
            raise ValueError(f"needs argon2_memory_kib >= 8 x {value} (got {memory})")
        return value


class StorageConfig(_Section):
    """Keys, budgets, served-chunk ledger and audit log: SQLite file or any SQLAlchemy URL.

    Several replicas share one PostgreSQL through ``url``. The URI ``ragshield db start``
    prints (``postgresql://postgres:@/postgres?host=DATA_DIR``) works as it is: a
    ``postgresql://`` or ``postgres://`` URI is given the psycopg 3 driver of the [pg]
    extra (:func:`ragshield.server.db.sqlalchemy_url`), the same as writing
    ``postgresql+psycopg://...``.
    """

    url: str | None = None  # e.g. postgresql+psycopg://user@host/db ; None = sqlite_path
    sqlite_path: Path = Path("ragshield-server.db")

    def resolved_url(self) -> str:
        if self.url:
            return self.url
        return f"sqlite:///{self.sqlite_path}"


class AuditConfig(_Section):
    # key for HMAC-SHA256 of questions (set it via RAGSHIELD_SERVE_AUDIT__HASH_KEY); empty
    # = plain SHA-256. With a key, short questions cannot be recovered by guessing.
    hash_key: str = ""
    # audit rows older than this are deleted at start-up and then hourly; 0 = keep forever
    retention_days: float = Field(default=90.0, ge=0.0)


class ServerConfig(BaseSettings, PipelineConfig):
    """The whole service: the pipeline (index, encoder, defenses, generator — the keys of
    :class:`~ragshield.config.PipelineConfig`) plus limits, throttle, auth, storage, audit."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=False
    )

    index: Path
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    defenses: DefensesConfig = Field(default_factory=DefensesConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    throttle: ThrottleConfig = Field(default_factory=ThrottleConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # environment first: it overrides the file (the file arrives as init kwargs)
        return (env_settings, init_settings)

    def resolve_paths(self, base: Path) -> ServerConfig:
        """Make relative paths relative to ``base`` (the config file's folder)."""
        if not self.index.is_absolute():
            self.index = base / self.index
        if not self.storage.sqlite_path.is_absolute():
            self.storage.sqlite_path = base / self.storage.sqlite_path
        return self


def load_config(path: str | os.PathLike[str] | None = None, **overrides: Any) -> ServerConfig:
    """Read, merge environment overrides, validate; ``overrides`` win over the file."""
    data: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        p = Path(path).expanduser()
        data = read_config_file(p, "server config")
        base = p.resolve().parent
    data.update(overrides)
    try:
        cfg = ServerConfig(**data)
    except ValidationError as exc:
        raise InputError(format_validation_error(exc, str(path or "server config"))) from None
    return cfg.resolve_paths(base)
