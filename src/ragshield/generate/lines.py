"""Where a one-line answer ends: shared by every generator that stops at a newline.

Why a module of its own: the local model (:mod:`ragshield.generate.local_hf`), its batched
decoder (:mod:`ragshield.generate.batch`) and the OpenAI-compatible client all cut a reply
to its first line; kept here, none of them imports another to reach the rule.
"""

from __future__ import annotations


def answer_line_ended(text: str) -> bool:
    """True once the answer has started and a newline follows it.

    Leading newlines do not count: some models open their turn with a blank line.
    """
    return "\n" in text.lstrip()


def first_line(text: str) -> str:
    """The first non-blank line, stripped (what a newline-stopped answer returns)."""
    stripped = text.strip()
    return stripped.splitlines()[0].strip() if stripped else ""
