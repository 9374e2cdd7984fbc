"""``keys create`` and the auth config refuse absurd values in one line (issue #27, root
cause 16: a non-UTF-8 name, a 30-digit --rpm, argon2 memory/parallelism the config took and
argon2 refused later were tracebacks; a 5 MB encoder name was an OSError)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.reliability.io_checks import fail_line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["keys", "create", "bob\udcff"], "lone surrogate"),  # argv byte 0xff, not UTF-8
        (["keys", "create", "bob", "--rpm", str(10**30)], "--rpm"),
        (["keys", "create", "bob", "--rpd", str(10**12)], "--rpd"),
        (["keys", "create", "bob", "--rpm", "0"], "--rpm"),
    ],
)
def test_keys_create_args(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    fail_line(capsys, [*argv, "--db", tmp_path / "k.db"], needle)


@pytest.mark.parametrize(
    ("auth", "needle"),
    [
        ("argon2_memory_kib = " + "9" * 30, "argon2_memory_kib"),
        ("argon2_parallelism = 1000000", "argon2_parallelism"),
        ("argon2_memory_kib = 8\nargon2_parallelism = 64", "argon2_memory_kib >= 8 x 64"),
        ("argon2_time_cost = 100000", "argon2_time_cost"),
    ],
)
def test_absurd_argon2_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], auth: str, needle: str
) -> None:
    cfg = tmp_path / "s.toml"
    cfg.write_text(f'index = "idx"\n[storage]\nsqlite_path = "k.db"\n[auth]\n{auth}\n')
    fail_line(capsys, ["keys", "create", "bob", "--config", cfg], needle)
    assert not (tmp_path / "k.db").exists()


def test_huge_encoder_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.reliability.io_checks import make_store

    make_store().save(tmp_path / "idx")
    fail_line(capsys, ["ask", tmp_path / "idx", "Who?", "--encoder", "x" * 5_000_000], "encoder")


def test_storage_errors_are_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = fail_line(capsys, ["keys", "create", "bob", "--db", tmp_path / ("y" * 5000)], "database")
    assert len(line) < 700
