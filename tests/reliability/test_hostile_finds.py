"""Cases benchmarks/hostile_pass.py found after the root causes were fixed (issue #27):
OS-level path errors escaping the CLI, SQLite opening a user's file, a deeply nested
meta.json, and the load-shedding of throttled bad-key clients."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ragshield.server import Service, create_app

from ._server_env import FAST_AUTH, bearer, burst, demo_index_fixture, make_fixture  # noqa: F401
from .io_checks import fail_line, make_store, snapshot


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["ask", "x" * 5000, "Who?"], "File name too long"),
        (["index", "c.jsonl", "--out", "new/" + "y" * 300], "too long"),
        (["db", "start", "--data", "new/" + "y" * 300], "too long"),
        (["ask", "a\x00b", "Who?"], "NUL byte"),
        (["keys", "create", "bob", "--db", "FILE"], "not a SQLite database"),
        (["keys", "create", "bob", "--db", "."], "is a folder"),
        # a folder where a file is meant
        (["filter", "Who?", "/"], "is a folder"),  # read every file of the machine: a hang
        (["filter", "Who?", "."], "is a folder"),
        (["index", "/", "--out", "idx"], "root"),
    ],
)
def test_cli_path_errors_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    needle: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "FILE").write_text("my notes")
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "Paris."}\n')
    before = snapshot(tmp_path)
    fail_line(capsys, argv, needle)
    assert snapshot(tmp_path) == before  # no -wal/-shm beside FILE, no half-made folders


def test_deep_meta_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_store().save(tmp_path / "idx")
    (tmp_path / "idx" / "meta.json").write_text("[" * 50_000)
    fail_line(capsys, ["ask", tmp_path / "idx", "Who?"], "meta.json")


def test_throttled_client_is_shed_but_valid_key_works(
    make: Callable[..., Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the failure limit, bad keys get 429 from the shed layer (the key manager is not
    consulted); a key that verified before keeps working from the same address."""
    service = make(
        auth={**FAST_AUTH, "failure_limit": 3, "failure_delay_seconds": 0.0},
        limits={"requests_per_minute": 0},
    )
    _, token = service.keys.create("alice")
    app = create_app(service)
    ask = {"question": "Who designed the Eiffel Tower?"}
    assert burst(app, [("POST", "/v1/ask", ask, bearer(token))])[0].status_code == 200
    bad = [("POST", "/v1/ask", ask, bearer("rsk_000000000000_" + "a" * 43))] * 3
    assert [r.status_code for r in burst(app, bad)] == [401] * 3
    reached: list[str] = []
    real = service.keys.authenticate_async

    async def counting(token: str | None, client: str) -> object:
        reached.append(client)
        return await real(token, client)

    monkeypatch.setattr(service.keys, "authenticate_async", counting)
    shed = burst(app, bad * 4)
    assert [r.status_code for r in shed] == [429] * 12
    assert all("Retry-After" in r.headers for r in shed)
    assert reached == []  # answered before FastAPI and the key manager
    assert burst(app, [("POST", "/v1/ask", ask, bearer(token))])[0].status_code == 200


def test_shed_answer_is_a_tarpit(
    make: Callable[..., Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A throttled address's shed 429 is held SHED_DELAY_FACTOR x the failure delay (a
    flooding client that waits for answers sends fewer requests), never past its block."""
    import asyncio

    from ragshield.server import middleware

    service = make(
        auth={**FAST_AUTH, "failure_limit": 2, "failure_delay_seconds": 0.01},
        limits={"requests_per_minute": 0},
    )
    app = create_app(service)
    bad = [("POST", "/v1/ask", {"question": "Who?"}, bearer("rsk_000000000000_" + "a" * 43))]
    for _ in range(2):
        assert burst(app, bad)[0].status_code == 401
    slept: list[float] = []
    real_sleep = asyncio.sleep

    async def record(seconds: float) -> None:
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(middleware.asyncio, "sleep", record)
    assert burst(app, bad)[0].status_code == 429
    assert slept == [pytest.approx(0.01 * middleware.SHED_DELAY_FACTOR)]


# ---- found by the third pass (1,500+ cases; docs/results-reliability.md) -----------------


@pytest.mark.parametrize("cache", ["user/new/" + "y" * 300, "user"])
def test_eval_retrieval_refuses_before_touching_the_cache_dir(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    cache: str,
) -> None:
    """An over-long cache name left ``user/new`` behind; data with no questions wrote a
    vectors file into the cache folder before being refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.md").write_text("mine")
    (tmp_path / "d.json").write_text('{"passages": [], "questions": []}')
    before = snapshot(tmp_path / "user")
    fail_line(capsys, ["eval", "retrieval", "d.json", "--cache-dir", cache, "--out", "e"])
    assert snapshot(tmp_path / "user") == before


@pytest.mark.parametrize("text", ["caf\ud800e", None, 5])
def test_passage_text_that_is_not_text(text: object) -> None:
    """A lone surrogate in a passage reached the tokenizer (UnicodeEncodeError) through
    RAGDefender.filter, FilterChain and RAGPipeline.answer_many."""
    import numpy as np

    from ragshield.defenses.compose import FilterChain
    from ragshield.defenses.ragdefender import RAGDefender
    from ragshield.errors import InputError
    from ragshield.types import Passage, RetrievedPassage

    v = np.ones(4, dtype=np.float32) / 2
    items = [
        RetrievedPassage(Passage("a", text), 0.9, 0, v),  # type: ignore[arg-type]
        RetrievedPassage(Passage("b", "Paris is the capital."), 0.8, 1, v),
    ]
    for f in (RAGDefender(None), FilterChain([RAGDefender(None)])):
        with pytest.raises(InputError, match=r"text of passage 0"):
            f.filter("What is the capital?", items)


def test_add_report_never_writes_into_a_users_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``add --report FOLDER`` wrote screen.json into any folder (over a user's own
    screen.json too); now only a new, empty or ragshield-marked folder, checked before
    the documents are screened."""
    monkeypatch.chdir(tmp_path)
    make_store().save(tmp_path / "idx")
    (tmp_path / "new.jsonl").write_text('{"id": "n1", "text": "Lyon is a city."}\n')
    user = tmp_path / "user"
    user.mkdir()
    (user / "screen.json").write_text("my own screening notes")
    before = snapshot(tmp_path)
    fail_line(
        capsys,
        ["add", "idx", "new.jsonl", "--screen", "none", "--report", "user"],
        "--report user holds files ragshield did not write",
    )
    assert snapshot(tmp_path) == before  # nothing added to the index either
