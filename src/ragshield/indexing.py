"""Build and open persisted indexes (the library calls behind ``ragshield index`` / ``ask``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ragshield.corpus import read_corpus
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.errors import InputError
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage


def build_index(
    passages: list[Passage],
    out: str | Path,
    *,
    encoder: SentenceTransformerEncoder | None = None,
    index_type: Literal["flat", "hnsw", "ivf"] = "flat",
    show_progress: bool = False,
) -> FaissStore:
    """Encode and save; the directory appears only when complete (temp dir + rename)."""
    if not passages:
        raise InputError("cannot index an empty corpus")
    encoder = encoder or SentenceTransformerEncoder()
    vectors = encoder.encode([_index_text(p) for p in passages], show_progress=show_progress)
    store = FaissStore(encoder.dim, index_type, encoder_name=encoder.name)
    store.add(passages, vectors)
    store.save(out)
    return store


def index_corpus(
    corpus: str | Path,
    out: str | Path,
    *,
    text_fields: list[str] | None = None,
    encoder: SentenceTransformerEncoder | None = None,
    index_type: Literal["flat", "hnsw", "ivf"] = "flat",
    show_progress: bool = False,
) -> FaissStore:
    return build_index(
        read_corpus(corpus, text_fields=text_fields),
        out,
        encoder=encoder,
        index_type=index_type,
        show_progress=show_progress,
    )


def _index_text(p: Passage) -> str:
    """Title and text together, as BEIR retrievers embed them."""
    return f"{p.title}. {p.text}" if p.title else p.text


def open_index(
    path: str | Path, encoder_model: str | None = None
) -> tuple[FaissStore, SentenceTransformerEncoder]:
    """Load a store and the encoder it was built with (or an explicit local model)."""
    store = FaissStore.load(path)
    model = encoder_model or store.encoder_name or None
    encoder = SentenceTransformerEncoder(model)
    return store, encoder
