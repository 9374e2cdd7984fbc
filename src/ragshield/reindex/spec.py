"""Reading a re-index's ``ragfort.json``: one module with no heavy imports, so opening an
index (``ragshield.indexing``) can read it without importing the trainer.

Why: a damaged file (a list, ``"query_encoder": 5``, binary junk) was an AttributeError or
TypeError after the index loaded (issue #27, root cause 13); every caller now gets one
:class:`DataFormatError` naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragshield.errors import DataFormatError
from ragshield.textfile import load_json, read_utf8

RAGFORT_FILE = "ragfort.json"
# the fields a reader uses, and their type
_FIELDS: dict[str, type] = {
    "query_encoder": str,
    "index_encoder": str,
    "base_encoder": str,
    "symmetric": bool,
}


def read_spec_file(path: Path) -> dict[str, Any]:
    """The parsed ``ragfort.json`` at ``path``, its fields type-checked."""
    spec = load_json(read_utf8(path, RAGFORT_FILE), path)
    if not isinstance(spec, dict):
        raise DataFormatError(path, None, "expected a JSON object (a damaged re-index?)")
    for key, kind in _FIELDS.items():
        if spec.get(key) is not None and not isinstance(spec[key], kind):
            raise DataFormatError(
                path, None, f"{key!r} must be a {kind.__name__}, got {spec[key]!r:.60}"
            )
    return spec
