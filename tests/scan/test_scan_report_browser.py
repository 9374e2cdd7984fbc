"""The scan report as a browser renders it: headless Chromium draws the tables and the SVG
chart, and the screenshot is not blank. Skipped when no Chromium is installed
(Debian/Ubuntu: ``apt-get install -y chromium``)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ragshield.cli import run

CHROMIUM = next(
    (p for n in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(n))), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)"
)
LEGEND_BLUE = (0x00, 0x72, 0xB2)  # second defense's colour in scan_report._COLOURS


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        f"--user-data-dir={tmp / 'profile'}", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory, demo_index: Path) -> Path:
    root = tmp_path_factory.mktemp("scanreport")
    argv = ["scan", str(demo_index), "--generate", "3", "--writer", "template", "--attacks", "clean,poisonedrag,prefix-drop",
            "--defenses", "none;ragdefender", "--out", str(root / "out")]  # fmt: skip
    assert run(argv) == 0
    return root / "out" / "report.html"


def test_rendered_dom_has_tables_and_chart(report: Path, tmp_path: Path) -> None:
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    assert "<svg" in dom and dom.count("<rect") >= 4  # 2 bars + 2 legend squares
    assert dom.count("<table") >= 5  # summary, adaptive, clean, poisonedrag, an example
    assert "Adaptive attacks (an attacker who has read the defense)" in dom
    assert ">prefix-drop<" in dom  # its row in the adaptive table
    assert 'id="recommendation"' in dom and "--filter " in dom
    assert "template questions" in dom


def test_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    from PIL import Image

    png = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,2000", report.as_uri())
    img = np.asarray(Image.open(png).convert("RGB"))
    assert img.shape[:2] == (2000, 1280)
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # text, tables, bars: not one colour
    assert (img.mean(axis=2) < 100).mean() > 0.005  # dark text is drawn
    blue = np.all(img == LEGEND_BLUE, axis=2)
    assert blue.sum() >= 100  # the chart (its legend square at least) is on screen
