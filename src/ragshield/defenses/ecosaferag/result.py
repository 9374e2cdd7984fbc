"""EcoSafeRAG's verdicts turned into a :class:`~ragshield.types.FilterResult`: one
:class:`~ragshield.types.Decision` per removed sentence (with its scores), the kept
sentences re-joined per passage in source order, and the audit ``details``.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from ragshield.defenses.ecosaferag.settings import Clustering, Reading, Screening
from ragshield.defenses.ecosaferag.stages import (
    BAIT,
    COLLATERAL,
    EMPTY,
    KEPT,
    PRUNED,
    Judgement,
    Segmentation,
)
from ragshield.errors import InputError
from ragshield.types import Decision, FilterResult, RetrievedPassage

#: Reason of the one passage-level decision for a passage cut at ``max_chars``.
TRUNCATED = "truncated_over_max_chars"


class EcoSafeRAGLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def reading(self) -> Reading: ...
    @property
    def screening(self) -> Screening: ...
    @property
    def clustering(self) -> Clustering: ...


def assemble(
    f: EcoSafeRAGLike,
    items: list[RetrievedPassage],
    clipped: list[tuple[str, bool]],
    seg: Segmentation,
    sims: np.ndarray,
    cand: np.ndarray,
    retrieval_trick: np.ndarray,
    judged: Judgement,
    labels: np.ndarray,
    variance: np.ndarray,
    theta: float,
    n_baits: int,
    timings: dict[str, float],
    t0: float,
    sentence_scoped: np.ndarray | None = None,
) -> FilterResult:
    """Turn per-candidate verdicts into per-sentence reasons and new passages."""
    n = len(seg.sentences)
    reason = np.full(n, PRUNED, dtype=object)
    suspicion = np.zeros(n, dtype=np.float64)
    cluster = np.full(n, -1, dtype=np.int64)
    reason[cand] = judged.reasons
    flagged_c = judged.reasons != KEPT
    suspicion[cand[flagged_c]] = 0.5 + 0.5 * judged.evidence[flagged_c]
    cluster[cand] = labels[: len(cand)]

    # Whole-passage removal: low diversity / absolute flags always; a bait flag when
    # scope="passage" or when the passage restates the question (it is under scrutiny:
    # an attacker wrote it to be retrieved, so its other sentences are not evidence).
    scrutinised = np.zeros(seg.n_passages, dtype=bool)
    scrutinised[seg.owner[retrieval_trick]] = True
    # ``sentence_scoped`` candidates (a sentence quoting the question inside genuine
    # text: a hijacked page) lose only themselves, like a bait flag.
    own = np.zeros(len(cand), dtype=bool) if sentence_scoped is None else sentence_scoped
    whole = flagged_c & (
        ((judged.reasons != BAIT) & ~own)
        | (f.clustering.scope == "passage")
        | scrutinised[seg.owner[cand]]
    )
    flagged_passages = sorted({int(p) for p in seg.owner[cand[whole]]})
    for p in flagged_passages:
        rows = seg.of(p)
        top = float(suspicion[rows].max())
        spill = rows[reason[rows] == KEPT]
        spill = np.concatenate([spill, rows[reason[rows] == PRUNED]])
        reason[spill] = COLLATERAL
        suspicion[spill] = top

    kept: list[RetrievedPassage] = []
    removed: list[RetrievedPassage] = []
    decisions: list[Decision] = []
    words_before = words_after = 0
    for i, r in enumerate(items):
        rows = seg.of(i)
        words_before += len(clipped[i][0].split())  # what the filter read (max_chars)
        keep_rows = rows[reason[rows] == KEPT]
        for k in rows[reason[rows] != KEPT]:
            decisions.append(
                Decision(
                    index=i,
                    passage_id=r.id,
                    reason=str(reason[k]),
                    unit="sentence",
                    text=seg.sentences[k],
                    scores={
                        "suspicion": float(suspicion[k]),
                        "similarity": float(sims[k]),
                        "theta": theta,
                        "abs_threshold": float(f.screening.abs_threshold),
                        "cluster": float(cluster[k]),
                        "variance": float(variance[i]),
                        "position": float(seg.position[k]),
                    },
                )
            )
        if clipped[i][1]:
            decisions.append(
                Decision(
                    index=i, passage_id=r.id, reason=TRUNCATED, unit="passage",
                    scores={"suspicion": 0.0, "chars": float(len(r.text)),
                            "max_chars": float(f.reading.max_chars)},
                )
            )  # fmt: skip
        if rows.size == 0:
            decisions.append(
                Decision(
                    index=i, passage_id=r.id, reason=EMPTY, unit="passage",
                    scores={"suspicion": 0.0},
                )
            )  # fmt: skip
        if keep_rows.size == 0:
            removed.append(r)
            continue
        unchanged = keep_rows.size == rows.size and not clipped[i][1]
        # a passage left whole reaches the generator as retrieved, not re-joined from its
        # sentences (line breaks and spacing would change, and with them the answers)
        text = r.text if unchanged else " ".join(seg.sentences[k] for k in keep_rows)
        words_after += len(text.split())
        meta = {
            **dict(r.passage.metadata),
            "original_text": r.text,
            "kept_positions": [int(seg.position[k]) for k in keep_rows],
        }
        kept.append(
            RetrievedPassage(
                passage=replace(r.passage, text=text, metadata=meta),
                score=r.score,
                rank=r.rank,
                embedding=r.embedding if unchanged else None,
            )
        )
    details: dict[str, Any] = {
        "theta": theta,
        "max_similarity": float(sims.max()) if sims.size else float("nan"),
        "n_sentences": n,
        "n_candidates": int(cand.size),
        "n_kept_sentences": int(np.sum(reason == KEPT)),
        "n_baits": n_baits,
        "labels": labels[: len(cand)].tolist(),
        "bait_clusters": sorted({int(v) for v in labels[len(cand) :] if v >= 0}),
        "variance": variance.tolist(),
        "flagged_passages": flagged_passages,
        "words_before": words_before,
        "words_after": words_after,
        "timings": timings,
    }
    return FilterResult(
        name=f.name,
        kept=tuple(kept),
        removed=tuple(removed),
        decisions=tuple(decisions),
        details=details,
        seconds=time.perf_counter() - t0,
    )


def checked_text(text: object, what: str) -> str:
    """``text`` when it is a str encodable as UTF-8; else InputError (issue #15: a lone
    surrogate used to surface as a TypeError from the tokenizer)."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be a string. Got {type(text).__name__} instead.")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{what} is not valid Unicode: lone surrogate {text[exc.start]!r} at character "
            f"{exc.start}. Decode the source with errors='replace'."
        ) from exc
    return text
