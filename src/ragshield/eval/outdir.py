"""Report folders the evaluation harnesses may write into: never one ragshield did not write.

Example::

    from ragshield.eval.outdir import claim_out_dir

    out = claim_out_dir("runs/poisoning", "poisoning", {"results.md", "results.json"})
    (out / "results.md").write_text(table)

Why: ``--out`` names a folder and the harness picks the file names inside it
(``results.md``, ``extraction.json``, ...), so pointed at a user's folder it would
silently replace their files of the same name. A folder is ours when it is new, empty,
carries :data:`MARKER` (written on the first claim), or holds only the harness's own file
names (runs written before the marker existed). Anything else is refused with one line
before a single byte is written, so an hours-long run is not started only to fail at the
end. The scan command keeps its own marker (``.ragshield-scan``, :mod:`ragshield.eval.scan`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from ragshield.errors import InputError

MARKER = ".ragshield-eval"


def check_results_dir(out_dir: str | os.PathLike[str], own_names: Collection[str] = ()) -> Path:
    """``out_dir`` as a :class:`Path` if the harness may write there; touches nothing."""
    out = Path(out_dir)
    if not out.exists():
        return out
    if not out.is_dir():
        raise InputError(f"--out {out} is a file; choose a folder (nothing was written).")
    if (out / MARKER).is_file():
        return out
    foreign = sorted(p.name for p in out.iterdir() if p.name not in own_names)
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise InputError(
            f"--out {out} holds files ragshield did not write ({shown}); choose a new or "
            f"empty folder (nothing was written)."
        )
    return out


def claim_out_dir(
    out_dir: str | os.PathLike[str], harness: str, own_names: Collection[str] = ()
) -> Path:
    """Check ``out_dir`` (:func:`check_results_dir`), create it and mark it as ragshield's."""
    out = check_results_dir(out_dir, own_names)
    out.mkdir(parents=True, exist_ok=True)
    marker = out / MARKER
    if not marker.is_file():
        marker.write_text(f"written by ragshield eval {harness}\n", encoding="utf-8")
    return out
