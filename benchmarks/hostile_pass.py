"""Replayable hostile pass over the CLI, input files, the service and the library.

Every case is built here from a fixed table (no randomness: the same cases on every run)
and run in-process. A case is *clean* when it ends in an ordinary outcome: the CLI exits 0,
1 or 2 with at most one ``error:`` line and no traceback; the service answers below 500;
the library returns or raises a :class:`ragshield.errors.RagshieldError`. It is *bad* when
an exception escapes, the service answers 5xx, a watched user folder changes, or a case
runs past its deadline (``--deadline``, SIGALRM). Bad cases are listed by name so each
one can be replayed alone (``--only NAME``).

    OMP_NUM_THREADS=1 RAGSHIELD_NO_PROGRESS=1 python benchmarks/hostile_pass.py

Prints one table (cases tried / clean / bad per section) and the bad cases. Loopback only;
nothing outside a temporary folder is written.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Case_ = Callable[[], str | None]  # run -> None (clean) or a reason (bad)
Case = tuple[str, Case_]

DEEP = "[" * 50_000
HUGE = "1" * 100_000
SURR = "caf\ud800e"


class Hang(Exception):
    pass


@dataclass
class Section:
    name: str
    tried: int = 0
    clean: int = 0
    bad: list[tuple[str, str]] = field(default_factory=list)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    def fire(*_: object) -> None:
        raise Hang(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def snapshot(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
        out[rel] += f":{p.stat().st_uid}:{oct(p.stat().st_mode)}"
    return out


# ---- CLI ---------------------------------------------------------------------------------


def cli_case(argv: list[Any], watch: Path) -> Callable[[], str | None]:
    def run_it() -> str | None:
        from ragshield.cli import run

        before = snapshot(watch)
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = run([str(a) for a in argv])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
        text = out.getvalue() + err.getvalue()
        if snapshot(watch) != before:
            return "a user's folder changed"
        if "Traceback" in text:
            return "traceback in the output"
        if rc not in (0, 1, 2):
            return f"exit code {rc}"
        errors = [ln for ln in err.getvalue().splitlines() if ln.startswith("error:")]
        if rc == 2 and len(errors) > 1:
            return "more than one error line"
        return None

    return run_it


def with_env(env: dict[str, str], run_it: Callable[[], str | None]) -> Callable[[], str | None]:
    """``run_it`` with environment variables set for its duration (restored after)."""

    def wrapped() -> str | None:
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return run_it()
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    return wrapped


def cli_cases(work: Path) -> list[Case]:
    user = work / "user"  # a user's folder: must never change
    user.mkdir()
    (user / "results.md").write_text("my notes")
    (user / "results.json").write_text("{}")
    (user / "report.html").write_text("<p>mine</p>")
    (user / "meta.json").write_text('{"mine": true}')
    file_ = user / "FILE"
    file_.write_text("x")
    idx = work / "idx"
    _store().save(idx)
    q = work / "q.jsonl"
    q.write_text('{"question": "Who designed the Eiffel Tower?"}\n')
    data = work / "d.json"
    data.write_text(json.dumps({"passages": [], "questions": []}))
    corpus = work / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "Paris is the capital of France."}\n')

    bad_paths = ["/proc/rs-x", str(file_), f"{file_}/sub", str(user), "/", "", "\x00", SURR,
                 "x" * 5000, str(user / "new" / ("y" * 300))]  # fmt: skip
    bad_ints = ["0", "-1", "abc", "1e999", str(10**30), "nan", "", " 5", "true"]
    cases: list[Case] = []

    def add(name: str, argv: list[Any]) -> None:
        cases.append((name, cli_case(argv, user)))

    for i, p in enumerate(bad_paths):
        add(f"index --out bad path {i}", ["index", corpus, "--out", p])
        add(f"index corpus bad path {i}", ["index", p, "--out", work / f"o{i}"])
        add(f"scan --out bad path {i}", ["scan", idx, "--questions", q, "--writer", "template",
                                          "--out", p])  # fmt: skip
        add(f"scan index bad path {i}", ["scan", p, "--questions", q, "--writer", "template"])
        add(f"scan --questions bad path {i}", ["scan", idx, "--questions", p, "--out", work / "s"])
        add(f"eval retrieval --out bad path {i}", ["eval", "retrieval", data, "--out", p])
        add(f"eval retrieval --cache-dir bad path {i}",
            ["eval", "retrieval", data, "--cache-dir", p, "--out", work / "e"])  # fmt: skip
        add(f"eval retrieval data bad path {i}", ["eval", "retrieval", p])
        add(f"ask index bad path {i}", ["ask", p, "Who?"])
        add(f"ask --config bad path {i}", ["ask", "--config", p, "Who?"])
        add(f"db start --data bad path {i}", ["db", "start", "--data", p])
        add(f"keys create --db bad path {i}", ["keys", "create", "bob", "--db", p])
        add(f"models list --cache-dir bad path {i}", ["models", "list", "--cache-dir", p])
    for i, v in enumerate(bad_ints):
        add(f"scan --k {v!r}", ["scan", idx, "--questions", q, "--writer", "template",
                               "--out", work / f"sk{i}", "--k", v])  # fmt: skip
        add(f"scan --context-k {v!r}", ["scan", idx, "--questions", q, "--writer", "template",
                                       "--out", work / f"sc{i}", "--context-k", v])  # fmt: skip
        add(f"scan --generate {v!r}", ["scan", idx, "--generate", v, "--writer", "template",
                                      "--out", work / f"sg{i}"])  # fmt: skip
        add(f"ask --k {v!r}", ["ask", idx, "Who?", "--k", v])
        add(f"keys create --rpm {v!r}", ["keys", "create", "bob", "--rpm", v,
                                        "--db", work / f"k{i}.db"])  # fmt: skip
        add(f"eval retrieval --k {v!r}", ["eval", "retrieval", data, "--k", v])
        add(f"serve --port {v!r}", ["serve", "--config", work / "none.toml", "--port", v])
    for i, s in enumerate([SURR, "", " ", "\u200b", "x" * 100_000, "\x00", "[red]x[/red]"]):
        add(f"ask question {i}", ["ask", idx, s, "--encoder", work / "no-encoder"])
        add(f"keys create name {i}", ["keys", "create", s, "--db", work / f"n{i}.db"])
        add(f"scan --fail-on {i}", ["scan", idx, "--questions", q, "--writer", "template",
                                   "--out", work / f"sf{i}", "--fail-on", s or "x"])  # fmt: skip
        add(f"scan --attacks {i}", ["scan", idx, "--questions", q, "--attacks", s,
                                   "--out", work / f"sa{i}"])  # fmt: skip
        add(f"scan --defenses {i}", ["scan", idx, "--questions", q, "--defenses", s,
                                    "--out", work / f"sd{i}"])  # fmt: skip
        add(f"ask --filter {i}", ["ask", idx, "Who?", "--filter", s])
        add(f"ask --encoder {i}", ["ask", idx, "Who?", "--encoder", s])
    # newer surfaces: add / quarantine, filter, --trusted-ids, report formats, canaries
    pfile = work / "passages.json"
    pfile.write_text(json.dumps(["Paris is the capital.", {"text": "Lyon is a city."}]))
    trusted = work / "trusted.txt"
    trusted.write_text("a\n")
    for i, p in enumerate(bad_paths):
        add(f"add index bad path {i}", ["add", p, corpus, "--screen", "none"])
        add(f"add new bad path {i}", ["add", idx, p, "--screen", "none"])
        add(f"add --report bad path {i}", ["add", idx, corpus, "--screen", "none", "--report", p])
        add(f"quarantine list bad path {i}", ["quarantine", "list", p])
        add(f"quarantine release bad path {i}", ["quarantine", "release", p, "a"])
        add(f"quarantine delete bad path {i}", ["quarantine", "delete", p, "a"])
        add(f"filter passages bad path {i}", ["filter", "Who?", p])
        add(f"index --trusted-ids bad path {i}",
            ["index", corpus, "--out", work / f"t{i}", "--trusted-ids", p])  # fmt: skip
        add(f"reindex bad path {i}", ["reindex", p])
    hostile_strings = [SURR, "", " ", "\u200b", "x" * 100_000, "\x00", "[red]x[/red]", ",,",
                       "json,nosuch", "sarif;junit", "../../etc/passwd"]  # fmt: skip
    for i, v in enumerate(hostile_strings):
        add(f"add --format {i}", ["add", idx, corpus, "--screen", "none", "--format", v,
                                  "--report", work / f"ar{i}"])  # fmt: skip
        add(f"add --screen {i}", ["add", idx, corpus, "--screen", v])
        add(f"add --source {i}", ["add", idx, corpus, "--screen", "none", "--source", v])
        add(f"add --uri {i}", ["add", idx, corpus, "--screen", "none", "--uri", v])
        add(f"scan --format {i}", ["scan", idx, "--questions", q, "--writer", "template",
                                   "--out", work / f"sx{i}", "--format", v])  # fmt: skip
        add(f"quarantine release id {i}", ["quarantine", "release", idx, v])
        add(f"quarantine delete id {i}", ["quarantine", "delete", idx, v])
        add(f"filter query {i}", ["filter", v, pfile, "--filter", "similarity-threshold"])
        add(f"filter --filter {i}", ["filter", "Who?", pfile, "--filter", v])
        add(f"index --text-field {i}", ["index", corpus, "--out", work / f"tf{i}",
                                        "--text-field", v])  # fmt: skip
        add(f"scan --generator {i}", ["scan", idx, "--questions", q, "--writer", "template",
                                      "--out", work / f"sgen{i}", "--generator", v])  # fmt: skip
    for i, v in enumerate(bad_ints):
        add(f"add --k {v!r}", ["add", idx, corpus, "--screen", "none", "--k", v])
        add(f"index --max-chars {v!r}", ["index", corpus, "--out", work / f"mc{i}",
                                         "--max-chars", v])  # fmt: skip
        add(f"scan --seed {v!r}", ["scan", idx, "--questions", q, "--writer", "template",
                                   "--out", work / f"ss{i}", "--seed", v])  # fmt: skip
        add(f"scan --extraction-queries {v!r}",
            ["scan", idx, "--questions", q, "--writer", "template", "--attacks", "extraction",
             "--out", work / f"se{i}", "--extraction-queries", v])  # fmt: skip
    # environment: the llama.cpp backend switch and the canary key
    env_values = ["nosuch", "LLAMA.CPP", " llama-cpp ", "transformers;rm -rf /", "x" * 10_000,
                  "", "llama.cpp\n", "\u00e9"]  # fmt: skip
    for i, v in enumerate(env_values):
        cases.append(
            (
                f"RAGSHIELD_LLM_BACKEND={i} ask",
                with_env(
                    {"RAGSHIELD_LLM_BACKEND": v},
                    cli_case(["ask", idx, "Who?", "--generator", work / "no-model"], user),
                ),
            )
        )
        cases.append(
            (
                f"RAGSHIELD_LLM_BACKEND={i} models list",
                with_env({"RAGSHIELD_LLM_BACKEND": v}, cli_case(["models", "list"], user)),
            )
        )
        cases.append(
            (
                f"RAGSHIELD_LLM_BACKEND={i} scan",
                with_env(
                    {"RAGSHIELD_LLM_BACKEND": v},
                    cli_case(
                        [
                            "scan",
                            idx,
                            "--questions",
                            q,
                            "--writer",
                            "template",
                            "--generator",
                            "qwen2.5-0.5b",
                            "--out",
                            work / f"sl{i}",
                            "--attacks",
                            "nosuch",
                        ],
                        user,
                    ),
                ),
            )
        )
        cases.append(
            (
                f"RAGSHIELD_CANARY_SECRET={i} index",
                with_env(
                    {"RAGSHIELD_CANARY_SECRET": v},
                    cli_case(
                        ["index", corpus, "--out", work / f"cs{i}", "--encoder", work / "no"], user
                    ),
                ),
            )
        )
    for cmd in (["--help"], ["ask", "--help"], ["scan", "--help"], ["eval", "--help"],
                ["keys", "--help"], ["db", "--help"], ["models", "--help"], ["nosuch"],
                ["ask"], ["scan"], ["index"], ["keys", "create"], ["add"], ["add", "--help"],
                ["quarantine"], ["quarantine", "list"], ["quarantine", "release", str(idx)],
                ["filter"], ["filter", "--help"], ["reindex"], ["serve", "--help"],
                ["keys", "revoke"], ["db"], ["models", "fetch"], ["eval"]):  # fmt: skip
        add(f"{' '.join(cmd)}", cmd)
    return cases


def _store() -> Any:
    import numpy as np

    from ragshield.store.faiss_store import FaissStore
    from ragshield.types import Passage

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(6, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = FaissStore(384)
    store.add([Passage(f"p{i}", f"passage number {i}.") for i in range(6)], vecs)
    return store


# ---- input files -------------------------------------------------------------------------

MUTATIONS: dict[str, Callable[[str], bytes]] = {
    "latin-1": lambda good: good.replace("e", "é").encode("latin-1", "replace"),
    "utf-16": lambda good: good.encode("utf-16"),
    "binary": lambda good: bytes(range(256)) * 4,
    "empty": lambda good: b"",
    "bom": lambda good: b"\xef\xbb\xbf" + good.encode(),
    "deep": lambda good: DEEP.encode(),
    "huge int": lambda good: ('{"x": ' + HUGE + "}").encode(),
    "surrogate escapes": lambda good: good.replace("a", "\\ud800").encode(),
    "nul": lambda good: good.replace(" ", "\x00").encode(),
    "truncated": lambda good: good.encode()[: len(good) // 2],
    "list": lambda good: b"[1, 2, 3]",
    "string": lambda good: b'"text"',
    "null": lambda good: b"null",
    "crlf": lambda good: good.replace("\n", "\r\n").encode(),
    "wrong types": lambda good: good.replace('"', "").encode(),
    "10 MB line": lambda good: (good.rstrip("\n") + " " * 10_000_000 + "\n").encode(),
}


def file_cases(work: Path) -> list[Case]:
    user = work / "fuser"
    user.mkdir()
    (user / "keep.txt").write_text("mine")
    idx = work / "fidx"
    _store().save(idx)
    goods = {
        "corpus.jsonl": ('{"id": "a", "text": "Paris is the capital of France."}\n',
                         lambda f: ["index", f, "--out", work / "fo"]),
        "corpus.json": ('[{"id": "a", "text": "Paris is the capital."}]',
                        lambda f: ["index", f, "--out", work / "fo2"]),
        "questions.jsonl": ('{"question": "Who designed it?", "answer": "Eiffel"}\n',
                            lambda f: ["scan", idx, "--questions", f, "--writer", "template",
                                       "--out", work / "fs"]),
        "ontopic.json": (json.dumps({"passages": [{"id": "p", "text": "a b"}], "questions": [
            {"id": "q", "question": "a?", "answers": ["b"], "gold_passage_ids": ["p"]}]}),
            lambda f: ["eval", "retrieval", f, "--out", work / "fe"]),
        "pipeline.toml": ('index = "idx"\n[retrieval]\nk = 5\n',
                          lambda f: ["ask", "--config", f, "Who?"]),
        "pipeline.yaml": ("index: idx\nretrieval:\n  k: 5\n",
                          lambda f: ["ask", "--config", f, "Who?"]),
        "server.toml": ('index = "idx"\n[storage]\nsqlite_path = "k.db"\n',
                        lambda f: ["keys", "create", "bob", "--config", f]),
        "meta.json": (json.dumps({"format_version": 1, "store": "faiss", "dim": 384}),
                      lambda f: ["ask", f.parent, "Who?"]),
        "ragfort.json": (json.dumps({"query_encoder": "encoder"}),
                         lambda f: ["ask", f.parent, "Who?"]),
        "trusted.txt": ("a\nb\n", lambda f: ["index", work / "c.jsonl", "--out", work / "ft",
                                             "--trusted-ids", f]),
    }  # fmt: skip
    (work / "c.jsonl").write_text('{"id": "a", "text": "Paris is the capital of France."}\n')
    cases: list[Case] = []
    for fname, (good, argv_of) in goods.items():
        for mname, mutate in MUTATIONS.items():

            def run_it(fname: str = fname, good: str = good, argv_of: Any = argv_of,
                       mutate: Callable[[str], bytes] = mutate) -> str | None:  # fmt: skip
                folder = Path(tempfile.mkdtemp(dir=work))
                if fname in ("meta.json", "ragfort.json"):
                    _store().save(folder / "i")
                    folder = folder / "i"
                target = folder / fname
                target.write_bytes(mutate(good))
                return cli_case(argv_of(target), user)()

            cases.append((f"{fname} {mname}", run_it))
    return cases


# ---- service -----------------------------------------------------------------------------

_P = {"id": "p1", "text": "The Eiffel Tower was designed by Gustave Eiffel."}
BODIES: dict[str, bytes] = {
    "not json": b"{not json", "deep": DEEP.encode(), "huge int": HUGE.encode(),
    "bare string": b'"x"', "latin-1": '{"question": "é?"}'.encode("latin-1"),
    "utf-16": '{"question": "x?"}'.encode("utf-16"), "empty": b"",
    "escaped surrogate": b'{"question": "\\udc80"}',
    "extra field": json.dumps({"question": "q", "x": 1}).encode(),
    "oversized": json.dumps({"question": "q" * 200_000}).encode(),
    "many passages": json.dumps({"query": "q", "passages": [_P] * 5000}).encode(),
    "many documents": json.dumps({"documents": [{"id": f"d{i}", "text": "t"}
                                                for i in range(5000)]}).encode(),
    "many messages": json.dumps({"messages": [{"role": "user", "content": "hi"}] * 5000}).encode(),
    "array": b"[]", "null": b"null", "number": b"12",
}  # fmt: skip


def pg_storage(work: Path) -> dict[str, str]:
    """A local PostgreSQL (pgserver, stopped at exit) and a fresh schema on it."""
    import atexit

    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    from ragshield.server.db import sqlalchemy_url
    from ragshield.store import pgserver_local

    data = work / "pgdata"
    uri = pgserver_local.start(data, persistent=False)
    atexit.register(pgserver_local.stop, data)
    admin = create_engine(sqlalchemy_url(uri))
    with admin.begin() as conn:
        conn.exec_driver_sql("CREATE SCHEMA hostile")
    admin.dispose()
    url = make_url(sqlalchemy_url(uri)).update_query_dict({"options": "-csearch_path=hostile"})
    return {"url": url.render_as_string(hide_password=False)}


def service_cases(work: Path, storage: dict[str, str] | None = None) -> list[Case]:
    import httpx

    from ragshield.corpus import read_corpus
    from ragshield.demo import demo_files
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.indexing import build_index
    from ragshield.server import Service, create_app, load_config

    enc = SentenceTransformerEncoder()
    build_index(read_corpus(demo_files()[0]), work / "sidx", encoder=enc)
    cfg = load_config(
        None, index=str(work / "sidx"), storage=storage or {"sqlite_path": str(work / "s.db")},
        auth={"argon2_time_cost": 1, "argon2_memory_kib": 8, "argon2_parallelism": 1,
              "failure_limit": 10_000},
        defenses={"chain": ["similarity-threshold"]}, limits={"requests_per_minute": 0},
    )  # fmt: skip
    service = Service.from_config(cfg, encoder=enc)
    _, token = service.keys.create("alice", scopes="ask,filter,admin")
    _, ask_only = service.keys.create("bob", scopes="ask")
    app = create_app(service)
    auth = {"Authorization": f"Bearer {token}"}
    passage = {"id": "p1", "text": "The Eiffel Tower was designed by Gustave Eiffel."}

    def raw(body: Any) -> bytes:
        return body if isinstance(body, bytes) else json.dumps(body).encode()

    values: list[Any] = [None, 0, -1, 10**30, 1.5, float("nan"), True, "", " ", SURR, "\u200b",
                         "x" * 100_000, [], {}, [1], {"a": 1}, [SURR], ["ragdefender"] * 100,
                         "\x00", "<script>"]  # fmt: skip

    def body_variants() -> Iterator[tuple[str, str, bytes, dict[str, str]]]:
        for i, v in enumerate(values):
            for field_ in ("question", "k", "defenses"):
                yield f"ask {field_}={i}", "/v1/ask", raw({"question": "Who?", field_: v}), auth
            for field_ in ("id", "text", "title", "score"):
                body = {"query": "Who?", "passages": [{**passage, field_: v}]}
                yield f"filter passage.{field_}={i}", "/v1/filter", raw(body), auth
            yield f"filter query={i}", "/v1/filter", raw({"query": v, "passages": [passage]}), auth
            yield f"filter passages={i}", "/v1/filter", raw({"query": "q", "passages": v}), auth
        for name, body in BODIES.items():
            yield f"ask body {name}", "/v1/ask", body, auth
            yield f"filter body {name}", "/v1/filter", body, auth
        for name, hdr in {
            "no key": {}, "empty bearer": {"Authorization": "Bearer "},
            "malformed": {"Authorization": "Bearer abc"},
            "unknown id": {"Authorization": "Bearer rsk_000000000000_" + "a" * 43},
            "wrong secret": {"Authorization": token[:-3] + "AAA"},
            "scope": {"Authorization": f"Bearer {ask_only}"},
            "x-api-key surrogate": {"X-API-Key": "rsk_\udcff"},
            "huge key": {"Authorization": "Bearer " + "a" * 60_000},
            "basic": {"Authorization": "Basic Zm9vOmJhcg=="},
        }.items():  # fmt: skip
            yield (
                f"filter auth {name}",
                "/v1/filter",
                raw({"query": "q", "passages": [passage]}),
                hdr,
            )
            yield f"ask auth {name}", "/v1/ask", raw({"question": "Who?"}), hdr
            yield f"chat auth {name}", "/v1/chat/completions", raw(chat()), hdr
            yield f"admin add auth {name}", "/v1/admin/index/add", raw(add()), hdr
        # the OpenAI-compatible chat endpoint: every field, and a content part's fields
        for i, v in enumerate(values):
            for where in ("model", "messages", "stream", "temperature", "role", "content",
                          "part.type", "part.text", "second.content"):  # fmt: skip
                yield f"chat {where}={i}", "/v1/chat/completions", raw(chat(where, v)), auth
        # screened ingestion and the quarantine on the live index (admin key)
        for i, v in enumerate(values):
            for where in ("documents", "doc.id", "doc.text", "doc.title", "source", "screen"):
                yield f"admin add {where}={i}", "/v1/admin/index/add", raw(add(where, v)), auth
            for path in ("/v1/admin/quarantine/release", "/v1/admin/quarantine/delete"):
                yield f"{path} ids={i}", path, raw({"ids": v}), auth
                yield f"{path} ids=[{i}]", path, raw({"ids": [v]}), auth
        for name, body in BODIES.items():
            yield f"chat body {name}", "/v1/chat/completions", body, auth
            yield f"admin add body {name}", "/v1/admin/index/add", body, auth

    def chat(where: str = "", v: Any = None) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "user", "content": "Who designed the Eiffel Tower?"}
        body: dict[str, Any] = {"model": "ragshield", "messages": [msg]}
        if where in ("model", "messages", "stream", "temperature"):
            body[where] = v
        elif where in ("role", "content"):
            msg[where] = v
        elif where.startswith("part."):
            part: dict[str, Any] = {"type": "text", "text": "Who designed it?"}
            part[where[5:]] = v
            msg["content"] = [part]
        elif where == "second.content":
            body["messages"] = [{"role": "system", "content": v}, msg]
        return body

    def add(where: str = "", v: Any = None) -> dict[str, Any]:
        doc: dict[str, Any] = {"id": "h1", "text": "Canberra is the capital of Australia."}
        body: dict[str, Any] = {"documents": [doc], "screen": "similarity-threshold"}
        if where.startswith("doc."):
            doc[where[4:]] = v
        elif where:
            body[where] = v
        return body

    async def send(path: str, body: bytes, headers: dict[str, str]) -> int:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            hdr: dict[str, str | bytes] = {"Content-Type": "application/json"}
            # raw header bytes, as a hostile client sends them (0xff is not ASCII)
            hdr.update({k: v.encode("utf-8", "surrogateescape") for k, v in headers.items()})
            r = await client.post(path, content=body, headers=hdr)
            return r.status_code

    cases: list[Case] = []
    for name, path, body, hdr in body_variants():

        def run_it(path: str = path, body: bytes = body, hdr: dict[str, str] = hdr) -> str | None:
            code = asyncio.run(send(path, body, hdr))
            return f"HTTP {code}" if code >= 500 else None

        cases.append((name, run_it))
    for path in ("/v1/health", "/metrics", "/v1/admin/keys", "/docs", "/nosuch", "/v1/ask"):

        def get(path: str = path) -> str | None:
            async def go() -> int:
                transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
                async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                    return (await c.get(path, headers=auth)).status_code

            code = asyncio.run(go())
            return f"HTTP {code}" if code >= 500 else None

        cases.append((f"GET {path}", get))
    return cases


# ---- library ------------------------------------------------------------------------------


def library_cases(work: Path) -> list[Case]:
    from ragshield.config import PipelineConfig
    from ragshield.defenses import registry
    from ragshield.errors import RagshieldError

    def expect(fn: Callable[[], Any]) -> Callable[[], str | None]:
        def run_it() -> str | None:
            try:
                fn()
            except RagshieldError:
                return None
            except Exception as exc:
                return f"{type(exc).__name__}: {str(exc)[:100]}"
            return None

        return run_it

    odd: list[Any] = [123, 1.5, None, b"x", {"a": 1}, [1], ["nosuch"], "", ",", ";", SURR,
                      "x" * 10_000]  # fmt: skip
    cases: list[Case] = []
    for i, v in enumerate(odd):
        cases.append((f"build_chain({i})", expect(lambda v=v: registry.build_chain(v))))
        for flag in ("defenses", "generator_options", "k", "context_k", "index", "encoder"):
            cases.append((f"with_overrides({flag}={i})",
                          expect(lambda v=v, f=flag: PipelineConfig().with_overrides(**{f: v}))))  # fmt: skip
    cases += filter_input_cases(expect)
    for name in registry.available("filter"):
        for i, params in enumerate([{"encoder": "x"}, 5, {"nosuch": 1}, {"k": SURR}]):
            cases.append((f"{name} params {i}",
                          expect(lambda n=name, p=params: registry.build_chain(n, None, {n: p}))))  # fmt: skip
    return cases


def filter_input_cases(expect: Callable[[Callable[[], Any]], Case_]) -> list[Case]:
    """RAGDefender.filter, FilterChain.run and RAGPipeline with hostile queries and
    retrieval sets: oversized (issue #27: 10,000 passages ran 154 s), wrong types,
    corrupt vectors. Each must return or raise a RagshieldError within the deadline."""
    import numpy as np

    from ragshield.defenses.compose import FilterChain
    from ragshield.defenses.ragdefender import RAGDefender
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.pipeline import RAGPipeline
    from ragshield.types import Passage, RetrievedPassage

    enc = SentenceTransformerEncoder()
    store = _store()
    v = np.zeros(384, dtype=np.float32)
    v[0] = 1.0

    def rp(text: Any = "Paris is the capital of France.", emb: Any = v, i: int = 0) -> Any:
        return RetrievedPassage(Passage(f"p{i}", text), 0.5, i, emb)

    sets: dict[str, Any] = {
        "10,000 passages": [rp(i=i) for i in range(10_000)],
        "1,001 passages": [rp(i=i) for i in range(1_001)],
        "a 10 MB passage": [rp("word " * 2_000_000), rp(i=1)],
        "6 MB in all": [rp("w" * 900_000, i=i) for i in range(7)],
        "a bare string": "Paris",
        "None": None,
        "dicts": [{"text": "x"}],
        "nested lists": [[rp()]],
        "NaN vector": [rp(emb=np.full(384, np.nan, dtype=np.float32)), rp(i=1)],
        "wrong dimension": [rp(emb=np.ones(3, dtype=np.float32)), rp(i=1)],
        "mixed dimensions": [rp(emb=np.ones(384)), rp(emb=np.ones(385), i=1)],
        "string vector": [rp(emb=np.array(["a"] * 384)), rp(i=1)],
        "2-d vector": [rp(emb=np.ones((2, 384))), rp(i=1)],
        "1e39 vector": [rp(emb=np.full(384, 1e39)), rp(i=1)],
        "empty": [],
        "one": [rp()],
        "no vectors": [rp(emb=None), rp(emb=None, i=1)],
        "duplicates": [rp()] * 50,
        "surrogate text": [rp(SURR), rp(i=1)],
        "empty text": [rp(""), rp(i=1)],
        "generator": (rp(i=i) for i in range(3)),
    }
    queries: dict[str, Any] = {"ok": "What is the capital of France?", "empty": "",
                               "10 MB": "why " * 2_500_000, "surrogate": SURR, "None": None,
                               "bytes": b"q", "zero-width": "\u200b\u200b"}  # fmt: skip
    rd = RAGDefender(enc)
    cases: list[Case] = []
    for name, items in sets.items():
        cases.append((f"RAGDefender.filter {name}",
                      expect(lambda it=items: rd.filter(queries["ok"], it))))  # fmt: skip
        cases.append((f"FilterChain([RAGDefender]).run {name}",
                      expect(lambda it=items: FilterChain([rd]).run(queries["ok"], it))))  # fmt: skip
        rag = RAGPipeline(enc, store, [rd])
        cases.append((f"RAGPipeline.answer_many retrieved={name}",
                      expect(lambda it=items, r=rag: r.answer_many([queries["ok"]],
                                                                   retrieved=[it]))))  # fmt: skip
    for name, q in queries.items():
        rag = RAGPipeline(enc, store, [rd])
        cases.append((f"RAGDefender.filter query {name}",
                      expect(lambda q=q: rd.filter(q, [rp(), rp(i=1)]))))  # fmt: skip
        cases.append((f"FilterChain.run query {name}",
                      expect(lambda q=q: FilterChain([rd]).run(q, [rp(), rp(i=1)]))))  # fmt: skip
        cases.append((f"RAGPipeline.answer query {name}", expect(lambda q=q, r=rag: r.answer(q))))
    for k in (0, -1, 10**6, 2.5, True, "5", None):
        rag = RAGPipeline(enc, store, [rd])
        cases.append((f"RAGPipeline.answer k={k!r}",
                      expect(lambda k=k, r=rag: r.answer("Who?", k=k))))  # fmt: skip
    return cases


# ---- generator ----------------------------------------------------------------------------


def generator_cases(work: Path) -> list[Case]:
    from ragshield.errors import RagshieldError
    from ragshield.generate.openai_compat import OpenAICompatGenerator

    ok = b'{"choices": [{"message": {"content": "Paris"}}]}'

    def reply(status: str, body: bytes, extra: str = "") -> bytes:
        return (f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n{extra}\r\n").encode() + body

    plays: dict[str, Callable[[socket.socket], None]] = {
        "ok": lambda c: c.sendall(reply("200 OK", ok)),
        "retry-after nan": lambda c: c.sendall(reply("503 Busy", b"{}", "Retry-After: nan\r\n")),
        "retry-after date": lambda c: c.sendall(
            reply("429 Slow", b"{}", "Retry-After: Wed, 21 Oct 2099 07:28:00 GMT\r\n")),
        "garbage json": lambda c: c.sendall(reply("200 OK", b"{garbage")),
        "wrong schema": lambda c: c.sendall(reply("200 OK", b'{"choices": "x"}')),
        "deep json": lambda c: c.sendall(reply("200 OK", DEEP.encode())),
        "huge int": lambda c: c.sendall(reply("200 OK", HUGE.encode())),
        "surrogate content": lambda c: c.sendall(
            reply("200 OK", b'{"choices": [{"message": {"content": "\\ud800"}}]}')),
        "silent": lambda c: time.sleep(10),
        "close": lambda c: None,
        "dribble body": lambda c: [c.sendall(b) or time.sleep(0.3)
                                   for b in [reply("200 OK", ok)[:40]] + [b"x"] * 20],
        "huge body": lambda c: c.sendall(reply("200 OK", b"x" * 20_000_000)),
        "huge declared": lambda c: c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n{"),
        "500 html": lambda c: c.sendall(reply("500 Oops", b"<html>oops</html>")),
        "401": lambda c: c.sendall(reply("401 No", b'{"error": {"message": "bad key"}}')),
        "not http": lambda c: c.sendall(b"SSH-2.0-OpenSSH\r\n"),
    }  # fmt: skip
    cases: list[Case] = []
    for name, play in plays.items():

        def run_it(play: Callable[[socket.socket], None] = play) -> str | None:
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen(8)

            def loop() -> None:
                with contextlib.suppress(OSError):
                    while True:
                        conn, _ = srv.accept()
                        with contextlib.suppress(OSError):
                            conn.recv(65536)
                            play(conn)
                        conn.close()

            threading.Thread(target=loop, daemon=True).start()
            gen = OpenAICompatGenerator(f"http://127.0.0.1:{srv.getsockname()[1]}/v1", "m",
                                        timeout=2.0, max_retries=1)  # fmt: skip
            try:
                gen.generate("Who?", ["Paris is the capital."])
            except RagshieldError:
                pass
            except Exception as exc:
                return f"{type(exc).__name__}: {str(exc)[:100]}"
            finally:
                srv.close()
                gen.close()
            return None

        cases.append((f"openai {name}", run_it))
    return cases


SECTIONS: dict[str, Callable[[Path], list[Case]]] = {
    "CLI arguments": cli_cases,
    "input files": file_cases,
    "service (ASGI, SQLite)": service_cases,
    "service (ASGI, PostgreSQL)": lambda work: service_cases(work, pg_storage(work)),
    "library": library_cases,
    "OpenAI-compatible endpoint": generator_cases,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deadline", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument(
        "--section", default=None, help="run these sections (comma-separated name prefixes)"
    )
    ap.add_argument(
        "--shard", default="0/1", help="K/N: run every N-th case from the K-th (parallel runs)"
    )
    ap.add_argument("--start", type=int, default=0, help="skip the cases before this index")
    args = ap.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    os.environ.setdefault("RAGSHIELD_NO_PROGRESS", "1")
    os.environ.pop("RAGSHIELD_PG_URI", None)
    results: list[Section] = []
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            for sname, build in SECTIONS.items():
                if args.section and not sname.startswith(tuple(args.section.split(","))):
                    continue
                work = Path(tmp) / "".join(ch if ch.isalnum() else "_" for ch in sname)
                work.mkdir()
                sec = Section(sname)
                for i, (name, run_it) in enumerate(build(work)):
                    if (args.only and args.only not in name) or i % shards != shard:
                        continue
                    if i < args.start:
                        continue
                    sec.tried += 1
                    try:
                        with deadline(args.deadline):
                            reason = run_it()
                    except Hang as exc:
                        reason = f"hang: {exc}"
                    except BaseException as exc:
                        reason = f"{type(exc).__name__}: {str(exc)[:120]}"
                    if reason is None:
                        sec.clean += 1
                    else:
                        sec.bad.append((name, reason))
                        shown = name.encode("unicode_escape").decode()[:80]
                        print(f"BAD {sname} | {shown} | {reason[:200]}", file=sys.stderr)
                results.append(sec)
                print(f"{sname}: {sec.tried} tried, {sec.clean} clean", file=sys.stderr, flush=True)
        finally:
            os.chdir(cwd)
    print(f"# hostile_pass — {len(results)} sections, {time.perf_counter() - t_all:.0f} s, "
          f"deadline {args.deadline:g} s per case")  # fmt: skip
    print()
    print("| section | cases tried | clean | bad |")
    print("|---|---|---|---|")
    for s in results:
        print(f"| {s.name} | {s.tried} | {s.clean} | {len(s.bad)} |")
    total = sum(s.tried for s in results), sum(s.clean for s in results)
    print(f"| **all** | **{total[0]}** | **{total[1]}** | **{total[0] - total[1]}** |")
    bad = [(s.name, n, r) for s in results for n, r in s.bad]
    if bad:
        print()
        print("| section | bad case | what happened |")
        print("|---|---|---|")
        for sname, n, r in bad:
            shown = " ".join(r.split()).replace("|", "\\|")[:160]
            print(f"| {sname} | `{n.encode('unicode_escape').decode()[:80]}` | {shown} |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
