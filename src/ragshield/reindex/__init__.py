"""RAGFort inter-class protection: HDBSCAN pseudo-labels + SupCon fine-tuning -> new index.

Example::

    from ragshield.reindex import reindex, load_reindexed
    reindex("kb-index", "kb-index-ragfort", epochs=1, seed=0)   # paper variant: base queries
    store, query_encoder = load_reindexed("kb-index-ragfort")

Names are imported lazily so ``import ragshield.reindex`` does not pull in torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

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

if TYPE_CHECKING:
    from ragshield.reindex.build import ReindexResult, load_reindexed, read_spec, reindex
    from ragshield.reindex.labels import pseudo_labels, training_labels
    from ragshield.reindex.supcon import TrainResult, make_batches, supcon_loss, train_supcon

# lazy_loader (scientific-python SPEC 1): each name is imported from its module on first use
__getattr__, __dir__, _ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "labels": ["pseudo_labels", "training_labels"],
        "supcon": ["supcon_loss", "make_batches", "train_supcon", "TrainResult"],
        "build": ["reindex", "load_reindexed", "read_spec", "ReindexResult"],
    },
)
