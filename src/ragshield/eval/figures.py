"""Figures from the harnesses: matplotlib on its Agg backend, saved and closed in one place.

Why a module: every report that draws (the poisoning ASR plot, the extraction CRR curve,
the benchmarks' figures) needs the same three things — the Agg backend, because these run
on servers and in CI with no display; the output folder created; the figure closed after
saving, because a long benchmark that draws many figures would otherwise keep them all in
memory. matplotlib is the optional ``plots`` extra: :func:`pyplot` raises its
``ImportError`` for the caller to turn into a note.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (raises ``ImportError`` without the extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str | os.PathLike[str], dpi: int) -> Path:
    """Write ``fig`` to ``path`` (folders created), close it, return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out
