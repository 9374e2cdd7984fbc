"""eval/figures: the Agg backend, folders created, the figure closed after saving."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragshield.eval import figures

pytest.importorskip("matplotlib", reason="the 'plots' extra is not installed")


def test_save_creates_folders_writes_a_png_and_closes_the_figure(tmp_path: Path) -> None:
    plt = figures.pyplot()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    out = figures.save(fig, tmp_path / "a" / "b" / "curve.png", dpi=50)
    assert out == tmp_path / "a" / "b" / "curve.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.number not in plt.get_fignums()


def test_pyplot_draws_without_a_display() -> None:
    import matplotlib

    figures.pyplot()
    assert matplotlib.get_backend().lower() == "agg"
