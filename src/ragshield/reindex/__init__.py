"""RAGFort inter-class protection: HDBSCAN pseudo-labels + SupCon fine-tuning -> new index.

Example::

    from ragshield.reindex import reindex, load_reindexed
    reindex("kb-index", "kb-index-ragfort", epochs=1, seed=0)   # paper variant: base queries
    store, query_encoder = load_reindexed("kb-index-ragfort")

Names are imported lazily so ``import ragshield.reindex`` does not pull in torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "ReindexResult",
    "TrainResult",
    "load_reindexed",
    "make_batches",
    "pseudo_labels",
    "read_spec",
    "reindex",
    "supcon_loss",
    "train_supcon",
    "training_labels",
]

_LAZY = {
    "pseudo_labels": "ragshield.reindex.labels",
    "training_labels": "ragshield.reindex.labels",
    "supcon_loss": "ragshield.reindex.supcon",
    "make_batches": "ragshield.reindex.supcon",
    "train_supcon": "ragshield.reindex.supcon",
    "TrainResult": "ragshield.reindex.supcon",
    "reindex": "ragshield.reindex.build",
    "load_reindexed": "ragshield.reindex.build",
    "read_spec": "ragshield.reindex.build",
    "ReindexResult": "ragshield.reindex.build",
}

if TYPE_CHECKING:
    from ragshield.reindex.build import ReindexResult, load_reindexed, read_spec, reindex
    from ragshield.reindex.labels import pseudo_labels, training_labels
    from ragshield.reindex.supcon import TrainResult, make_batches, supcon_loss, train_supcon


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ragshield.reindex' has no attribute {name!r}")
