"""Reading the small text files a user hands to ragshield (configs, questions, eval data)
so that every way they can be wrong is one :class:`DataFormatError`, never a traceback.

Example::

    from ragshield.textfile import load_json, read_utf8

    data = load_json(read_utf8(path, "questions file"), path)

Why: ``Path.read_text`` raises ``UnicodeDecodeError`` on a Latin-1 file, and the JSON, TOML
and YAML parsers raise ``RecursionError`` on ``[`` x 50,000 and ``ValueError`` on a
100,000-digit integer (Python's int-size guard) — none of them a parse error the callers
caught (issue #27, root causes 11 and 12).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragshield.errors import DataFormatError

# What a parser raises on hostile input beyond its own decode error: nesting deeper than
# the interpreter's recursion limit, an integer longer than sys.get_int_max_str_digits().
HOSTILE = (RecursionError, ValueError, OverflowError, MemoryError)


def hostile_reason(exc: BaseException) -> str:
    """One line for an exception in :data:`HOSTILE`."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    if isinstance(exc, MemoryError):
        return "too large to read"
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def read_utf8(path: str | Path, what: str = "file") -> str:
    """The file's text (UTF-8, a BOM tolerated), or a DataFormatError naming the first
    byte that is not UTF-8 and its line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataFormatError(
            path, None, f"cannot read the {what}: {exc.strerror or exc}"
        ) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataFormatError(
            path,
            line,
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x}); re-encode the {what} as UTF-8",
        ) from None


def load_json(text: str, path: str | Path, line: int | None = None) -> Any:
    """``json.loads`` with every failure a DataFormatError at ``path`` (``line`` for JSONL)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFormatError(path, line or exc.lineno, f"invalid JSON: {exc.msg}") from None
    except HOSTILE as exc:
        raise DataFormatError(path, line, f"invalid JSON: {hostile_reason(exc)}") from None
