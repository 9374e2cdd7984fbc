"""The environment every benchmark sets before numpy, torch or a model loads.

Imported for its effect, first among a benchmark's imports (``import bench_env``
followed by ``# isort: split``), so the offline and threading defaults live in one
place instead of a block of ``os.environ.setdefault`` lines in every script. Each
is a default: a variable the caller already set wins.
"""

import os

_DEFAULTS = {
    # OpenMP workers sleep between calls instead of spinning: the machines these run on
    # are shared, and a spinning pool doubles the load without speeding anything.
    "OMP_WAIT_POLICY": "PASSIVE",
    # A benchmark's log is read afterwards; progress bars only clutter it.
    "RAGSHIELD_NO_PROGRESS": "1",
    # Runs offline (the project's rule): models come from wheels or local paths.
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HAYSTACK_TELEMETRY_ENABLED": "False",
}

for _name, _value in _DEFAULTS.items():
    os.environ.setdefault(_name, _value)
