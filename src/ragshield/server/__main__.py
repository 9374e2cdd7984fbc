"""``python -m ragshield.server --config FILE [--host H] [--port P]`` (same as ``ragshield serve``)."""

from __future__ import annotations

import os
import sys

import typer

from ragshield.errors import RagshieldError
from ragshield.server.cli import serve


def main() -> None:
    try:
        typer.run(serve)
    except RagshieldError as exc:
        if os.environ.get("RAGSHIELD_DEBUG"):
            raise
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
