"""The novelty table as a product part (:mod:`ragshield.store.calibration_novelty`):
neighbours from the index's own FAISS search give the table the all-pairs loop gave;
``ragshield index`` stores it, ``add`` extends it, every pipeline that opens the index hands
it to RAGDefender; an index built before the table opens with the stage off and says why."""

from __future__ import annotations

import json
import logging
import pickle
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from fakes import WordHashEncoder, near_vector, unit_vector
from ragshield.config import PipelineConfig, build_pipeline
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.errors import DataFormatError
from ragshield.indexing import build_index
from ragshield.ingest import add_documents
from ragshield.store import calibration_novelty as cn
from ragshield.store.calibration_novelty import NOVELTY_FILE, Novelty, NoveltyIndex
from ragshield.store.faiss_store import FaissStore
from ragshield.store.neighbours import knn
from ragshield.store.persist import load_store
from ragshield.types import Passage

VOCAB = [f"w{i}" for i in range(400)]


def _corpus(n: int, seed: int = 0, dim: int = 32) -> tuple[list[str], list[str], np.ndarray]:
    """``n`` passages of 12 words each from a shared vocabulary (some rare, some common),
    with vectors in a few clusters so neighbourhoods overlap."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(VOCAB[: 40 + 9 * i % 360]) for _ in range(12)) for i in range(n)]
    centres = [unit_vector(900 + c, dim) for c in range(4)]
    vectors = np.asarray(
        [near_vector(centres[i % 4], 0.5 + 0.4 * rng.random(), i) for i in range(n)],
        dtype=np.float32,
    )
    return [f"p{i}" for i in range(n)], texts, vectors


def _blockwise_table(ids: list[str], texts: list[str], vectors: np.ndarray) -> dict[str, Novelty]:
    """The table as the all-pairs loop built it before the FAISS search (the reference)."""
    x = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    n = len(ids)
    words = [cn._words(t) for t in texts]
    df = NoveltyIndex(ids, texts, vectors).df
    bar = max(2.0, cn.RARE_SHARE * n)
    rare = [frozenset(w for w in ws if df[w] <= bar) for ws in words]
    bars = (cn.COPY_COSINE, cn.COPY_WORDS, cn.DERIVED_SHARE)
    sim = x @ x.T  # every pair
    np.fill_diagonal(sim, -np.inf)
    top = np.argpartition(-sim, cn.NEIGHBOURS - 1, axis=1)[:, : cn.NEIGHBOURS]
    support = [[j for j in top[i].tolist()
                if cn._lends(words[i], words[j], rare[j], float(sim[i, j]), bars)]
               for i in range(n)]  # fmt: skip
    first = [cn._share(rare[i], words, support[i]) for i in range(n)]
    share = [
        cn._share(rare[i], words, [j for j in support[i] if first[j] >= cn.SOURCE_SHARE])
        for i in range(n)
    ]
    siblings = [cn._siblings(words, i, support[i], cn.SIBLING_WORDS) for i in range(n)]
    return {ids[i]: Novelty(round(share[i], 4), len(rare[i]), siblings[i]) for i in range(n)}


@pytest.mark.parametrize("n", [12, 60])
def test_faiss_neighbours_give_the_blockwise_table(n: int) -> None:
    ids, texts, vectors = _corpus(n)
    store = FaissStore(vectors.shape[1])
    store.add([Passage(i, t) for i, t in zip(ids, texts, strict=True)], vectors)
    reference = _blockwise_table(ids, texts, vectors)
    assert NoveltyIndex(ids, texts, vectors, index=store.neighbour_index()).table == reference
    assert NoveltyIndex(ids, texts, vectors).table == reference  # its own flat index
    assert len({v.share for v in reference.values()}) > 2  # the case is not degenerate
    assert len({v.siblings for v in reference.values()}) > 1


@pytest.mark.parametrize("index", ["flat", None])
def test_knn_never_returns_a_passage_as_its_own_neighbour(index: str | None) -> None:
    x = np.asarray([unit_vector(i, 8) for i in range(6)] * 2, dtype=np.float32)  # twins
    store = FaissStore(8)
    store.add([Passage(f"p{i}", "t") for i in range(12)], x)
    sims, rows = knn(x, 3, store.neighbour_index() if index else None)
    assert rows.shape == (12, 3)
    assert all(i not in rows[i] for i in range(12))
    assert all(rows[i][0] == (i + 6) % 12 for i in range(12))  # the twin comes first
    assert np.all(np.diff(sims, axis=1) <= 1e-6)


def _copying_extended(nov: NoveltyIndex, ids: list[str], texts: list[str],
                      vectors: np.ndarray) -> NoveltyIndex:  # fmt: skip
    """``extended`` as poisoning-9 wrote it (the reference): every table, word count and
    vector copied, one product of the added rows with all of them."""
    new = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    m = len(nov.ids)
    words = [*nov.words, *(cn._words(t) for t in texts)]
    df = nov.df
    for ws in words[m:]:
        df.update(ws)
    bar = max(2.0, nov.rare_share * len(words))
    x = np.vstack([nov.x, new]) if m else new
    rows = list(range(m, len(words)))
    rare = {i: frozenset(w for w in words[i] if df[w] <= bar) for i in rows}
    k = min(nov.neighbours, len(words) - 1)
    sim = new @ x.T
    sim[np.arange(len(rows)), rows] = -np.inf
    top = np.argpartition(-sim, k - 1, axis=1)[:, :k]
    support, first = {}, {}
    for r, i in enumerate(rows):
        support[i] = [j for j in top[r].tolist()
                      if cn._lends(words[i], words[j], rare.get(j) or frozenset(
                          w for w in words[j] if df[w] <= bar), float(sim[r, j]), nov.bars)]  # fmt: skip
        first[i] = cn._share(rare[i], words, support[i])
    added = []
    for i in rows:
        sources = [j for j in support[i]
                   if (first[j] if j >= m else nov.first[j]) >= nov.source_share]  # fmt: skip
        base = [j for j in support[i] if j < m]
        added.append((round(cn._share(rare[i], words, sources), 4), len(rare[i]), first[i],
                      cn._siblings(words, i, base, nov.sibling_words)))  # fmt: skip
    values = np.vstack([nov.values_, np.asarray(added, np.float32).reshape(-1, 4)])
    return NoveltyIndex.restore([*nov.ids, *ids], [*nov._texts, *texts], x, values, **nov.params)


@pytest.mark.parametrize(("n", "added", "seed"), [(35, 5, 0), (60, 1, 1), (60, 12, 2), (8, 4, 3)])
def test_the_overlay_gives_the_values_the_copying_extension_gave(
    n: int, added: int, seed: int
) -> None:
    """``with_added`` reads the index's rows in place and computes only the added ones:
    the same values as poisoning-9's copying ``extended``, pinned on clustered corpora
    (planted passages reusing the index's words, some added near-copies of each other)."""
    ids, texts, vectors = _corpus(n + added, seed)
    base = NoveltyIndex(ids[:n], texts[:n], vectors[:n])
    new_ids, new_texts, new_vectors = ids[n:], texts[n:], vectors[n:].copy()
    if added > 1:  # a pair of added near-twins: they may neighbour each other
        new_vectors[1] = near_vector(new_vectors[0], 0.95, seed)
    reference = _copying_extended(base, new_ids, new_texts, new_vectors)
    before = base.values_.copy()
    overlay = base.with_added(new_ids, new_texts, new_vectors)
    assert overlay == reference.table
    assert np.array_equal(base.extended(new_ids, new_texts, new_vectors).values_,
                          reference.values_)  # fmt: skip
    assert np.array_equal(base.values_, before) and len(base) == n  # the index untouched
    assert len({v.share for k, v in overlay.items() if k in new_ids} | {-1.0}) > 1


def test_tables_pickle_with_their_word_counts() -> None:
    """A benchmark caches the tables of its planted indexes: the index's table and an
    overlay pickle, and answer ``uses`` as before (the counts were a lambda)."""
    ids, texts, vectors = _corpus(40)
    base = NoveltyIndex(ids[:35], texts[:35], vectors[:35])
    words = sorted({w for t in texts for w in cn._words(t)})
    for table in (base.table, base.with_added(ids[35:], texts[35:], vectors[35:])):
        again = pickle.loads(pickle.dumps(table))
        assert again == table and [again.uses(w) for w in words] == [table.uses(w) for w in words]
    overlay = base.with_added(ids[35:], texts[35:], vectors[35:])
    assert any(overlay.uses(w) > base.table.uses(w) for w in words)  # the added ones count


def test_extended_gives_added_passages_what_with_added_gives() -> None:
    ids, texts, vectors = _corpus(40)
    base = NoveltyIndex(ids[:35], texts[:35], vectors[:35])
    ext = base.extended(ids[35:], texts[35:], vectors[35:])
    assert ext.table == base.with_added(ids[35:], texts[35:], vectors[35:])
    assert len(ext) == 40 and {k: ext.table[k] for k in ids[:35]} == base.table
    again = NoveltyIndex.restore(ext.ids, texts, vectors, ext.values_, **ext.params)
    more = again.with_added(["x"], [texts[0]], vectors[:1])  # a restored one extends alike
    assert more == ext.with_added(["x"], [texts[0]], vectors[:1])


CORPUS = [
    Passage(
        f"d{i}",
        f"Passage {i} about topic{i % 4} with word{i} and term{i % 9} plus shared "
        f"vocabulary alpha beta",
        f"T{i}",
    )
    for i in range(30)
]
NEW = [
    Passage(f"n{i}", f"New passage {i} about topic{i % 4} with extra{i} alpha") for i in range(3)
]


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    build_index(CORPUS, tmp_path / "idx", encoder=WordHashEncoder())
    return tmp_path / "idx"


def test_index_add_open_round_trip_keeps_the_table(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = json.loads((index_dir / "meta.json").read_text(encoding="utf-8"))
    assert meta["novelty"]["count"] == 30 and (index_dir / NOVELTY_FILE).is_file()
    built = load_store(index_dir)
    assert isinstance(built, FaissStore) and built.novelty is not None
    monkeypatch.setattr("ragshield.indexing.SentenceTransformerEncoder",
                        lambda *a, **k: WordHashEncoder())  # fmt: skip
    report = add_documents(index_dir, NEW, screen="none", encoder=WordHashEncoder())
    assert report.added == ("n0", "n1", "n2")
    opened = load_store(index_dir)
    assert isinstance(opened, FaissStore) and opened.novelty is not None
    vectors = WordHashEncoder().encode([p.text for p in NEW])
    expected = built.novelty.with_added([p.id for p in NEW], [p.text for p in NEW], vectors)
    assert opened.novelty.table == expected  # the base rows kept, the added ones judged
    assert json.loads((index_dir / "meta.json").read_text("utf-8"))["novelty"]["count"] == 33


def _pipeline(index: Path, monkeypatch: pytest.MonkeyPatch) -> RAGDefender:
    monkeypatch.setattr("ragshield.indexing.SentenceTransformerEncoder",
                        lambda *a, **k: WordHashEncoder())  # fmt: skip
    cfg = PipelineConfig(index=index, defenses={"chain": ["ragdefender"]})
    rag = build_pipeline(cfg, generator=object())  # type: ignore[arg-type]
    (rd,) = [f for f in rag.chain.filters if isinstance(f, RAGDefender)]
    return rd


def test_the_pipeline_hands_the_table_to_ragdefender(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rd = _pipeline(index_dir, monkeypatch)
    assert rd._novelty is not None and set(rd._novelty) == {p.id for p in CORPUS}


def test_an_index_without_the_table_opens_with_the_stage_off(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    meta = json.loads((index_dir / "meta.json").read_text(encoding="utf-8"))
    del meta["novelty"]  # as an index built before the table existed
    (index_dir / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    (index_dir / NOVELTY_FILE).unlink()
    monkeypatch.setattr(cn, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger=cn.__name__):
        rd = _pipeline(index_dir, monkeypatch)
    assert rd._novelty is None
    (line,) = [r.getMessage() for r in caplog.records if r.name == cn.__name__]
    assert "no novelty table" in line and "derivative stage is off" in line
    assert "ragshield index" in line


@pytest.mark.parametrize("damage", ["missing", "short"])
def test_a_damaged_table_is_one_line(index_dir: Path, damage: str) -> None:
    file = index_dir / NOVELTY_FILE
    if damage == "missing":
        file.unlink()
    else:
        np.save(file, np.zeros((3, 3), np.float32))
    with pytest.raises(DataFormatError, match="novelty"):
        load_store(index_dir)


def test_a_copy_of_the_index_keeps_the_table(index_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(index_dir, copy)
    a, b = load_store(index_dir), load_store(copy)
    assert a.novelty is not None and b.novelty is not None  # type: ignore[attr-defined]
    assert a.novelty.table == b.novelty.table  # type: ignore[attr-defined]


class _Recorder:
    """A filter that keeps everything and records the novelty table it was handed."""

    def __init__(self) -> None:
        self.table: dict[str, Novelty] | None = None

    def use_novelty(self, table: dict[str, Novelty] | None) -> None:
        self.table = table

    def filter(self, question: str, retrieved: list[object]) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(kept=list(retrieved))


def _store(n: int = 30) -> tuple[FaissStore, list[str], np.ndarray]:
    ids, texts, vectors = _corpus(n)
    store = FaissStore(vectors.shape[1])
    store.add([Passage(i, t) for i, t in zip(ids, texts, strict=True)], vectors)
    return store, texts, vectors


def test_a_planted_copy_hands_the_table_with_the_plants_added() -> None:
    """The scan and ``eval retrieval`` plant into a copy: the chain reads the index's table
    with the planted passages judged against it, as ``ragshield add`` would add them."""
    from ragshield.eval.real_retrieval import hand_novelty, index_novelty

    store, texts, vectors = _store()
    table = index_novelty(store, True)
    attacked = FaissStore(vectors.shape[1])
    attacked.add(store.passages, vectors)
    attacked.add([Passage("adv0", texts[0]), Passage("adv1", texts[1])], vectors[:2])
    rec = _Recorder()
    hand_novelty([rec, None], table, attacked, len(store))
    expected = table.with_added(["adv0", "adv1"], texts[:2], vectors[:2])
    assert rec.table == expected and len(expected) == 32
    hand_novelty([rec], None, attacked, len(store))  # no table: the stage off
    assert rec.table is None


def test_the_filter_aware_oracle_adds_its_candidates_to_the_table() -> None:
    from ragshield.attacks.filter_aware import ChainOracle

    store, texts, vectors = _store()
    table = index_novelty_of(store)

    class Enc:
        name, dim = "fixed", vectors.shape[1]

        def encode(self, batch: list[str], **_: object) -> np.ndarray:
            return np.stack([vectors[texts.index(t)] if t in texts else vectors[0]
                             for t in batch])  # fmt: skip

    rec = _Recorder()
    oracle = ChainOracle(store, Enc(), rec, k=5, novelty=table)  # type: ignore[arg-type]
    oracle.survivors(texts[3], ["a planted candidate"], ["candidate"])
    assert rec.table is not None and len(rec.table) == 31
    (new,) = set(rec.table) - {p.id for p in store.passages}
    assert new.startswith("fa::")


def index_novelty_of(store: FaissStore) -> NoveltyIndex:
    from ragshield.eval.real_retrieval import index_novelty

    out = index_novelty(store, True)
    assert isinstance(out, NoveltyIndex)
    return out


@pytest.mark.parametrize(("added", "warned"), [(3, False), (12, True)])
def test_opening_an_index_mostly_added_says_so_once(
    index_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    added: int, warned: bool,
) -> None:  # fmt: skip
    """3 of 33 passages added (9 %): silent; 12 of 42 (29 %): one line per index, however
    often it is opened (RAGDefender's scrutiny of added passages costs genuine additions)."""
    from ragshield.defenses.ragdefender import provenance

    monkeypatch.setattr(provenance, "_WARNED", set())
    monkeypatch.setattr("ragshield.indexing.SentenceTransformerEncoder",
                        lambda *a, **k: WordHashEncoder())  # fmt: skip
    docs = [Passage(f"n{i}", f"New passage {i} about topic{i % 4} with extra{i} alpha")
            for i in range(added)]  # fmt: skip
    add_documents(index_dir, docs, screen="none", encoder=WordHashEncoder())
    with caplog.at_level(logging.WARNING):
        _pipeline(index_dir, monkeypatch)
        _pipeline(index_dir, monkeypatch)
    lines = [r.getMessage() for r in caplog.records
             if "came through 'ragshield add'" in r.getMessage()]  # fmt: skip
    assert len(lines) == (1 if warned else 0)
    if warned:
        assert lines[0].startswith("29 % of index")
