"""The authors' RAGDefender package (``ragdefender`` 0.2.0, MIT, SecAI-Lab) as a defense.

Why here: issue #28 asks every table — the benchmarks *and* ``ragshield scan`` of a user's
own index — to put ragshield's filter beside the paper's algorithm and the authors' own
code, in the same run. With this module, ``--defenses "none;ragdefender-paper;
ragdefender-authors;ragdefender"`` does that in any command, and the benchmarks build the
peer through the same class instead of a private copy.

The package is a peer, not a dependency: it is installed by the ``peers`` extra
(``pip install -e ".[peers]"``; its own requirements — torch, transformers,
sentence-transformers, scikit-learn, pandas — are ones ragshield already has), and naming the
defense without it is a one-line error.

Its embedding calls are answered by the pipeline's encoder (the same MiniLM that built the
index), so it sees the vectors ragshield's filter sees; pass ``model`` (a loaded
``SentenceTransformer``) instead to let it re-encode every passage on every call, as it does
when used alone (that cost is what ``benchmarks/bench_filter.py`` measures). Its algorithm is
not ours to change: see ``../shared/PEERS.md`` for where it differs from the paper.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, ClassVar, Literal

import numpy as np

from ragshield.defenses.base import check_retrieved, passage_vectors
from ragshield.defenses.params import Options, ParamsMixin, ParamTable
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_query
from ragshield.types import Decision, FilterResult, RetrievedPassage

Mode = Literal["single_hop", "multi_hop"]
_MODES = ("single_hop", "multi_hop")


def authors_package_version() -> str | None:
    """The installed ``ragdefender`` version, or ``None`` when the package is absent."""
    # the distribution's metadata, not ``import ragdefender``: a tests/ folder of that name
    # is importable as a namespace package when the real one is absent
    try:
        return version("ragdefender")
    except PackageNotFoundError:
        return None


class _Vectors:
    """The package's ``embedder``: ``encode(R, convert_to_tensor=True)`` answered with the
    vectors of the set being filtered (set per call), else with the encoder's."""

    def __init__(self, encoder: Encoder | None) -> None:
        self.encoder = encoder
        self.current: tuple[list[str], np.ndarray] = ([], np.zeros((0, 0), np.float32))

    def encode(self, texts: Sequence[str], convert_to_tensor: bool = True, **_: Any) -> Any:
        import torch

        known, vectors = self.current
        if list(texts) != known:
            if self.encoder is None:
                raise InputError("ragdefender-authors: texts without vectors and no encoder")
            vectors = self.encoder.encode(list(texts))
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        return torch.from_numpy(vectors) if convert_to_tensor else vectors


class AuthorsRAGDefender(ParamsMixin):
    """The authors' ``ragdefender.RAGDefender`` behind ragshield's ``PassageFilter``.

    Parameters
    ----------
    encoder: used only for passages that carry no embedding (the pipeline passes the
        index's encoder).
    mode: the package's ``task_type``; ``"single_hop"`` is its default, ``"multi_hop"`` the
        paper's choice for HotpotQA (RAGDefender §4, "Adaptive grouping").

    The package returns only which passages it removes, so every decision's suspicion is 1.
    """

    name = "ragdefender-authors"
    _parameter_constraints: ClassVar[ParamTable] = {"mode": [Options(*_MODES)]}

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        mode: Mode = "single_hop",  # the package's default task_type
    ) -> None:
        self.encoder = encoder
        self.mode = mode
        self._upstream: Any = None
        self._package: str | None = None  # its version, read once by warm_up
        self._embedder: Any = None

    @classmethod
    def reencoding(cls, model: Any, mode: Mode = "single_hop") -> AuthorsRAGDefender:
        """The package as used alone: ``model`` (a loaded ``SentenceTransformer``) encodes
        every passage on every call."""
        f = cls(mode=mode)
        f._embedder = model
        return f

    def warm_up(self) -> None:
        """Import the package and build its defender (a one-line error when absent)."""
        self._validate_params()
        if self._upstream is not None and self._upstream.task_type == self.mode:
            return
        installed = authors_package_version()
        if installed is None:
            raise InputError(
                "defense 'ragdefender-authors' needs the authors' package: "
                'pip install -e ".[peers]" (ragdefender 0.2.0)'
            )
        from ragdefender import RAGDefender as Upstream

        self._package = installed
        if self._embedder is None:
            self._embedder = _Vectors(self.encoder)
        self._upstream = Upstream(embedder=self._embedder, task_type=self.mode, device="cpu")

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        t0 = time.perf_counter()
        self.warm_up()
        check_query(query)
        items = check_retrieved(retrieved, "AuthorsRAGDefender", self.encoder)
        details: dict[str, Any] = {"mode": self.mode, "package": self._package}
        gone: set[int] = set()
        if len(items) >= 2:  # its clustering needs two passages
            texts = [r.text for r in items]
            if isinstance(self._embedder, _Vectors):
                vectors = passage_vectors(items, self.encoder, "AuthorsRAGDefender")
                self._embedder.current = (texts, vectors)
            try:
                _, removed = self._upstream.defend(query, texts, return_indices=True)
                gone = {int(i) for i in removed}
            except ValueError as exc:  # e.g. TF-IDF's "empty vocabulary": it cannot judge
                details["not_run"] = str(exc)
        reason = f"flagged by the authors' ragdefender ({self.mode})"
        return FilterResult(
            name=self.name,
            kept=tuple(r for i, r in enumerate(items) if i not in gone),
            removed=tuple(items[i] for i in sorted(gone)),
            decisions=tuple(
                Decision(i, items[i].id, reason, {"suspicion": 1.0}) for i in sorted(gone)
            ),
            details={**details, "removed_indices": sorted(gone)},
            seconds=time.perf_counter() - t0,
        )
