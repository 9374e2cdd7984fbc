"""The provenance stage reads ``added_at`` from what the index returns at ask time: after
``ragshield add`` the stamp must reach ``RetrievedPassage.passage.metadata`` from a saved
FAISS index and from pgvector, and the filter must then spare the indexed page over its
later near-copy (the demo index, real MiniLM, real stores)."""

from __future__ import annotations

from pathlib import Path

from fakes import write_jsonl
from ragshield.corpus import read_corpus
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.demo import demo_files
from ragshield.indexing import build_index, open_index
from ragshield.ingest import add_documents
from ragshield.pipeline import RAGPipeline

Q = "What is the capital of Australia?"


def _copy_of_canberra() -> dict[str, str]:
    page = next(p for p in read_corpus(demo_files()[0]) if p.id == "canberra")
    return {"id": "canberra-v2", "title": page.title,
            "text": page.text.replace("Canberra", "Sydney", 1)}  # fmt: skip


def _check(index: Path, uri: str | None, tmp_path: Path) -> None:
    new = write_jsonl(tmp_path / "new.jsonl", [_copy_of_canberra()])
    add_documents(index, new, screen="none", uri=uri)
    store, enc = open_index(index, uri=uri)
    hits = {r.id: r for r in store.search(enc.encode([Q]), 10)[0]}
    assert {"canberra", "canberra-v2"} <= set(hits)
    assert hits["canberra-v2"].passage.metadata["added_at"].endswith("Z")
    assert "added_at" not in hits["canberra"].passage.metadata
    # the later copy states a fact the indexed page does not: it goes, the page stays
    res = RAGPipeline(enc, store, [RAGDefender(enc, provenance="facts")]).answer(Q, k=10)
    decided = {d.passage_id: d.reason for fr in res.filter_results for d in fr.decisions}
    assert decided["canberra-v2"].startswith("added after the page it copies")
    assert "canberra" not in decided and "canberra" in [r.id for r in res.passages]


def test_saved_faiss_index_returns_added_at(tmp_path: Path) -> None:
    build_index(read_corpus(demo_files()[0]), tmp_path / "idx")
    _check(tmp_path / "idx", None, tmp_path)


def test_pgvector_index_returns_added_at(pg_uri: str, tmp_path: Path) -> None:
    build_index(read_corpus(demo_files()[0]), tmp_path / "pg", store_uri=pg_uri,
                table="provenance_demo")  # fmt: skip
    _check(tmp_path / "pg", pg_uri, tmp_path)
