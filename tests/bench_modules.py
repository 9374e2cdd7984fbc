"""A benchmark script loaded as a module, for the tests of its helpers.

Imported as ``from bench_modules import benchmark`` (``tests/`` is on ``sys.path`` for the
root ``conftest.py``, as for ``fakes``). Why one loader: the benchmarks are scripts, not a
package, and each test file loading one repeated the same eight lines.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (loaded once, then reused)."""
    if name in sys.modules:
        return sys.modules[name]
    if str(BENCH_DIR) not in sys.path:  # a benchmark imports its siblings by name
        sys.path.insert(0, str(BENCH_DIR))
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod
