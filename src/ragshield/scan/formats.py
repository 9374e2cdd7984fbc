"""The files ``ragshield scan`` writes, by name: ``--format html,json,jsonl,sarif,junit``.

Example::

    from ragshield.scan.formats import write_formats
    from ragshield.scan.gate import Gate, parse_rules

    paths = write_formats(scan, out_dir, ["json", "sarif"], Gate(parse_rules(["asr>0.1"])))

Why a registry: each CI system reads its own format (GitHub code scanning SARIF, Jenkins
and GitLab JUnit, garak-style JSONL for notebooks, HTML for people); a format is one
function from the scan and its evaluated cells (:mod:`ragshield.scan.gate`) to
bytes, and a new one is one entry in :data:`FORMATS`. Every format carries the same
rates, 95 % intervals (:mod:`ragshield.eval.intervals`) and OWASP/ATLAS tags
(:mod:`ragshield.scan.tags`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragshield.errors import InputError
from ragshield.eval.intervals import METHOD
from ragshield.scan.gate import Cell, Gate, evaluate
from ragshield.scan.tags import tags_for

if TYPE_CHECKING:
    from ragshield.scan.run import ScanResult

DEFAULT_FORMATS: tuple[str, ...] = ("html", "json", "jsonl")


def _version() -> str:
    from ragshield import __version__

    return str(__version__)


def _no_nan(value: Any) -> Any:
    """NaN (a metric with no question to average, e.g. ``caught`` on clean) -> null, so the
    files are strict JSON for any reader."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_no_nan(v) for v in value]
    return value


def _json_data(scan: ScanResult, cells: Sequence[Cell]) -> dict[str, Any]:
    data = scan.to_dict()
    by_key = {(c.setting, c.chain): c for c in cells if not c.attack}
    for row in data["rows"]:  # each row: its intervals and tags beside the means
        c = by_key.get((row["setting"], row["defense"]))
        row["ci95"] = {k: [r.lo, r.hi] for k, r in c.rates.items()} if c else {}
        row["counts"] = {k: r.n for k, r in c.rates.items()} if c else {}
        row.update(tags_for(row["setting"]).to_dict())
    data["interval_method"] = METHOD
    data["cells"] = [c.to_dict() for c in cells]
    return _no_nan(data)


def _html(scan: ScanResult, cells: Sequence[Cell]) -> bytes:
    from ragshield.scan.report import render_report

    return render_report(scan, cells).encode("utf-8")


def _json(scan: ScanResult, cells: Sequence[Cell]) -> bytes:
    return json.dumps(_json_data(scan, cells), indent=2, allow_nan=False).encode("utf-8")


def _jsonl(scan: ScanResult, cells: Sequence[Cell]) -> bytes:
    rows = _json_data(scan, cells)["rows"]
    return "".join(json.dumps(r, allow_nan=False) + "\n" for r in rows).encode("utf-8")


def _sarif(scan: ScanResult, cells: Sequence[Cell]) -> bytes:
    from ragshield.scan.sarif import to_sarif

    log = _no_nan(to_sarif(scan, cells, _version()))
    return json.dumps(log, indent=2, allow_nan=False).encode("utf-8")


def _junit(scan: ScanResult, cells: Sequence[Cell]) -> bytes:
    from ragshield.scan.junit import to_junit

    return to_junit(scan, cells)


Writer = Callable[["ScanResult", Sequence[Cell]], bytes]
#: format name -> (file name, writer); html first: its time is part of results.json
FORMATS: dict[str, tuple[str, Writer]] = {
    "html": ("report.html", _html),
    "json": ("results.json", _json),
    "jsonl": ("results.jsonl", _jsonl),
    "sarif": ("results.sarif", _sarif),
    "junit": ("results.junit.xml", _junit),
}


def parse_formats(
    spec: str | Sequence[str] | None, available: Collection[str] = FORMATS
) -> tuple[str, ...]:
    """``html,sarif`` -> ('html', 'sarif'); unknown names are refused with the list.

    ``available`` is another command's formats (``ragshield add --format``, whose report
    is written by :mod:`ragshield.ingest_report`): one ``--format`` rule for both."""
    if spec is None:
        return DEFAULT_FORMATS
    parts = spec.split(",") if isinstance(spec, str) else list(spec)
    names = tuple(dict.fromkeys(p.strip().lower() for p in parts if p.strip()))
    unknown = [n for n in names if n not in available]
    if unknown or not names:
        raise InputError(
            f"--format: unknown format(s) {', '.join(unknown) or repr(spec)}; "
            f"available: {', '.join(available)}"
        )
    return names


def write_formats(
    scan: ScanResult, out: Path, formats: Sequence[str] = DEFAULT_FORMATS,
    gate: Gate | None = None,
) -> list[Path]:  # fmt: skip
    """Write each format into ``out`` (registry order); returns the paths written."""
    import time

    names = parse_formats(list(formats))
    cells = evaluate(scan, gate)
    written = []
    for name in FORMATS:
        if name not in names:
            continue
        filename, writer = FORMATS[name]
        t0 = time.perf_counter()
        payload = writer(scan, cells)
        if name == "html":
            scan.timings["report"] = scan.timings.get("report", 0.0) + time.perf_counter() - t0
        write_atomic(out / filename, payload)
        written.append(out / filename)
    return written


def write_atomic(path: Path, payload: bytes) -> None:
    """Write beside ``path`` and rename over it: an interrupted or failed write (a full
    disk) leaves the previous file, never a 0-byte one."""
    import os

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(payload)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
