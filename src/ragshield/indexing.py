"""Build and open persisted indexes (the library calls behind ``ragshield index`` / ``ask``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ragshield.corpus import MAX_CHARS, chunk_passages, read_corpus
from ragshield.defenses.calibration import profile_index
from ragshield.defenses.canary import MARKER_CHARS
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.errors import InputError
from ragshield.store.base import VectorStore
from ragshield.store.faiss_store import FaissStore
from ragshield.store.persist import check_out_dir, load_store
from ragshield.types import Passage

if TYPE_CHECKING:
    import numpy as np

    from ragshield.embed.base import Encoder

IndexType = Literal["flat", "hnsw", "ivf"]


def build_index(
    passages: list[Passage],
    out: str | Path,
    *,
    encoder: SentenceTransformerEncoder | None = None,
    index_type: IndexType = "flat",
    store_uri: str | None = None,
    table: str = "ragshield_passages",
    show_progress: bool = False,
    ray_address: str | None = None,
    ray_workers: int = 1,
    max_chars: int | None = MAX_CHARS,
    trusted_ids: Collection[str] = (),
    canary_secret: str | None = None,
) -> VectorStore:
    """Encode and save; the directory appears only when complete (temp dir + rename).

    ``trusted_ids`` are the passage ids the *operator* vouches for (RAGDefender never removes
    them); they are recorded in the index metadata, expanded to their chunks. Trust never
    comes from a record's own fields: whoever can add a record could write them.

    ``canary_secret`` embeds each chunk's canary in its *stored* text
    (:func:`ragshield.defenses.canary.embed_canaries`) after the vectors are computed from
    the plain texts, so retrieval never sees it and the ``canary`` defense can catch an
    answer that copies the chunk.

    ``out`` is checked before encoding (it may only be new, empty or an index), so a bad
    target fails in a second, not after an hour of encoding. Passages longer than
    ``max_chars`` characters are split into ``ID#c0``, ``ID#c1`` … chunks
    (:func:`~ragshield.corpus.chunk_passages`); ``None`` keeps them whole.

    With ``store_uri`` (``postgresql://…``) the vectors go to a pgvector table in one
    transaction and ``out`` holds a small pointer to it.
    """
    if not passages:
        raise InputError("cannot index an empty corpus")
    check_out_dir(out, probe=True)
    if max_chars is not None:  # a canary's characters count against the limit
        room = max_chars - (MARKER_CHARS if canary_secret is not None else 0)
        passages = chunk_passages(passages, max(1, room))
    trusted = resolve_trusted(passages, trusted_ids)
    encoder = encoder or SentenceTransformerEncoder()
    texts = [index_text(p) for p in passages]
    if ray_address:
        from ragshield.distributed import ray_encode

        vectors = ray_encode(
            texts, model=str(encoder.path), address=ray_address, workers=ray_workers
        )
    else:
        vectors = encoder.encode(texts, show_progress=show_progress)
    plain = passages  # the statistics read the texts without canaries
    if canary_secret is not None:  # after encoding: the vectors are those of the plain texts
        from ragshield.defenses.canary import embed_canaries

        passages = embed_canaries(passages, canary_secret)
    store: VectorStore
    if store_uri:
        from ragshield.store.pgvector_store import PgVectorStore

        pg = PgVectorStore(store_uri, encoder.dim, table=table, encoder_name=encoder.name)
        pg.add(passages, vectors)
        if index_type != "flat":
            pg.build_index()
        else:
            pg.exact = True
        store = pg
    else:
        store = FaissStore(encoder.dim, index_type, encoder_name=encoder.name)
        store.add(passages, vectors)
    record_statistics(store, plain, vectors, encoder, trusted_ids=trusted)
    store.save(out)
    return store


def record_statistics(
    store: VectorStore,
    passages: Sequence[Passage],
    vectors: np.ndarray,
    encoder: Encoder,
    *,
    trusted_ids: Collection[str] = (),
) -> None:
    """What ``ragshield index`` records about an index beside its vectors: the profile
    (``meta.json`` → ``profile``: nearest-neighbour statistics of ``vectors``, the text
    statistics, the injection thresholds of ``encoder``, the queries' encoder) and, for a
    FAISS store, the novelty table (neighbours from the store's own index).

    ``passages`` are the store's passages with their plain texts (no canary marks; the
    vectors are those of these texts), in the store's order. One helper for
    :func:`build_index` and RAGFort's :func:`~ragshield.reindex.reindex`, so an index and
    its re-index record the same things the same way; a re-index's vector statistics are its
    own because its vectors are re-encoded."""
    texts = [index_text(p) for p in passages]
    profile = profile_index(texts, vectors, encoder, trusted_ids=trusted_ids)
    store.profile = profile  # type: ignore[attr-defined]  # FAISS and pgvector stores have it
    if isinstance(store, FaissStore):  # the novelty table beside the vectors (pgvector: none)
        from ragshield.store.calibration_novelty import store_novelty

        store.novelty = store_novelty(store, [p.text for p in passages])


def resolve_trusted(passages: Sequence[Passage], trusted_ids: Collection[str]) -> tuple[str, ...]:
    """The operator's trusted ids as index passage ids: an id names the passage, or every
    chunk ``ID#cN`` the chunker made of it. An id the corpus lacks is a typo: refused."""
    if not trusted_ids:
        return ()
    by_origin: dict[str, list[str]] = {}
    for p in passages:
        by_origin.setdefault(p.id, []).append(p.id)
        origin = p.metadata.get("chunk_of")
        if isinstance(origin, str) and p.id.startswith(f"{origin}#c"):
            by_origin.setdefault(origin, []).append(p.id)
    missing = sorted(set(trusted_ids) - by_origin.keys())
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5])
        raise InputError(
            f"{len(missing)} trusted id(s) are not in the corpus ({shown}); "
            "list ids exactly as the corpus records them"
        )
    return tuple(sorted({i for t in trusted_ids for i in by_origin[t]}))


def read_trusted_ids(path: str | Path) -> list[str]:
    """One passage id per line (blank lines and ``#`` comments skipped), UTF-8."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read the trusted-ids file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: the trusted-ids file must be UTF-8 text") from None
    return [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]


def index_corpus(
    corpus: str | Path,
    out: str | Path,
    *,
    text_fields: list[str] | None = None,
    encoder: SentenceTransformerEncoder | None = None,
    index_type: IndexType = "flat",
    show_progress: bool = False,
    max_chars: int | None = MAX_CHARS,
) -> VectorStore:
    check_out_dir(out)  # before reading a large corpus, too
    return build_index(
        read_corpus(corpus, text_fields=text_fields),
        out,
        encoder=encoder,
        index_type=index_type,
        show_progress=show_progress,
        max_chars=max_chars,
    )


def canary_secret() -> str:
    """The canary key: ``RAGSHIELD_CANARY_SECRET`` (the same canaries on every re-index),
    else a fresh random one (the codes live in each chunk's ``metadata["canary"]``; the
    output check reads them from the retrieved text, so nothing else needs the key)."""
    import os

    from ragshield.defenses.canary import new_secret

    return os.environ.get("RAGSHIELD_CANARY_SECRET") or new_secret()


def index_text(p: Passage) -> str:
    """Title and text together, as BEIR retrievers embed them."""
    return f"{p.title}. {p.text}" if p.title else p.text


def open_index(
    path: str | Path, encoder_model: str | None = None, *, uri: str | None = None
) -> tuple[VectorStore, SentenceTransformerEncoder]:
    """Load a store and the encoder its queries must use.

    An explicit ``encoder_model`` wins; else a RAGFort re-index (``ragfort.json``) names its
    query encoder; else the encoder recorded at build time.
    """
    path = Path(path)
    store = load_store(path, uri=uri)
    model = encoder_model
    ragfort = path / "ragfort.json"
    if model is None and ragfort.is_file():
        from ragshield.reindex.spec import read_spec_file

        spec = read_spec_file(ragfort)  # a damaged file is one line, not an AttributeError
        q = spec.get("query_encoder")
        if q:  # a folder inside the index, or a model name / absolute path
            model = str(path / q) if (path / q).is_dir() else str(q)
    if model is None:
        model = getattr(store, "encoder_name", "") or None
    return store, SentenceTransformerEncoder(model)
