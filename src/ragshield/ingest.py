"""Add documents to an existing index, screened before they are searchable.

Example::

    from ragshield.ingest import add_documents, quarantine_list, release

    report = add_documents("my-index", "new.jsonl")
    print(report.added, [q.id for q in report.quarantined])
    release("my-index", ["doc-17"])          # an operator vouches for a flagged document

Why at ingestion: poisoning enters a live system when documents are *added*
(pinecone-io/canopy#341, dynatrace-oss/unguard#169 ask for screening at upsert time). Each
new document is screened by the registered defense chain (:data:`DEFAULT_SCREEN`:
RAGDefender for planted misinformation, EcoSafeRAG's bait sentences for injected
instructions) as part of the set a question on its topic would retrieve. The probe
question is the first sentence of the document's nearest *indexed* passage — the topic
it joins; not the document's own words, which every query-aware defense would read as a
passage restating its question (PoisonedRAG's retrieval trick): on the demo index that
probe flagged every new document, clean ones included. The set is the document's ``k``
nearest indexed passages, the nearest documents of the same batch (an attacker adds
several passages for one target at once) and the document itself. A
document the chain removes — or edits (a sentence filter dropping an instruction) — goes
to the index's quarantine with the chain's reasons, never into the searchable index; a
user lists, releases or deletes it (``ragshield quarantine list|release|delete``).

Every added passage records its provenance in its metadata: ``source`` (the file, or what
the caller names), ``added_at`` (UTC, ISO 8601) and ``sha256`` (of title and text).

Crash safety: a FAISS index is rewritten into a temporary sibling folder and renamed into
place (:func:`~ragshield.store.persist.atomic_dir`), quarantine included, so a process
killed at any moment leaves the old index or the new one, never a mix; a pgvector table
takes the accepted rows in one transaction, and its pointer folder (with the quarantine)
is replaced atomically after the commit.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ragshield.corpus import MAX_CHARS, chunk_passages, read_corpus
from ragshield.errors import InputError
from ragshield.store.base import VectorStore
from ragshield.store.persist import INDEX_FILES, atomic_dir, read_meta
from ragshield.types import FilterResult, Passage, RetrievedPassage

#: The screening chain (the scan's combined chain: RAGDefender + EcoSafeRAG).
DEFAULT_SCREEN = "ragdefender,ecosaferag"
#: What the screen changes in its filters: RAGDefender's planted-group signal is off at
#: ingestion, where a batch of related new documents (versions, a series, one source's
#: boilerplate) is normal and is judged as a group among itself; it applies at retrieval,
#: where the group must also sit around one question (tests/test_add.py's clean batch). The
#: lone-claim and consensus scrutiny of added passages are off too: the screen's probe
#: question is the new document's own first sentence, so every new document is "close to the
#: question" there, and a batch's documents share the new words nothing indexed uses yet.
SCREEN_PARAMS: dict[str, dict[str, object]] = {
    "ragdefender": {"group_knn": False, "lone_claim_added": 3.0, "consensus_added_echo": 2.0}
}
#: Indexed neighbours per new document (the retrieval depth the scan uses, k=10).
DEFAULT_K = 10
QUARANTINE = "quarantine.jsonl"
_PROBE_CHARS = 300  # the probe question: the first sentence, at most this long


@dataclass(frozen=True)
class Quarantined:
    """A flagged document: never searchable until released."""

    passage: Passage
    reasons: tuple[str, ...]
    quarantined_at: str
    screen: str

    @property
    def id(self) -> str:
        return self.passage.id

    def to_dict(self) -> dict[str, Any]:
        p = self.passage
        return {
            "id": p.id,
            "title": p.title,
            "text": p.text,
            "metadata": dict(p.metadata),
            "reasons": list(self.reasons),
            "quarantined_at": self.quarantined_at,
            "screen": self.screen,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Quarantined:
        p = Passage(
            str(d["id"]), str(d["text"]), str(d.get("title", "")), dict(d.get("metadata") or {})
        )
        return cls(
            p,
            tuple(d.get("reasons", ())),
            str(d.get("quarantined_at", "")),
            str(d.get("screen", "")),
        )


@dataclass(frozen=True)
class Screened:
    """One new document's verdict: ``reasons`` is empty when it passed."""

    passage: Passage
    reasons: tuple[str, ...]
    neighbours: tuple[str, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.reasons)


@dataclass(frozen=True)
class AddReport:
    """What :func:`add_documents` did; ``to_dict`` is the JSON screening report."""

    index: str
    source: str
    screen: str
    added: tuple[str, ...]
    quarantined: tuple[Quarantined, ...]
    screened: tuple[Screened, ...]
    timings: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "source": self.source,
            "screen": self.screen,
            "added": list(self.added),
            "quarantined": [q.to_dict() for q in self.quarantined],
            "screened": [
                {
                    "id": s.passage.id,
                    "flagged": s.flagged,
                    "reasons": list(s.reasons),
                    "neighbours": list(s.neighbours),
                }
                for s in self.screened
            ],
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
        }


# ---- provenance ----------------------------------------------------------------------------


def content_hash(p: Passage) -> str:
    return hashlib.sha256(f"{p.title}\n{p.text}".encode()).hexdigest()


def with_provenance(passages: Iterable[Passage], source: str, added_at: str) -> list[Passage]:
    """Each passage with ``source``, ``added_at`` and ``sha256`` in its metadata (what the
    record said about them itself is overwritten: provenance is ragshield's record)."""
    return [
        replace(
            p,
            metadata={
                **dict(p.metadata),
                "source": source,
                "added_at": added_at,
                "sha256": content_hash(p),
            },
        )
        for p in passages
    ]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# ---- screening -----------------------------------------------------------------------------


def probe_question(p: Passage) -> str:
    """A question about ``p``'s topic: its first sentence (see the module docstring)."""
    from ragshield.text import split_sentences

    sents = split_sentences(p.text)
    first = (sents[0] if sents else p.text).strip()
    return (first or p.title or p.text)[:_PROBE_CHARS]


#: Decisions that say nothing about an attack: EcoSafeRAG prunes sentences irrelevant to
#: the probe (its token saving) and cuts over-long ones; neither is evidence.
NOT_EVIDENCE = frozenset({"below_adaptive_threshold", "truncated_over_max_chars"})


def _reasons(result: FilterResult, pid: str) -> tuple[str, ...]:
    stages = list(result.details.get("stages", [result]))
    out = []
    for st in stages:
        for d in st.decisions:
            if d.passage_id == pid and d.reason not in NOT_EVIDENCE:
                unit = "" if d.unit == "passage" else f" ({d.unit})"
                out.append(f"{st.name}{unit}: {d.reason}")
    if (
        not out
        and any(r.id == pid for r in result.removed)
        and not any(d.passage_id == pid for st in stages for d in st.decisions)
    ):
        out.append(f"{result.name}: removed")
    return tuple(dict.fromkeys(out))


def _unmarked(hit: RetrievedPassage) -> RetrievedPassage:
    """``hit`` without its canary marker: a stored chunk carries one (``ragshield index``),
    and the probe built from it, or a filter reading it, must see the document's own text —
    with the marker as the chunk's head the probe opened with ``[ref …]`` and clean
    documents were quarantined."""
    from ragshield.defenses.canary_marks import strip_canaries

    text = strip_canaries(hit.passage.text)
    if text == hit.passage.text:
        return hit
    return replace(hit, passage=replace(hit.passage, text=text))


def screen_documents(
    store: VectorStore,
    encoder: Any,
    passages: Sequence[Passage],
    vectors: np.ndarray,
    chain: Any,
    k: int = DEFAULT_K,
) -> list[Screened]:
    """Each new passage inside the set a question about it retrieves (module docstring)."""
    if not passages:
        return []
    n_idx = len(store)
    hits = store.search(vectors, min(k, n_idx)) if n_idx else [[] for _ in passages]
    hits = [[_unmarked(h) for h in hit] for hit in hits]
    probes = [probe_question(h[0].passage if h else p) for h, p in zip(hits, passages, strict=True)]
    qv = np.asarray(encoder.encode(probes), dtype=np.float32)
    batch_sim = vectors @ vectors.T
    out = []
    for i, p in enumerate(passages):
        cands: dict[str, tuple[Passage, np.ndarray]] = {p.id: (p, vectors[i])}
        for h in hits[i]:
            emb = h.embedding if h.embedding is not None else encoder.encode([h.passage.text])[0]
            cands[h.id] = (h.passage, np.asarray(emb, dtype=np.float32))
        for j in np.argsort(-batch_sim[i])[: k + 1]:
            if int(j) != i:
                cands[passages[int(j)].id] = (passages[int(j)], vectors[int(j)])
        ranked = sorted(((float(qv[i] @ v), q, v) for q, v in cands.values()), key=lambda t: -t[0])
        scored = ranked[: k + 1]
        if all(q.id != p.id for _, q, _ in scored):  # the document is always in its set
            scored[-1] = (float(qv[i] @ vectors[i]), p, vectors[i])
        retrieved = [RetrievedPassage(q, s, r, v) for r, (s, q, v) in enumerate(scored)]
        result = chain.filter(probes[i], retrieved)
        reasons = _reasons(result, p.id)
        out.append(Screened(p, reasons, tuple(q.id for _, q, _ in scored if q.id != p.id)))
    return out


# ---- the index folder ---------------------------------------------------------------------


def _check_index(path: Path) -> dict[str, Any]:
    """Refuse what ``add`` cannot extend safely, before any work."""
    if not path.is_dir():
        raise InputError(f"index {path} is not a directory (build one with: ragshield index)")
    meta = read_meta(path)
    other = sorted(e.name for e in path.iterdir() if e.name not in INDEX_FILES)
    if other:
        raise InputError(
            f"index {path} holds {', '.join(other[:3])}: add extends plain FAISS/pgvector "
            "indexes only (re-index a RAGFort index after adding to its corpus)"
        )
    if meta.get("store", "faiss") not in ("faiss", "pgvector"):
        raise InputError(f"cannot add to a {meta.get('store')!r} index")
    return meta


def quarantine_list(index: str | os.PathLike[str]) -> list[Quarantined]:
    """The index's quarantined documents (oldest first)."""
    file = Path(index) / QUARANTINE
    if not file.is_file():
        return []
    out = []
    for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                out.append(Quarantined.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                from ragshield.errors import DataFormatError

                raise DataFormatError(file, n, f"unreadable quarantine record ({exc})") from None
    return out


def _write_quarantine(folder: Path, items: Sequence[Quarantined]) -> None:
    if items:
        text = "".join(json.dumps(q.to_dict(), ensure_ascii=False) + "\n" for q in items)
        (folder / QUARANTINE).write_text(text, encoding="utf-8")


def _commit(path: Path, store: VectorStore, quarantine: Sequence[Quarantined]) -> None:
    """Replace the index folder atomically: FAISS files (or the pgvector pointer) and the
    quarantine together."""
    from ragshield.store.faiss_store import FaissStore

    with atomic_dir(path) as tmp:
        if isinstance(store, FaissStore):
            store.write_files(tmp)
        else:  # pgvector: rows are committed; the pointer folder keeps its meta.json
            shutil.copy2(path / "meta.json", tmp / "meta.json")
        _write_quarantine(tmp, quarantine)


def _writable(store: VectorStore) -> VectorStore:
    """A pgvector pointer opens read-only (search); ``add`` and ``release`` write rows."""
    if getattr(store, "read_only", False):
        store.close()  # type: ignore[attr-defined]
        store.read_only = False  # type: ignore[attr-defined]
    return store


def _extend_novelty(store: VectorStore, passages: Sequence[Passage], vectors: np.ndarray) -> None:
    """The index's novelty table grows with the passages it accepted, each judged against
    the index (:meth:`~ragshield.store.calibration_novelty.NoveltyIndex.extended`)."""
    novelty = getattr(store, "novelty", None)
    if novelty is not None:
        store.novelty = novelty.extended(  # type: ignore[attr-defined]
            [p.id for p in passages], [p.text for p in passages], vectors
        )


def _existing_ids(store: VectorStore, ids: Sequence[str]) -> set[str]:
    from ragshield.store.faiss_store import FaissStore

    if isinstance(store, FaissStore):
        have = {p.id for p in store.passages}
        return {i for i in ids if i in have}
    conn = store.connect()  # type: ignore[attr-defined]
    rows = conn.execute(
        f"SELECT id FROM {store.table} WHERE id = ANY(%s)",  # type: ignore[attr-defined]
        (list(ids),),
    ).fetchall()
    conn.commit()
    return {r[0] for r in rows}


def _read_new(new: str | os.PathLike[str] | Sequence[Passage]) -> tuple[list[Passage], str]:
    if isinstance(new, (str, os.PathLike)):
        return read_corpus(Path(new)), str(new)
    passages = list(new)
    if not passages:
        raise InputError("no documents to add")
    if any(not isinstance(p, Passage) for p in passages):
        raise InputError("add_documents takes a corpus path or a list of Passage objects")
    return passages, "api"


# ---- add / release / delete ----------------------------------------------------------------


def add_documents(
    index: str | os.PathLike[str],
    new: str | os.PathLike[str] | Sequence[Passage],
    *,
    source: str | None = None,
    screen: str | None = DEFAULT_SCREEN,
    k: int = DEFAULT_K,
    uri: str | None = None,
    max_chars: int | None = MAX_CHARS,
    encoder: Any = None,
) -> AddReport:
    """Append ``new`` (a corpus file or passages) to ``index`` after screening (see the
    module docstring). ``screen=None`` (or ``"none"``) adds without screening; provenance
    is recorded either way. Bad input — not an index, an unreadable file, an id the index
    (or its quarantine) already holds, an unknown defense — is refused before encoding."""
    from ragshield.defenses.calibration import calibrate
    from ragshield.defenses.registry import build_chain
    from ragshield.indexing import index_text, open_index

    t_all = time.perf_counter()
    timings: dict[str, float] = {}
    path = Path(index)
    _check_index(path)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InputError(f"k must be an int >= 1. Got {k!r} instead.")
    passages, default_source = _read_new(new)
    if max_chars is not None:
        passages = chunk_passages(passages, max_chars)
    spec = (screen or "none").strip() or "none"
    from ragshield.defenses.registry import plan

    p_plan = plan(spec)
    if p_plan.index or p_plan.wrappers:
        raise InputError(f"--screen {spec!r}: screening uses post-retrieval filters only")
    store, enc = open_index(path, uri=uri)
    store = _writable(store)
    enc = encoder or enc
    ids = [p.id for p in passages]
    held = _existing_ids(store, ids) | {q.id for q in quarantine_list(path)} & set(ids)
    if held:
        shown = ", ".join(repr(i) for i in sorted(held)[:5])
        raise InputError(
            f"{len(held)} id(s) already in the index or its quarantine ({shown}); "
            "give new documents new ids"
        )
    added_at = _now()
    src = source or default_source
    passages = with_provenance(passages, src, added_at)
    t0 = time.perf_counter()
    vectors = np.asarray(enc.encode([index_text(p) for p in passages]), dtype=np.float32)
    timings["encode"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    if spec == "none":
        screened = [Screened(p, (), ()) for p in passages]
    else:
        chain = build_chain(spec, enc, SCREEN_PARAMS)
        chain.warm_up()
        calibrate(chain, getattr(store, "profile", None))
        screened = screen_documents(store, enc, passages, vectors, chain, k)
    timings["screen"] = time.perf_counter() - t0
    ok = [i for i, s in enumerate(screened) if not s.flagged]
    flagged = [Quarantined(s.passage, s.reasons, added_at, spec) for s in screened if s.flagged]
    t0 = time.perf_counter()
    if ok:
        store.add([passages[i] for i in ok], vectors[ok])
        _extend_novelty(store, [passages[i] for i in ok], vectors[ok])
    _commit(path, store, [*quarantine_list(path), *flagged])
    timings["write"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_all
    return AddReport(
        str(path),
        src,
        spec,
        tuple(passages[i].id for i in ok),
        tuple(flagged),
        tuple(screened),
        timings,
    )


def _pick(index: Path, ids: Sequence[str]) -> tuple[list[Quarantined], list[Quarantined]]:
    items = quarantine_list(index)
    want = set(ids)
    if not want:
        raise InputError("name the quarantined ids (see: ragshield quarantine list INDEX)")
    missing = sorted(want - {q.id for q in items})
    if missing:
        raise InputError(f"not in the quarantine of {index}: {', '.join(missing[:5])}")
    return [q for q in items if q.id in want], [q for q in items if q.id not in want]


def release(
    index: str | os.PathLike[str], ids: Sequence[str], *, uri: str | None = None
) -> list[str]:
    """Add quarantined documents to the searchable index (the operator's decision: not
    screened again); their provenance records who flagged them and why."""
    from ragshield.indexing import index_text, open_index

    path = Path(index)
    _check_index(path)
    chosen, rest = _pick(path, ids)
    store, enc = open_index(path, uri=uri)
    store = _writable(store)
    released = [
        replace(
            q.passage,
            metadata={**dict(q.passage.metadata), "released_from_quarantine": list(q.reasons)},
        )
        for q in chosen
    ]
    vectors = np.asarray(enc.encode([index_text(p) for p in released]), dtype=np.float32)
    store.add(released, vectors)
    _extend_novelty(store, released, vectors)
    _commit(path, store, rest)
    return [p.id for p in released]


def delete(
    index: str | os.PathLike[str], ids: Sequence[str], *, uri: str | None = None
) -> list[str]:
    """Drop quarantined documents for good (the index itself is untouched)."""
    from ragshield.indexing import open_index

    path = Path(index)
    _check_index(path)
    chosen, rest = _pick(path, ids)
    store, _ = open_index(path, uri=uri)
    _commit(path, store, rest)
    return [q.id for q in chosen]
