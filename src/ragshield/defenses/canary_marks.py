"""The canary marker's pattern and the output checks' verdict, shared by both checks.

Why a module of its own: the exact checks (:mod:`ragshield.defenses.canary`) and the
semantic check (:mod:`ragshield.defenses.canary_semantic`) both strip markers and both
return a :class:`Leak`; the guard in ``canary`` can run the semantic check, so the shared
part lives here and neither module imports the other's (no import cycle).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

#: ``[ref XXXX-XXXX-XXXX].``: 12 base32 characters = 60 bits from the HMAC. Base32 (A–Z, 2–7)
#: so a tokenizer splits it the same way every time and the model copies it as written; the
#: full stop makes it a sentence of its own, so a generator that answers with one context
#: sentence (the extractive default) never carries it by accident.
CANARY_RE = re.compile(r"\s?\[ref ([A-Z2-7]{4})-([A-Z2-7]{4})-([A-Z2-7]{4})\]\.?")
#: the same marker as a chunk's head (``placement="head"``), with the space after it
_HEAD_RE = re.compile(r"^\[ref [A-Z2-7]{4}-[A-Z2-7]{4}-[A-Z2-7]{4}\]\.?[ \t]*")


def strip_canaries(text: str) -> str:
    """``text`` without any canary marker (what retrieval embeds and a reader sees)."""
    return CANARY_RE.sub("", _HEAD_RE.sub("", text))


@dataclass(frozen=True)
class Leak:
    """What an output check found: which signal, in which contexts, how long a copy."""

    kind: Literal["canary", "verbatim", "breadth", "recovery", "semantic"]
    contexts: tuple[int, ...]
    span_words: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "contexts": list(self.contexts), "span_words": self.span_words}
