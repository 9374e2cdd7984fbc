"""Issue #15 items 1 and 6: ``--out`` replaces only a ragshield index (or an empty folder),
for every writer, and an odd or unwritable target fails before anything is encoded."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ragshield.errors import InputError

from .io_checks import fail_line, forbid_encoding, make_store, snapshot, write_corpus


def _dir_with(files: dict[str, str]) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        p = root / "p"
        for rel, text in files.items():
            (p / rel).parent.mkdir(parents=True, exist_ok=True)
            (p / rel).write_text(text, encoding="utf-8")
        return p

    return build


def _file(text: str) -> Callable[[Path], Path]:
    def build(root: Path) -> Path:
        (root / "p").write_text(text, encoding="utf-8")
        return root / "p"

    return build


def _empty_subdir(root: Path) -> Path:
    (root / "p" / "sub").mkdir(parents=True)
    return root / "p"


def _link_to_file(root: Path) -> Path:
    (root / "real.txt").write_text("keep me", encoding="utf-8")
    (root / "p").symlink_to(root / "real.txt")
    return root / "p"


def _link_to_dir(root: Path) -> Path:
    (root / "real").mkdir()
    (root / "real" / "main.py").write_text("x", encoding="utf-8")
    (root / "p").symlink_to(root / "real", target_is_directory=True)
    return root / "p"


def _fifo(root: Path) -> Path:
    os.mkfifo(root / "p")
    return root / "p"


# Each builds something at ROOT/p that is not ragshield's to replace.
VICTIMS: dict[str, Callable[[Path], Path]] = {
    "source-tree": _dir_with({"src/main.py": "x\n"}),  # the reproduction
    "dir-with-file": _dir_with({"notes.txt": "my notes"}),
    "dir-with-hidden-file": _dir_with({".git/config": "[core]"}),
    "dir-with-empty-subdir": _empty_subdir,
    "meta-json-not-json": _dir_with({"meta.json": "hello", "data.csv": "a,b"}),
    "meta-json-without-dim": _dir_with({"meta.json": json.dumps({"store": "faiss"})}),
    "meta-json-a-list": _dir_with({"meta.json": "[1, 2]"}),
    "regular-file": _file("precious\n"),
    "empty-file": _file(""),
    "symlink-to-file": _link_to_file,
    "symlink-to-folder": _link_to_dir,
    "fifo": _fifo,
}


def _cli_index(root: Path, target: Path, corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fail_line(capsys, ["index", corpus, "--out", target], "p", "nothing was written")


def _cli_reindex_force(
    root: Path, target: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --force allows replacing an index, never another folder or a file
    fail_line(
        capsys,
        ["reindex", root / "no-such-index", "--out", target, "--force"],
        "nothing was written",
    )


def _faiss_save(root: Path, target: Path, corpus: Path, capsys: object) -> None:
    with pytest.raises(InputError, match="nothing was written"):
        make_store(dim=8).save(target)


def _write_meta_dir(root: Path, target: Path, corpus: Path, capsys: object) -> None:
    from ragshield.store.persist import write_meta_dir

    with pytest.raises(InputError, match="nothing was written"):
        write_meta_dir(target, {"store": "pgvector", "dim": 8})


def _replace_dir(root: Path, target: Path, corpus: Path, capsys: object) -> None:
    from ragshield.store.persist import replace_dir

    stage = root / "stage"
    make_store(dim=8).save(stage)
    before = snapshot(target)
    with pytest.raises(InputError, match="nothing was written"):
        replace_dir(stage, target)
    assert snapshot(target) == before  # the staged index is still there too


def _build_index(root: Path, target: Path, corpus: Path, capsys: object) -> None:
    from ragshield.indexing import build_index
    from ragshield.types import Passage

    with pytest.raises(InputError, match="nothing was written"):
        build_index([Passage("a", "text")], target)


WRITERS = {
    "cli-index": _cli_index,
    "cli-reindex-force": _cli_reindex_force,
    "FaissStore.save": _faiss_save,
    "write_meta_dir": _write_meta_dir,
    "replace_dir": _replace_dir,
    "build_index": _build_index,
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("victim", list(VICTIMS))
def test_out_never_replaces_what_is_not_an_index(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    victim: str,
    writer: str,
) -> None:
    forbid_encoding(monkeypatch)
    root = tmp_path / "root"
    root.mkdir()
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "a", "text": "alpha"}\n', encoding="utf-8")
    target = VICTIMS[victim](root)
    if writer == "replace_dir":
        WRITERS[writer](root, target, corpus, capsys)
        return
    before = snapshot(target)
    WRITERS[writer](root, target, corpus, capsys)
    assert snapshot(target) == before  # nothing renamed, deleted or added, not even a temp


# ---- odd or unwritable targets (item 6): refused before the corpus is encoded --------
ODD_OUTS = {
    "under /proc": ("/proc/x", "/proc"),
    "deep under /proc": ("/proc/no/such/dir", "/proc"),
    "under a regular file": ("{root}/file.txt/sub", "is a file"),
    "deep under a regular file": ("{root}/file.txt/a/b/c", "is a file"),
    "the current directory": (".", "current directory"),
    "the parent directory": ("..", "current directory"),
    "the current directory, absolute": ("{cwd}", "current directory"),
    "the file-system root": ("/", "/"),
    "a device": ("/dev/null", "not a folder"),
    "under a device": ("/dev/null/x", "is a file"),
}


@pytest.fixture
def odd_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the user's files, with the working directory one level below it."""
    root = tmp_path / "root"
    (root / "work").mkdir(parents=True)
    (root / "work" / "keep.txt").write_text("mine", encoding="utf-8")
    (root / "file.txt").write_text("mine", encoding="utf-8")
    monkeypatch.chdir(root / "work")
    return root


@pytest.mark.parametrize("case", list(ODD_OUTS))
def test_odd_out_refused_before_encoding(
    tmp_path: Path,
    odd_root: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    forbid_encoding(monkeypatch)
    corpus = write_corpus(tmp_path)
    root = odd_root
    raw, needle = ODD_OUTS[case]
    out = raw.format(root=root, cwd=root / "work")
    before = snapshot(root / "work")
    fail_line(capsys, ["index", corpus, "--out", out], needle)
    assert snapshot(root / "work") == before


@pytest.mark.parametrize("case", list(ODD_OUTS))
def test_odd_out_refused_by_the_library(odd_root: Path, case: str) -> None:
    root = odd_root
    raw, needle = ODD_OUTS[case]
    with pytest.raises(InputError, match=needle.replace(".", r"\.")):
        make_store(dim=8).save(raw.format(root=root, cwd=root / "work"))


# ---- what may be written ------------------------------------------------------------
def _existing_index(root: Path) -> Path:
    make_store(n=3, dim=8, seed=1).save(root / "p")
    return root / "p"


def _reindex_like(root: Path) -> Path:
    p = _existing_index(root)
    (p / "ragfort.json").write_text("{}", encoding="utf-8")
    return p


def _pointer(root: Path) -> Path:
    from ragshield.store.persist import write_meta_dir

    write_meta_dir(root / "p", {"store": "pgvector", "dim": 8, "table": "t"})
    return root / "p"


def _empty_dir(root: Path) -> Path:
    (root / "p").mkdir()
    return root / "p"


def _link_to_index(root: Path) -> Path:
    make_store(n=3, dim=8, seed=1).save(root / "real")
    (root / "p").symlink_to(root / "real", target_is_directory=True)
    return root / "p"


ALLOWED = {
    "new folder": lambda root: root / "p",
    "new nested folder": lambda root: root / "a" / "b" / "p",
    "empty folder": _empty_dir,
    "existing FAISS index": _existing_index,
    "existing re-index": _reindex_like,
    "existing pgvector pointer": _pointer,
    "symlink to an index": _link_to_index,
}


@pytest.mark.parametrize("case", list(ALLOWED))
def test_index_or_empty_folder_is_replaced(tmp_path: Path, case: str) -> None:
    from ragshield.store.faiss_store import FaissStore

    target = ALLOWED[case](tmp_path)
    make_store(n=6, dim=8).save(target)
    assert len(FaissStore.load(target)) == 6
    leftovers = [p.name for p in target.resolve().parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []
    if case == "symlink to an index":
        assert target.is_symlink() and len(FaissStore.load(tmp_path / "real")) == 6


def test_cli_index_into_empty_folder(tmp_path: Path) -> None:
    from ragshield.cli import run

    corpus = write_corpus(tmp_path)
    (tmp_path / "p").mkdir()
    assert run(["index", str(corpus), "--out", str(tmp_path / "p")]) == 0
    assert (tmp_path / "p" / "meta.json").is_file()
    # and the same command again replaces its own index
    assert run(["index", str(corpus), "--out", str(tmp_path / "p")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "p"]
