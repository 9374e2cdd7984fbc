"""Issue #15 item 5: a damaged index fails on open with one line naming the file and the
problem (exit 2), never a FAISS / numpy / KeyError traceback (exit 1)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ragshield.errors import InputError

from .io_checks import fail_line, make_store


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda d: (d / name).write_bytes(data)


def _truncate(name: str, keep: float | int) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        raw = (d / name).read_bytes()
        n = keep if isinstance(keep, int) else int(len(raw) * keep)
        (d / name).write_bytes(raw[:n])

    return do


def _remove(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).unlink()


def _as_folder(name: str) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        (d / name).unlink()
        (d / name).mkdir()

    return do


def _meta(**changes: object) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
        for k, v in changes.items():
            if v is _DROP:
                meta.pop(k)
            else:
                meta[k] = v
        (d / "meta.json").write_text(json.dumps(meta), encoding="utf-8")

    return do


_DROP = object()


def _passages(edit: Callable[[list[str]], list[str]]) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        lines = (d / "passages.jsonl").read_text(encoding="utf-8").splitlines()
        (d / "passages.jsonl").write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")

    return do


def _record(**changes: object) -> Callable[[Path], None]:
    def edit(lines: list[str]) -> list[str]:
        rec = json.loads(lines[1])
        for k, v in changes.items():
            if v is _DROP:
                rec.pop(k)
            else:
                rec[k] = v
        return [lines[0], json.dumps(rec), *lines[2:]]

    return _passages(edit)


def _vectors(arr: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], None]:
    def do(d: Path) -> None:
        np.save(d / "vectors.npy", arr(np.load(d / "vectors.npy")))

    return do


def _faiss_of(dim: int = 8, kind: str = "flat") -> Callable[[Path], None]:
    def do(d: Path) -> None:
        other = make_store(n=6, dim=dim)
        if kind == "hnsw":
            from ragshield.store.faiss_store import FaissStore

            other = FaissStore(8, "hnsw")
            src = make_store(n=6, dim=8)
            other.add(src.passages, src.vectors)
        other.save(d.parent / "other")
        shutil.copy(d.parent / "other" / "index.faiss", d / "index.faiss")

    return do


def _pickled_vectors(d: Path) -> None:
    np.save(d / "vectors.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)


# name -> (damage, file named in the message, words in the message)
CASES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    # index.faiss
    "faiss empty": (_write("index.faiss", b""), "index.faiss", "empty"),
    "faiss garbage": (_write("index.faiss", bytes(range(256)) * 4), "index.faiss", "corrupt"),
    "faiss text": (_write("index.faiss", b"not a faiss index\n"), "index.faiss", "corrupt"),
    "faiss cut to 4 bytes": (_truncate("index.faiss", 4), "index.faiss", "corrupt"),
    "faiss cut to 100 bytes": (_truncate("index.faiss", 100), "index.faiss", "corrupt"),
    "faiss cut in half": (_truncate("index.faiss", 0.5), "index.faiss", "corrupt"),
    "faiss missing last byte": (_truncate("index.faiss", -1), "index.faiss", "corrupt"),
    "faiss missing": (_remove("index.faiss"), "index.faiss", "missing"),
    "faiss is a folder": (_as_folder("index.faiss"), "index.faiss", "missing"),
    "faiss of another dim": (_faiss_of(dim=16), "index.faiss", "16-d"),
    "faiss of another type": (_faiss_of(kind="hnsw"), "index.faiss", "IndexHNSW"),
    # vectors.npy
    "vectors missing": (_remove("vectors.npy"), "vectors.npy", "missing"),
    "vectors empty": (_write("vectors.npy", b""), "vectors.npy", "corrupt"),
    "vectors garbage": (_write("vectors.npy", b"\x00" * 300), "vectors.npy", "corrupt"),
    "vectors cut to header": (_truncate("vectors.npy", 128), "vectors.npy", "corrupt"),
    "vectors cut in half": (_truncate("vectors.npy", 0.5), "vectors.npy", "corrupt"),
    "vectors missing last byte": (_truncate("vectors.npy", -1), "vectors.npy", "corrupt"),
    "vectors pickled": (_pickled_vectors, "vectors.npy", "corrupt"),
    "vectors is a folder": (_as_folder("vectors.npy"), "vectors.npy", "missing"),
    "vectors wrong dim": (_vectors(lambda v: v[:, :4].copy()), "vectors.npy", "shape"),
    "vectors 1-d": (_vectors(lambda v: v.ravel()), "vectors.npy", "shape"),
    "vectors float64": (_vectors(lambda v: v.astype(np.float64)), "vectors.npy", "float64"),
    "vectors one row short": (_vectors(lambda v: v[:-1]), "index", "vectors.npy 5"),
    # passages.jsonl
    "passages missing": (_remove("passages.jsonl"), "passages.jsonl", "missing"),
    "passages is a folder": (_as_folder("passages.jsonl"), "passages.jsonl", "missing"),
    "passages not UTF-8": (
        _write("passages.jsonl", b'{"id": "p0", "text": "caf\xe9"}\n'),
        "passages.jsonl:1",
        "UTF-8",
    ),
    "passages malformed JSON": (
        _passages(lambda ls: [ls[0], "{oops", *ls[2:]]),
        "passages.jsonl:2",
        "malformed JSON",
    ),
    "passages truncated line": (
        _passages(lambda ls: [*ls[:-1], ls[-1][:10]]),
        "passages.jsonl:6",
        "malformed JSON",
    ),
    "passages record a list": (
        _passages(lambda ls: [ls[0], "[1, 2]", *ls[2:]]),
        "passages.jsonl:2",
        "JSON object",
    ),
    "passages record without id": (_record(id=_DROP), "passages.jsonl:2", "'id' missing"),
    "passages id null": (_record(id=None), "passages.jsonl:2", "'id' is null"),
    "passages id number": (_record(id=7), "passages.jsonl:2", "'id' is a int"),
    "passages id blank": (_record(id="  "), "passages.jsonl:2", "'id' is blank"),
    "passages record without text": (_record(text=_DROP), "passages.jsonl:2", "'text' missing"),
    "passages text null": (_record(text=None), "passages.jsonl:2", "'text' is null"),
    "passages text a list": (_record(text=["a"]), "passages.jsonl:2", "'text' is a list"),
    "passages text surrogate": (_record(text="a \ud800"), "passages.jsonl:2", "surrogate"),
    "passages title number": (_record(title=3), "passages.jsonl:2", "'title' is a int"),
    "passages metadata a list": (_record(metadata=[1]), "passages.jsonl:2", "'metadata'"),
    "passages duplicate id": (_record(id="p0"), "passages.jsonl:2", "duplicate"),
    "passages one short": (_passages(lambda ls: ls[:-1]), "index", "passages.jsonl 5"),
    "passages one extra": (
        _passages(lambda ls: [*ls, json.dumps({"id": "x", "text": "extra"})]),
        "index",
        "passages.jsonl 7",
    ),
    # meta.json
    "meta dim text": (_meta(dim="abc"), "meta.json", "'dim' must be a positive integer"),
    "meta dim zero": (_meta(dim=0), "meta.json", "'dim'"),
    "meta dim negative": (_meta(dim=-3), "meta.json", "'dim'"),
    "meta dim float": (_meta(dim=8.5), "meta.json", "'dim'"),
    "meta dim bool": (_meta(dim=True), "meta.json", "'dim'"),
    "meta dim null": (_meta(dim=None), "meta.json", "'dim'"),
    "meta dim list": (_meta(dim=[8]), "meta.json", "'dim'"),
    "meta dim wrong": (_meta(dim=16), "index.faiss", "meta.json says 16"),
    "meta without dim": (_meta(dim=_DROP), "meta.json", "lacks 'dim'"),
    "meta index_type unknown": (_meta(index_type="lsh"), "meta.json", "'index_type'"),
    "meta index_type wrong": (_meta(index_type="hnsw"), "index.faiss", "meta.json says 'hnsw'"),
    "meta ef_search text": (_meta(ef_search="x"), "meta.json", "'ef_search'"),
    "meta nprobe negative": (_meta(nprobe=-1), "meta.json", "'nprobe'"),
    "meta count wrong": (_meta(count=99), "index", "meta.json count 99"),
    "meta count text": (_meta(count="six"), "meta.json", "'count'"),
    "meta encoder_name number": (_meta(encoder_name=5), "meta.json", "'encoder_name'"),
    "meta store unknown": (_meta(store="nosuch"), "meta.json", "unknown store kind"),
    "meta garbage": (_write("meta.json", b"\x00\xff garbage"), "meta.json", "unreadable"),
    "meta truncated": (_truncate("meta.json", 0.5), "meta.json", "unreadable"),
    "meta a list": (_write("meta.json", b"[8]"), "meta.json", "lacks 'dim'"),
    "meta empty": (_write("meta.json", b""), "meta.json", "unreadable"),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("good") / "idx"
    make_store(n=6, dim=8).save(path)
    return path


def _damaged(good: Path, tmp_path: Path, case: str) -> Path:
    bad = tmp_path / "idx"
    shutil.copytree(good, bad)
    CASES[case][0](bad)
    return bad


@pytest.mark.parametrize("case", list(CASES))
def test_ask_on_damaged_index_exits_2(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    bad = _damaged(good, tmp_path, case)
    _, file, words = CASES[case]
    line = fail_line(capsys, ["ask", bad, "what is passage 1?", "--k", "2"], words)
    where = str(bad) if file == "index" else str(bad / file)
    assert where in line


@pytest.mark.parametrize("case", list(CASES))
def test_load_store_on_damaged_index_raises_input_error(
    good: Path, tmp_path: Path, case: str
) -> None:
    from ragshield.store.persist import load_store

    bad = _damaged(good, tmp_path, case)
    _, file, words = CASES[case]
    with pytest.raises(InputError) as info:
        load_store(bad)
    assert words in str(info.value) and file.split(":")[0] in str(info.value)


def test_undamaged_copy_loads(good: Path, tmp_path: Path) -> None:
    """The control: the same copy, undamaged, opens and searches."""
    from ragshield.store.persist import load_store

    shutil.copytree(good, tmp_path / "idx")
    store = load_store(tmp_path / "idx")
    assert len(store) == 6
    hit = store.search(make_store(n=6, dim=8).vectors[2:3], 1)[0][0]
    assert hit.id == "p2"
