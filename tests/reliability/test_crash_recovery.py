"""Issue #15 item 11: what a killed save leaves behind is repaired on the next open or
save — the old index comes back if the new one never arrived, stale temp folders go —
and nothing that is not recognisably ragshield's own leftover is ever deleted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .io_checks import make_store, snapshot

HOUR_AGO = time.time() - 3600


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _aged(path: Path) -> Path:
    os.utime(path, (HOUR_AGO, HOUR_AGO))
    return path


def _open(target: Path) -> None:
    from ragshield.store.persist import load_store

    assert len(load_store(target)) == 6


def _save(target: Path) -> None:
    make_store(n=6, dim=8).save(target)


ACTIONS: dict[str, Callable[[Path], None]] = {"open": _open, "save": _save}


def _leftover(root: Path, name: str, files: dict[str, bytes], *, age: bool = True) -> Path:
    d = root / name
    d.mkdir()
    for f, data in files.items():
        (d / f).write_bytes(data)
    return _aged(d) if age else d


INDEX_FILES = {"meta.json": b"{}", "index.faiss": b"\0", "vectors.npy": b"", "passages.jsonl": b""}


# name -> (leftover folder name given a dead pid, its files, removed?)
TEMPS: dict[str, tuple[str, dict[str, bytes], bool]] = {
    "empty temp (killed at once)": (".idx.rs-tmp-{dead}-abc123", {}, True),
    "temp with meta only": (".idx.rs-tmp-{dead}-abc123", {"meta.json": b"{}"}, True),
    "temp with every index file": (".idx.rs-tmp-{dead}-a_b9", INDEX_FILES, True),
    "temp with a foreign file": (".idx.rs-tmp-{dead}-abc123", {"notes.txt": b"mine"}, False),
    "temp with index and foreign": (
        ".idx.rs-tmp-{dead}-abc123",
        {**INDEX_FILES, "x.py": b"1"},
        False,
    ),
    "temp of a live process": (".idx.rs-tmp-{live}-abc123", INDEX_FILES, False),
    "pid not a number": (".idx.rs-tmp-abc-abc123", INDEX_FILES, False),
    "no rs- tag": (".idx.tmp-{dead}-abc123", INDEX_FILES, False),
    "no leading dot": ("idx.rs-tmp-{dead}-abc123", INDEX_FILES, False),
    "another index's temp": (".other.rs-tmp-{dead}-abc123", INDEX_FILES, False),
    "legacy mkdtemp name": (".idx.k2j4h5g6", INDEX_FILES, False),
    "old without index metadata": (".idx.rs-old-{dead}-deadbeef", INDEX_FILES, False),
    "old with a foreign file": (".idx.rs-old-{dead}-deadbeef", {"a.txt": b"x"}, False),
}


def _tree(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in d.rglob("*") if p.is_file()}


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize("case", list(TEMPS))
def test_stale_temp_folders(tmp_path: Path, case: str, action: str) -> None:
    _save(tmp_path / "idx")
    raw, files, removed = TEMPS[case]
    left = _leftover(tmp_path, raw.format(dead=_dead_pid(), live=os.getpid()), files)
    ACTIONS[action](tmp_path / "idx")
    if removed:
        assert not left.exists()
    else:
        assert _tree(left) == files  # untouched, byte for byte
    assert len(make_store(n=6, dim=8).load(tmp_path / "idx")) == 6


@pytest.mark.parametrize("action", list(ACTIONS))
def test_superseded_old_index_is_removed(tmp_path: Path, action: str) -> None:
    """Killed after the second rename: the new index is in place, the old one is litter."""
    _save(tmp_path / "idx")
    old = _old(tmp_path, f".idx.rs-old-{_dead_pid()}-0a1b2c3d", n=4)
    ACTIONS[action](tmp_path / "idx")
    assert not old.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_temp_newer_than_this_process_is_kept(tmp_path: Path) -> None:
    """A dead owner is not enough: the folder must also predate this process."""
    _save(tmp_path / "idx")
    name = f".idx.rs-tmp-{_dead_pid()}-abc123"
    _leftover(tmp_path, name, {"meta.json": b"{}"}, age=False)
    _open(tmp_path / "idx")
    assert (tmp_path / name).is_dir()


def test_temp_that_is_a_symlink_is_kept(tmp_path: Path) -> None:
    _save(tmp_path / "idx")
    (tmp_path / "mine").mkdir()
    name = f".idx.rs-tmp-{_dead_pid()}-abc123"
    (tmp_path / name).symlink_to(tmp_path / "mine", target_is_directory=True)
    _open(tmp_path / "idx")
    assert (tmp_path / name).is_symlink() and (tmp_path / "mine").is_dir()


# ---- the target vanished between the two renames --------------------------------------
def _old(tmp_path: Path, name: str, n: int = 6) -> Path:
    make_store(n=n, dim=8).save(tmp_path / "staging")
    (tmp_path / "staging").rename(tmp_path / name)
    return _aged(tmp_path / name)


@pytest.mark.parametrize("action", list(ACTIONS))
@pytest.mark.parametrize("legacy", [False, True], ids=["rs-old", "legacy .old"])
def test_old_index_restored_when_target_missing(tmp_path: Path, action: str, legacy: bool) -> None:
    name = ".idx.old" if legacy else f".idx.rs-old-{_dead_pid()}-0a1b2c3d"
    _old(tmp_path, name)
    ACTIONS[action](tmp_path / "idx")
    assert (tmp_path / "idx" / "meta.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_newest_old_wins(tmp_path: Path) -> None:
    from ragshield.store.persist import load_store

    _old(tmp_path, f".idx.rs-old-{_dead_pid()}-00000001", n=4)
    newer = _old(tmp_path, f".idx.rs-old-{_dead_pid()}-00000002", n=6)
    os.utime(newer, (HOUR_AGO + 60, HOUR_AGO + 60))
    assert len(load_store(tmp_path / "idx")) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # the older one is gone


@pytest.mark.parametrize(
    ("case", "build"),
    [
        ("legacy .old is a user file", lambda t: (t / ".idx.old").write_text("mine")),
        ("legacy .old is not an index", lambda t: (t / ".idx.old").mkdir()),
        ("old of a live process", lambda t: _old(t, f".idx.rs-old-{os.getpid()}-0a1b2c3d")),
        ("old is not an index", lambda t: _aged(_leftover(t, ".idx.rs-old-1-0a1b", {"x": b""}))),
    ],
)
def test_nothing_restored_from_what_is_not_ours(
    tmp_path: Path, case: str, build: Callable[[Path], object]
) -> None:
    from ragshield.errors import InputError
    from ragshield.store.persist import load_store

    build(tmp_path)
    before = snapshot(tmp_path / "x")
    with pytest.raises(InputError, match="not a ragshield index"):
        load_store(tmp_path / "idx")
    assert snapshot(tmp_path / "x") == before


# ---- a real process killed with SIGKILL in the middle of a save ------------------------
CHILD = r"""
import os, sys, time
import numpy as np
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage

target, phase, marker = sys.argv[1], sys.argv[2], sys.argv[3]

def stall():
    open(marker, "w").close()
    time.sleep(600)

if phase == "write":  # killed while the temp folder is being filled
    real_save = np.save
    def save(*a, **k):
        real_save(*a, **k)
        stall()
    np.save = save
else:  # killed between moving the old index aside and renaming the new one in
    real_replace, calls = os.replace, []
    def replace(src, dst):
        calls.append(src)
        if len(calls) == 2:
            stall()
        real_replace(src, dst)
    os.replace = replace

rng = np.random.default_rng(1)
vecs = rng.normal(size=(9, 8)).astype(np.float32)
store = FaissStore(8)
store.add([Passage(f"n{i}", f"new {i}") for i in range(9)], vecs)
store.save(target)
"""


@pytest.mark.parametrize("phase", ["write", "swap"])
def test_sigkill_mid_save_then_recover(tmp_path: Path, phase: str) -> None:
    target, marker = tmp_path / "idx", tmp_path / "marker"
    _save(target)  # the good index a crash must not lose (6 passages)
    script = tmp_path / "child.py"
    script.write_text(CHILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, str(script), str(target), phase, str(marker)], env=env
    )
    try:
        deadline = time.time() + 120
        while not marker.exists():
            assert child.poll() is None, "the child exited before reaching the save"
            assert time.time() < deadline, "the child never reached the save"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".idx."))
    if phase == "write":
        assert target.is_dir() and [n.split("-")[1] for n in names] == ["tmp"]
    else:
        assert not target.exists() and [n.split("-")[1] for n in names] == ["old", "tmp"]
    # the next process to open the index repairs the folder and sees the old index
    time.sleep(0.05)
    reader = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from ragshield.store.persist import load_store; "
            "print(len(load_store(sys.argv[1])))",
            str(target),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.strip() == "6"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["child.py", "idx", "marker"]
