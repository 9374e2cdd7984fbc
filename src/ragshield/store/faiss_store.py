"""FAISS, the embedded default store, persisted as plain files in one directory.

Layout of a saved index (no pickle)::

    index.faiss      the FAISS index
    vectors.npy      float32 (n, dim) — defenses reuse these, and HNSW cannot give them back
    passages.jsonl   one Passage per line, row order == vector order
    meta.json        format version, encoder name, dim, index type, count
    novelty.npy      float32 (n, 4): each passage's index-side novelty (when built; meta.json
                     ``novelty`` records it; :mod:`ragshield.store.calibration_novelty`)

Writes go to a sibling temp directory renamed into place, so an interrupted ``save`` never
leaves a half-written index where a good one was.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import faiss
import numpy as np

from ragshield.errors import DataFormatError, InputError, text_problem
from ragshield.store.base import check_batch, check_k, check_queries
from ragshield.store.calibration_novelty import NoveltyIndex, read_novelty, write_novelty
from ragshield.store.persist import atomic_dir, read_meta
from ragshield.types import Passage, RetrievedPassage

IndexType = Literal["flat", "hnsw", "ivf"]
FORMAT_VERSION = 1


class FaissStore:
    """Exact inner-product search by default; ``hnsw`` or ``ivf`` for ≥ 1 M vectors.

    Parameters
    ----------
    dim: vector dimension.
    index_type: ``flat`` (exact), ``hnsw`` (graph, no training) or ``ivf`` (trained on the
        first batch added; needs at least ``nlist`` vectors).
    hnsw_m, ef_construction, ef_search: HNSW graph degree and beam widths (FAISS defaults
        raised for recall ≥ 0.95 at k=10 on 384-d text vectors).
    nlist, nprobe: IVF cells and cells probed per query.
    encoder_name: recorded in ``meta.json`` so the index is not searched with another model.
    """

    def __init__(
        self,
        dim: int,
        index_type: IndexType = "flat",
        *,
        hnsw_m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        nlist: int = 1024,
        nprobe: int = 16,
        encoder_name: str = "",
    ) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise InputError(f"The 'dim' parameter of FaissStore must be an int >= 1. Got {dim!r}.")
        if index_type not in ("flat", "hnsw", "ivf"):
            raise InputError(
                f"The 'index_type' parameter of FaissStore must be one of flat, hnsw, ivf. "
                f"Got {index_type!r} instead."
            )
        self._dim = dim
        self.index_type: IndexType = index_type
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.nlist = nlist
        self.nprobe = nprobe
        self.encoder_name = encoder_name
        self._index = self._new_index()
        self._passages: list[Passage] = []
        self._vectors = np.zeros((0, dim), dtype=np.float32)
        self._ids: set[str] = set()
        #: nearest-neighbour statistics recorded at index time (defenses/calibration.py)
        self.profile: dict[str, Any] | None = None
        #: index-side novelty, row order == vector order (store/calibration_novelty.py)
        self.novelty: NoveltyIndex | None = None

    def _new_index(self) -> Any:
        if self.index_type == "hnsw":
            hnsw = faiss.IndexHNSWFlat(self._dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction = self.ef_construction
            hnsw.hnsw.efSearch = self.ef_search
            return hnsw
        if self.index_type == "ivf":
            quantizer = faiss.IndexFlatIP(self._dim)
            index = faiss.IndexIVFFlat(quantizer, self._dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
            index.nprobe = self.nprobe
            return index
        return faiss.IndexFlatIP(self._dim)

    @property
    def dim(self) -> int:
        return self._dim

    def __len__(self) -> int:
        return len(self._passages)

    @property
    def passages(self) -> list[Passage]:
        return list(self._passages)

    @property
    def vectors(self) -> np.ndarray:
        return self._vectors

    def export(self) -> tuple[list[Passage], np.ndarray]:
        """Every passage and its vector, in insertion order (the same call as every store's)."""
        return self.passages, self.vectors

    def add(self, passages: Sequence[Passage], vectors: np.ndarray) -> None:
        vectors = check_batch(passages, vectors, self._dim)
        new_ids = [p.id for p in passages]
        dupes = (set(new_ids) & self._ids) | {i for i, c in Counter(new_ids).items() if c > 1}
        if dupes:
            raise InputError(f"duplicate passage ids: {sorted(dupes)[:5]}")
        if len(passages) == 0:
            return
        if self.index_type == "ivf" and not self._index.is_trained:
            if vectors.shape[0] < self.nlist:
                raise InputError(
                    f"an IVF index needs at least nlist={self.nlist} vectors to train; got "
                    f"{vectors.shape[0]}. Use index_type='flat' or a smaller nlist."
                )
            self._index.train(vectors)
        self._index.add(vectors)
        self._passages.extend(passages)
        self._ids.update(new_ids)
        self._vectors = np.vstack([self._vectors, vectors]) if len(self._vectors) else vectors

    def search(self, query_vectors: np.ndarray, k: int) -> list[list[RetrievedPassage]]:
        check_k(k, len(self))
        q = check_queries(query_vectors, self._dim)
        scores, idx = self._index.search(q, k)
        out: list[list[RetrievedPassage]] = []
        for row_s, row_i in zip(scores, idx, strict=True):
            hits = [
                RetrievedPassage(self._passages[i], float(s), rank, self._vectors[i])
                for rank, (s, i) in enumerate(
                    (s, i) for s, i in zip(row_s, row_i, strict=True) if i >= 0
                )
            ]
            out.append(hits)
        return out

    # ---- persistence -------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        with atomic_dir(path) as tmp:
            self.write_files(tmp)

    def write_files(self, tmp: Path) -> None:
        """Write the index files into the (temporary) folder ``tmp``; callers rename it into
        place (:func:`~ragshield.store.persist.atomic_dir`), as :meth:`save` and
        :func:`ragshield.ingest.add_documents` do, so a killed write leaves the old index."""
        faiss.write_index(self._index, str(tmp / "index.faiss"))
        np.save(tmp / "vectors.npy", self._vectors)
        with open(tmp / "passages.jsonl", "w", encoding="utf-8") as fh:
            for p in self._passages:
                rec = {
                    "id": p.id,
                    "title": p.title,
                    "text": p.text,
                    "metadata": dict(p.metadata),
                }
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        meta = {
            "format_version": FORMAT_VERSION,
            "store": "faiss",
            "dim": self._dim,
            "index_type": self.index_type,
            "count": len(self),
            "encoder_name": self.encoder_name,
            "hnsw_m": self.hnsw_m,
            "ef_search": self.ef_search,
            "nprobe": self.nprobe,
        }
        if self.profile is not None:
            meta["profile"] = self.profile
        if self.novelty is not None and len(self.novelty) == len(self):
            meta["novelty"] = write_novelty(tmp, self.novelty)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> FaissStore:
        """Open a saved index, checking every file against ``meta.json`` and each other so
        a damaged index fails with one line naming the file, not deep inside FAISS."""
        path = Path(path)
        return cls.from_meta(read_meta(path), path)

    @classmethod
    def from_meta(
        cls, meta: Mapping[str, Any], path: str | Path, uri: str | None = None
    ) -> FaissStore:
        """Open the files of an index directory whose ``meta.json`` is ``meta`` (``uri`` is
        unused: the registry passes it to every store kind)."""
        path = Path(path)
        if meta.get("store", "faiss") != "faiss":
            raise InputError(f"{path} is a {meta['store']} index, not a FAISS one")
        params = _meta_params(dict(meta), path / "meta.json")
        store = cls(meta["dim"], **params)
        store._index = _read_faiss(path / "index.faiss", store.dim, store.index_type)
        if store.index_type == "hnsw":
            store._index.hnsw.efSearch = store.ef_search
        elif store.index_type == "ivf":
            store._index.nprobe = store.nprobe
        store._vectors = _read_vectors(path / "vectors.npy", store.dim)
        store._passages = _read_passages(path / "passages.jsonl")
        store._ids = {p.id for p in store._passages}
        if isinstance(meta.get("profile"), dict):
            store.profile = dict(meta["profile"])
        counts = {
            "index.faiss": int(store._index.ntotal),
            "vectors.npy": len(store._vectors),
            "passages.jsonl": len(store._passages),
        }
        if isinstance(meta.get("count"), int):
            counts["meta.json count"] = meta["count"]
        if len(set(counts.values())) > 1:
            detail = ", ".join(f"{k} {v}" for k, v in counts.items())
            raise DataFormatError(
                path, None, f"index files disagree in count ({detail}); rebuild the index"
            )
        store.novelty = read_novelty(
            path, meta, [p.id for p in store._passages], [p.text for p in store._passages],
            store._vectors,
        )  # fmt: skip
        return store

    def neighbour_index(self) -> Any:
        """The FAISS index itself, for the index-side statistics that search it
        (:func:`ragshield.store.calibration_novelty.knn`)."""
        return self._index


_REBUILD = "rebuild it with 'ragshield index CORPUS --out DIR'"


def _meta_params(meta: dict[str, Any], meta_path: Path) -> dict[str, Any]:
    """Constructor arguments from ``meta.json``, each type-checked (the file is user-editable)."""
    index_type = meta.get("index_type", "flat")
    if index_type not in ("flat", "hnsw", "ivf"):
        raise DataFormatError(
            meta_path, None, f"'index_type' must be flat, hnsw or ivf, got {index_type!r}"
        )
    out: dict[str, Any] = {"index_type": index_type}
    for key, default in (("ef_search", 128), ("nprobe", 16), ("count", 0)):
        value = meta.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DataFormatError(
                meta_path, None, f"{key!r} must be a non-negative integer, got {value!r}"
            )
        if key != "count":
            out[key] = value
    name = meta.get("encoder_name", "")
    if not isinstance(name, str):
        raise DataFormatError(meta_path, None, f"'encoder_name' must be a string, got {name!r}")
    out["encoder_name"] = name
    return out


_FAISS_CLASSES = {"flat": faiss.IndexFlat, "hnsw": faiss.IndexHNSW, "ivf": faiss.IndexIVF}


def _read_faiss(file: Path, dim: int, index_type: str) -> Any:
    if not file.is_file():
        raise DataFormatError(file, None, f"missing; the index is incomplete, {_REBUILD}")
    if file.stat().st_size == 0:
        raise DataFormatError(file, None, f"is empty; {_REBUILD}")
    try:
        index = faiss.read_index(str(file))
    except RuntimeError:  # FAISS reports a bad file as RuntimeError with a C++ trace
        raise DataFormatError(
            file, None, f"not a readable FAISS index (truncated or corrupt); {_REBUILD}"
        ) from None
    if index.d != dim:
        raise DataFormatError(file, None, f"holds {index.d}-d vectors but meta.json says {dim}")
    if not isinstance(index, _FAISS_CLASSES[index_type]):
        raise DataFormatError(
            file, None, f"holds a {type(index).__name__} but meta.json says {index_type!r}"
        )
    return index


def _read_vectors(file: Path, dim: int) -> np.ndarray:
    if not file.is_file():
        raise DataFormatError(file, None, f"missing; the index is incomplete, {_REBUILD}")
    try:
        vectors = np.load(file, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise DataFormatError(
            file, None, f"not a readable .npy array (truncated or corrupt: {exc}); {_REBUILD}"
        ) from None
    if vectors.ndim != 2 or vectors.shape[1] != dim or vectors.dtype != np.float32:
        raise DataFormatError(
            file,
            None,
            f"holds a {vectors.dtype} array of shape {vectors.shape}; expected float32 "
            f"(n, {dim}) as meta.json says",
        )
    return vectors


def _read_passages(file: Path) -> list[Passage]:
    if not file.is_file():
        raise DataFormatError(file, None, f"missing; the index is incomplete, {_REBUILD}")
    passages: list[Passage] = []
    seen: set[str] = set()
    with open(file, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise DataFormatError(
                    file, n, f"not valid UTF-8 (byte 0x{raw[exc.start]:02x})"
                ) from None
            except json.JSONDecodeError as exc:
                raise DataFormatError(file, n, f"malformed JSON ({exc.msg})") from None
            except (RecursionError, ValueError) as exc:  # nested too deeply, huge numbers
                raise DataFormatError(
                    file, n, f"unreadable record ({type(exc).__name__})"
                ) from None
            if not isinstance(rec, dict):
                raise DataFormatError(file, n, f"expected a JSON object, got {type(rec).__name__}")
            for key, required in (("id", True), ("text", True), ("title", False)):
                if key not in rec and not required:
                    continue
                problem = text_problem(rec.get(key), allow_blank=key != "id")
                if problem is not None:
                    what = "missing" if key not in rec else problem
                    raise DataFormatError(file, n, f"record field {key!r} {what}")
            meta = rec.get("metadata", {})
            if not isinstance(meta, dict):
                raise DataFormatError(file, n, "record field 'metadata' is not an object")
            if rec["id"] in seen:
                raise DataFormatError(file, n, f"duplicate passage id {rec['id']!r}")
            seen.add(rec["id"])
            passages.append(Passage(rec["id"], rec["text"], rec.get("title", ""), meta))
    return passages
