"""Framework-neutral core of the LangChain, LlamaIndex and Haystack adapters.

Example::

    from ragshield.integrations import Shield

    shield = Shield("ragdefender")                      # packaged MiniLM, built on first use
    out = shield.run(question, [doc.text for doc in docs])
    kept = [docs[v.index] for v in out.verdicts if v.kept]
    print(out.verdicts[0].to_metadata())                 # what each adapter writes to metadata

Every adapter is a thin wrapper around :class:`Shield`: it pulls texts (and vectors, when the
framework attached them) out of its own document objects, calls :meth:`Shield.run`, and
writes each :class:`Verdict` back into a *copy* of the document's metadata. Keeping the
logic here means the three adapters cannot drift apart in what they remove or report.

Embedding reuse rule
--------------------
A vector the framework already attached to a document is reused only when the user states
that the framework embedded with the same model as the ragshield encoder:
``embeddings_model_name`` must equal ``encoder.name``, or be a hub id whose last segment
equals it (``"sentence-transformers/all-MiniLM-L6-v2"`` matches ``"all-MiniLM-L6-v2"``), and
the vector must have the encoder's dimension (otherwise :class:`InputError`). Any other
vector is ignored and the text is encoded by the ragshield encoder, because a defense that
compares vectors of two different models compares nothing.

Retrieval scores
----------------
``RetrievedPassage.score`` is recomputed as the cosine between the query and passage vectors,
which is what ragshield's own FAISS retriever returns; defenses that read it (RAGDefender's
``auto`` mode, the query-similarity baseline) then see the same inputs as in
:class:`~ragshield.pipeline.RAGPipeline`, whatever scale the framework's own score uses. The
framework's score on the document is left untouched.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragshield.defenses import registry
from ragshield.defenses.base import PassageFilter
from ragshield.defenses.compose import FilterChain
from ragshield.embed.base import Encoder, l2_normalize
from ragshield.embed.sentence_transformer import DEFAULT_ENCODER, SentenceTransformerEncoder
from ragshield.errors import InputError, RagshieldError, check_query
from ragshield.types import Decision, FilterResult, Passage, RetrievedPassage

DEFAULT_METADATA_KEY = "ragshield"
DEFAULT_DEFENSE = "ragdefender"

DefenseSpec = str | Sequence[str] | PassageFilter
EncoderSpec = Encoder | str | os.PathLike[str] | None


class MissingExtraError(RagshieldError, ImportError):
    """A framework adapter was imported but its framework is not installed."""


def missing_extra(package: str, *, extra: str, framework: str) -> MissingExtraError:
    """The one error an adapter raises when its framework is absent, naming the extra.

    Each adapter module imports its framework at the top, inside ``try``; nothing else in
    ragshield imports an adapter module, so ``import ragshield`` never pays for (or needs)
    any of the frameworks.
    """
    return MissingExtraError(
        f"ragshield's {framework} adapter needs the '{package}' package, which is not "
        f'installed: pip install "ragshield[{extra}]"'
    )


def same_model(framework_model: str | None, encoder_name: str) -> bool:
    """The embedding-reuse rule of this module's docstring (name part only)."""
    if not framework_model:
        return False
    return framework_model == encoder_name or framework_model.rsplit("/", 1)[-1] == encoder_name


@dataclass(frozen=True)
class Verdict:
    """What the defense decided about one framework document, in input order.

    ``text`` is what should reach the LLM (a sentence-level defense's trimmed text, else the
    original); ``stage`` names the defense of a chain that removed or rewrote the document.
    ``suspicion`` follows the project convention (higher = more adversarial) and is ``None``
    when no stage scored the document.
    """

    index: int
    kept: bool
    text: str
    original_text: str
    reason: str
    defense: str
    stage: str | None = None
    suspicion: float | None = None
    scores: Mapping[str, float] = field(default_factory=dict)
    removed_sentences: tuple[Mapping[str, Any], ...] = ()

    @property
    def rewritten(self) -> bool:
        return self.kept and self.text != self.original_text

    def to_metadata(self) -> dict[str, Any]:
        """JSON-safe dict written under the adapter's metadata key.

        Plain ``str``/``float``/``bool``/``list`` only, so LangSmith, LlamaIndex
        instrumentation and Haystack tracing can serialise it as they serialise the rest of
        the metadata. ``original_text`` is present only when the text was rewritten.
        """
        meta: dict[str, Any] = {
            "kept": self.kept,
            "reason": self.reason,
            "defense": self.defense,
            "stage": self.stage,
            "suspicion": self.suspicion,
            "scores": dict(self.scores),
            "rewritten": self.rewritten,
        }
        if self.rewritten:
            meta["original_text"] = self.original_text
        if self.removed_sentences:
            meta["removed_sentences"] = [dict(s) for s in self.removed_sentences]
        return meta


@dataclass(frozen=True)
class ShieldResult:
    """All verdicts of one call plus the defense's own :class:`FilterResult` (its audit)."""

    verdicts: tuple[Verdict, ...]
    result: FilterResult

    @property
    def kept(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.kept]

    @property
    def removed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.kept]


class ShieldParams:
    """The four parameters of :class:`Shield` (documented there) under their own names: a
    class of its own so Haystack's document filter inherits this constructor too (the
    pydantic adapters declare them as fields of ``_pydantic.ShieldModel``)."""

    def __init__(
        self,
        defense: DefenseSpec = DEFAULT_DEFENSE,
        encoder: EncoderSpec = None,
        embeddings_model_name: str | None = None,
        metadata_key: str = DEFAULT_METADATA_KEY,
    ) -> None:
        self.defense = defense
        self.encoder = encoder
        self.embeddings_model_name = embeddings_model_name
        self.metadata_key = metadata_key


class Shield(ShieldParams):
    """Run a ragshield defense over a framework's retrieved texts.

    Parameters
    ----------
    defense: a registry name (``"ragdefender"``), a comma-separated chain
        (``"ragdefender,ecosaferag"``), a list of names, or any filter object (a
        :class:`~ragshield.defenses.compose.FilterChain` included).
    encoder: the ragshield encoder; ``None`` = the packaged all-MiniLM-L6-v2, a string = a
        local sentence-transformers folder. Loaded on first use.
    embeddings_model_name: the model the framework embedded its documents with; vectors it
        attached are reused only when this names the encoder's model (module docstring).
    metadata_key: key under which each adapter writes :meth:`Verdict.to_metadata`.
    """

    # built once by warm_up (learned state ends in "_"); None until then
    encoder_: Encoder | None = None
    filter_: FilterChain | None = None
    _dim: int | None = None

    def warm_up(self) -> None:
        """Build the encoder and the defense once (idempotent); the model loads lazily."""
        if self.filter_ is not None:
            return
        if not isinstance(self.metadata_key, str) or not self.metadata_key:
            raise InputError(
                "The 'metadata_key' parameter of Shield must be a non-empty str. "
                f"Got {self.metadata_key!r} instead."
            )
        if self.embeddings_model_name is not None and not isinstance(
            self.embeddings_model_name, str
        ):
            raise InputError(
                "The 'embeddings_model_name' parameter of Shield must be a str or None. "
                f"Got {self.embeddings_model_name!r} instead."
            )
        encoder = _build_encoder(self.encoder)
        self.encoder_ = encoder
        self.filter_ = _build_filter(self.defense, encoder)

    @classmethod
    def of(cls, component: Any) -> Shield:
        """A Shield from an adapter that keeps the four parameters as its own (serialisable)
        fields: the one place that turns them into the core."""
        c = component
        return cls(c.defense, c.encoder, c.embeddings_model_name, c.metadata_key)

    def load(self) -> None:
        """Build the defense and load the encoder's model now, not on the first query."""
        self.warm_up()
        warm = getattr(self.encoder_, "warm_up", None)
        if callable(warm):
            warm()

    @property
    def reuses_embeddings(self) -> bool:
        """True when framework vectors are trusted (see the module docstring)."""
        self.warm_up()
        assert self.encoder_ is not None
        return same_model(self.embeddings_model_name, self.encoder_.name)

    def run(
        self,
        query: str,
        texts: Sequence[str],
        vectors: Sequence[Any] | None = None,
        *,
        query_vector: Any | None = None,
    ) -> ShieldResult:
        """Filter ``texts`` (one per framework document, in retrieval order).

        ``vectors`` holds the framework's embedding of each text or ``None``; ``query_vector``
        the framework's query embedding. Both are used only under the reuse rule.
        """
        check_query(query)
        texts = _check_texts(texts)
        self.warm_up()
        assert self.encoder_ is not None and self.filter_ is not None
        if vectors is not None and (
            isinstance(vectors, (str, bytes)) or len(vectors) != len(texts)
        ):
            raise InputError(
                f"vectors must hold one entry (or None) per text: got "
                f"{len(vectors) if not isinstance(vectors, (str, bytes)) else 'a string'} "
                f"for {len(texts)} texts."
            )
        checked = [i for i, t in enumerate(texts) if t.strip()]
        items: list[RetrievedPassage] = []
        if checked:
            pv, qv = self._vectors(
                query, [texts[i] for i in checked], vectors, checked, query_vector
            )
            sims = pv @ qv
            items = [
                RetrievedPassage(
                    passage=Passage(id=str(i), text=texts[i]),
                    score=float(sims[row]),
                    rank=row,
                    embedding=pv[row],
                )
                for row, i in enumerate(checked)
            ]
        chain_result = self.filter_.filter(query, items)
        return ShieldResult(
            verdicts=_verdicts(texts, chain_result, self.filter_.name),
            result=chain_result,
        )

    # ------------------------------------------------------------------ internals

    def _vectors(
        self,
        query: str,
        texts: list[str],
        vectors: Sequence[Any] | None,
        positions: list[int],
        query_vector: Any | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Passage and query vectors: reused under the rule, else one batched encode."""
        encoder = self.encoder_
        assert encoder is not None
        reuse = same_model(self.embeddings_model_name, encoder.name)
        if self._dim is None:  # asking some encoders for it costs tens of µs: ask once
            self._dim = int(encoder.dim)
        dim = self._dim
        pv = np.empty((len(texts), dim), dtype=np.float32)
        given = (
            [row for row, i in enumerate(positions) if vectors[i] is not None]
            if reuse and vectors is not None
            else []
        )
        if given:
            assert vectors is not None
            values = [vectors[positions[row]] for row in given]
            pv[given] = _as_matrix(values, dim, positions, given, encoder.name)
        todo = sorted(set(range(len(texts))) - set(given))
        q: np.ndarray | None = None
        if reuse and query_vector is not None:
            q = _as_matrix([query_vector], dim, None, [0], encoder.name)[0]
        batch = [texts[row] for row in todo] + ([query] if q is None else [])
        if batch:
            encoded = encoder.encode(batch)
            pv[todo] = encoded[: len(todo)]
            if q is None:
                q = encoded[-1]
        assert q is not None
        pv = l2_normalize(pv)
        return pv, l2_normalize(q[None, :])[0]


def _build_encoder(spec: EncoderSpec) -> Encoder:
    if spec is None or isinstance(spec, (str, os.PathLike)):
        model = None if spec is None else os.fspath(spec)
        return _shared_encoder(None if model == DEFAULT_ENCODER else model)
    # duck-typed: a runtime Protocol check would evaluate ``dim`` and load the model
    if callable(getattr(spec, "encode", None)) and isinstance(getattr(spec, "name", None), str):
        return spec
    raise InputError(
        "The 'encoder' parameter of Shield must be a ragshield Encoder, a local model path or "
        f"None. Got {type(spec).__name__} instead."
    )


@functools.lru_cache(maxsize=8)
def _shared_encoder(model: str | None) -> Encoder:
    """One encoder per model path in a process: an adapter's embeddings class and its filter
    built with the same (default) spec share the loaded model and its text cache, so the
    filter finds the retriever's texts already encoded."""
    return SentenceTransformerEncoder(model)


def _build_filter(spec: DefenseSpec, encoder: Encoder) -> FilterChain:
    """Names go through the registry, as in every ragshield pipeline
    (:func:`ragshield.config.assemble`); objects are used as given (wrapped in a chain so
    every call reports per-stage results the same way).

    A framework owns its retriever and its LLM, so only post-retrieval filters apply here: a
    name of another kind (``ragfort``: a re-index and a generator cascade) is an error that
    says where it does apply, never a silently undefended adapter.
    """
    if isinstance(spec, FilterChain):
        return spec
    if isinstance(spec, PassageFilter):
        return FilterChain([spec])
    if isinstance(spec, str) or (
        isinstance(spec, Sequence) and all(isinstance(s, str) for s in spec)
    ):
        plan = registry.plan(spec)
        others = [n for n in registry.names(spec) if n not in plan.filters]
        if plan.index is not None or plan.wrappers:
            raise InputError(
                f"{others} act on the index or the generator, which the framework owns; a "
                "framework adapter applies post-retrieval filters only "
                f"({', '.join(registry.available('filter'))}). Use RAGFort through "
                "ragshield's own pipeline (ragshield ask / serve / ragshield.config)."
            )
        return registry.build_chain(list(plan.filters), encoder)
    raise InputError(
        "The 'defense' parameter must be a defense name, a comma-separated chain, a list of "
        f"names or a PassageFilter. Got {type(spec).__name__} instead."
    )


def _check_texts(texts: object) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise InputError("Shield.run expects a list of document texts, got a bare string.")
    try:
        items = list(texts)  # type: ignore[call-overload]
    except TypeError:
        raise InputError(
            f"Shield.run expects a list of document texts. Got {type(texts).__name__} instead."
        ) from None
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InputError(f"document text {i} must be a str. Got {type(t).__name__} instead.")
    return items


def _as_matrix(
    values: list[Any], dim: int, positions: list[int] | None, rows: list[int], encoder_name: str
) -> np.ndarray:
    """Framework vectors (lists or arrays) as one float32 matrix, converted in a single call."""
    try:
        m = np.asarray(values, dtype=np.float32)
    except ValueError:  # ragged: find the odd one out below
        m = np.zeros((0, 0), dtype=np.float32)
    if m.ndim == 2 and m.shape[1] == dim:
        return m
    for row, v in zip(rows, values, strict=True):
        size = np.asarray(v, dtype=np.float32).size
        if size != dim:
            what = "the query" if positions is None else f"document {positions[row]}"
            raise InputError(
                f"{what} carries a {size}-d embedding but the ragshield encoder "
                f"{encoder_name!r} is {dim}-d: embeddings_model_name says they come from the "
                "same model. Fix embeddings_model_name, or unset it to let ragshield re-encode."
            )
    return m.reshape(len(values), dim)


def _stages(result: FilterResult) -> list[FilterResult]:
    stages = result.details.get("stages") if isinstance(result.details, Mapping) else None
    return list(stages) if stages else [result]


def _verdicts(texts: list[str], result: FilterResult, defense: str) -> tuple[Verdict, ...]:
    """Map a chain's per-stage results back onto input positions (passage id = position)."""
    final = {int(r.id): r.text for r in result.kept}
    removed_by: dict[int, str] = {}
    touched_by: dict[int, str] = {}
    decisions: dict[int, list[Decision]] = {}
    for stage in _stages(result):
        for r in stage.removed:
            removed_by.setdefault(int(r.id), stage.name)
        for d in stage.decisions:
            idx = int(d.passage_id)
            decisions.setdefault(idx, []).append(d)
            touched_by.setdefault(idx, stage.name)
    out: list[Verdict] = []
    for i, original in enumerate(texts):
        ds = decisions.get(i)
        if ds is None and final.get(i) is original:  # the common case: untouched and kept
            out.append(Verdict(i, True, original, original, "kept", defense))
            continue
        ds = ds or []
        passage_ds = [d for d in ds if d.unit != "sentence"]
        sentence_ds = [d for d in ds if d.unit == "sentence"]
        scores: dict[str, float] = {}
        for d in passage_ds:
            scores.update({k: float(v) for k, v in d.scores.items()})
        suspicions = [float(d.scores["suspicion"]) for d in ds if "suspicion" in d.scores]
        common: dict[str, Any] = {
            "index": i,
            "original_text": original,
            "defense": defense,
            "suspicion": max(suspicions) if suspicions else None,
            "scores": scores,
            "removed_sentences": tuple(
                {
                    "text": d.text,
                    "reason": d.reason,
                    "scores": {k: float(v) for k, v in d.scores.items()},
                }
                for d in sentence_ds
            ),
        }
        if not original.strip():
            out.append(Verdict(kept=True, text=original, reason="no text to check", **common))
        elif i in final:
            text = final[i]
            if text != original and text.split() == original.split():  # re-joined, same words
                text = original
            if text == original:
                out.append(Verdict(kept=True, text=text, reason="kept", **common))
            else:
                by = touched_by.get(i)
                reason = f"rewritten: {len(sentence_ds)} sentence(s) removed by {by}"
                out.append(Verdict(kept=True, text=text, reason=reason, stage=by, **common))
        else:
            by = removed_by.get(i, defense)
            if passage_ds:
                reason = passage_ds[-1].reason
            elif sentence_ds:  # a sentence-level defense dropped every sentence
                worst = max(sentence_ds, key=lambda d: float(d.scores.get("suspicion", 0.0)))
                reason = f"all {len(sentence_ds)} sentence(s) removed; worst: {worst.reason}"
            else:
                reason = f"removed by {by}"
            out.append(Verdict(kept=False, text=original, reason=reason, stage=by, **common))
    return tuple(out)


def audit_event(out: ShieldResult, ids: Sequence[object]) -> dict[str, Any]:
    """One JSON-safe record of a call, for the framework's event/trace stream.

    Removed documents never reach the framework's output, so this is where a trace shows
    them (with their ids, texts and verdicts).
    """
    return {
        "defense": out.result.name,
        "seconds": float(out.result.seconds),
        "kept": [_id(ids[v.index]) for v in out.kept],
        "removed": [
            {"id": _id(ids[v.index]), "text": v.original_text, **v.to_metadata()}
            for v in out.removed
        ],
        "rewritten": [_id(ids[v.index]) for v in out.kept if v.rewritten],
    }


def _id(value: object) -> str | None:
    return None if value is None else str(value)
