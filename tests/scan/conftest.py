"""The scan tests' shared index: the packaged demo corpus, indexed once per run.

Read-only by contract — a scan works on a copy, and ``test_scan.py`` asserts the folder's
digest is unchanged by a full scan — so every module scans the same folder instead of
encoding the demo corpus again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragshield.cli import run
from ragshield.demo import demo_files


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``ragshield index <demo corpus> --out …/idx``, as a user would build it."""
    out = tmp_path_factory.mktemp("scan-demo") / "idx"
    assert run(["index", str(demo_files()[0]), "--out", str(out)]) == 0
    return out
