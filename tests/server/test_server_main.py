"""``python -m ragshield.server``: the same ``serve`` as the CLI, with its bad-input rule
(one line on stderr, exit 2, nothing started)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_missing_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ragshield.server", "--config", str(tmp_path / "absent.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "absent.yaml" in lines[0]
    assert "Traceback" not in proc.stderr
