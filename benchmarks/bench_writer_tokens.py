"""How many of the attack-text writer's decoded tokens end up in the texts the attacks keep?

    python benchmarks/bench_writer_tokens.py runs/bs-idle8-base/cache/attack-text

Reads a scan's writer cache (``<out>/cache/attack-text`` of ``bench_scan.py``; every reply
with its token ids) and, per prompt kind, what the attacks keep of each reply: PoisonedRAG
and misleading passages go through :func:`~ragshield.attacks.writer.clean_reply`,
:func:`~ragshield.attacks.writer.drop_unfinished` and a cut at ``2 × words`` words
(:class:`~ragshield.attacks.llm_passages.LLMPassageAttack`), a target answer is the reply's
first line (:class:`~ragshield.attacks.targets.TargetAnswerWriter`). Why: a stop condition
that ends a reply where that cut falls would keep the texts identical by construction and
save the decode steps after it; this measures how many tokens such a rule could save
before anyone builds it. Columns:

* ``after the stop rule``: tokens decoded after the first point where the rule below
  fires; the rule only fires where the kept text can no longer change (passages: the
  cleaned reply holds a sentence end, followed by more text, with more than ``2 × words``
  words before it; targets: the first non-blank line has ended);
* ``after the kept text is fixed``: tokens after the shortest prefix whose kept text is
  already the final one (an upper bound for any rule: it knows where the reply will end,
  e.g. that an unfinished last sentence at the token cap will be dropped).

Counts from the cache, no model run (the GGUF is opened for its tokenizer only).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ragshield.attacks import misleading, poisonedrag
from ragshield.attacks.misleading import MisleadingPassageAttack
from ragshield.attacks.poisonedrag import PoisonedRAGAttack
from ragshield.attacks.targets import _PROMPTS as TARGET_PROMPTS
from ragshield.attacks.targets import _first_answer
from ragshield.attacks.writer import (
    DEFAULT_WRITER_MODEL,
    clean_reply,
    drop_unfinished,
    truncate_words,
)

_SENTENCE_END = re.compile(r"[.!?] (?=\S)")


def _head(template: str) -> str:
    """A prompt template's fixed opening (up to its first placeholder)."""
    return template.split("{", 1)[0]


@dataclass(frozen=True)
class Kind:
    """A writer prompt kind: how its prompts open, what is kept, when the rule stops."""

    name: str
    heads: tuple[str, ...]
    kept: Callable[[str], str]
    done: Callable[[str], bool]


def _passage_kind(name: str, template: str, words: int) -> Kind:
    cut = 2 * words  # LLMPassageAttack: replies are cut at 2 x words

    def kept(raw: str) -> str:
        return truncate_words(drop_unfinished(clean_reply(raw.strip())), cut)

    def done(raw: str) -> bool:
        text = clean_reply(raw.strip())
        if text.startswith("'"):  # clean_reply strips a quote pair only at the end: wait
            return False
        return any(len(text[: m.start() + 1].split()) > cut for m in _SENTENCE_END.finditer(text))

    return Kind(name, (_head(template),), kept, done)


KINDS: tuple[Kind, ...] = (
    _passage_kind("poisonedrag", poisonedrag.PROMPT, PoisonedRAGAttack.default_words),
    _passage_kind("misleading", misleading.PROMPT, MisleadingPassageAttack.default_words),
    Kind(
        "target",
        tuple(_head(p) for p in TARGET_PROMPTS),
        _first_answer,
        lambda raw: "\n" in raw.lstrip(),
    ),
)


def _kind_of(instruction: str) -> Kind | None:
    return next((k for k in KINDS if instruction.startswith(k.heads)), None)


def _instruction(request: dict) -> str:
    """The writer's instruction inside the cached chat prompt (ragfort style)."""
    content = str(request["messages"][-1]["content"])
    return content.split("Question: ", 1)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cache", help="a scan's writer cache folder (<out>/cache/attack-text)")
    args = ap.parse_args()
    files = sorted(Path(args.cache).glob("*/*.json"))
    if not files:
        print(f"error: no cached writer replies under {args.cache}", file=sys.stderr)
        sys.exit(2)
    from ragshield.generate.llama_cpp import LlamaCppGenerator

    detok = LlamaCppGenerator(DEFAULT_WRITER_MODEL, weights="packaged").detokenize
    rows: dict[str, list[int]] = {k.name: [0, 0, 0, 0, 0] for k in KINDS}
    other = 0
    for f in files:
        entry = json.loads(f.read_text())
        kind = _kind_of(_instruction(entry["request"]))
        if kind is None:
            other += 1
            continue
        details = entry["generation"]["details"]
        ids, raw = details["completion_ids"], details["raw"]
        final = kind.kept(raw)
        rule = next((j for j in range(1, len(ids) + 1) if kind.done(detok(ids[:j]))), len(ids))
        if kind.kept(detok(ids[:rule])) != final:  # the rule must keep the same text
            print(f"the stop rule changes a {kind.name} text ({f.name})", file=sys.stderr)
            sys.exit(1)
        fixed = len(ids)
        while fixed > 1 and kind.kept(detok(ids[: fixed - 1])) == final:
            fixed -= 1
        r = rows[kind.name]
        for i, v in enumerate((1, len(ids), details["stop"] != "eos", len(ids) - rule)):
            r[i] += v
        r[4] += len(ids) - fixed
    total = sum(r[1] for r in rows.values())
    print(f"writer cache {args.cache}: {len(files)} replies ({other} of other prompts)\n")
    print("| prompt kind | replies | tokens decoded | at the token cap | after the stop rule "
          "| after the kept text is fixed |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    for name, (n, tokens, capped, after_rule, after_fixed) in rows.items():
        print(f"| {name} | {n} | {tokens:,} | {capped} | {after_rule:,} | {after_fixed:,} |")
    rule_all = sum(r[3] for r in rows.values())
    fixed_all = sum(r[4] for r in rows.values())
    print(f"| **all** | {sum(r[0] for r in rows.values())} | {total:,} | "
          f"{sum(r[2] for r in rows.values())} | {rule_all:,} ({rule_all / max(total, 1):.1%}) "
          f"| {fixed_all:,} ({fixed_all / max(total, 1):.1%}) |")  # fmt: skip


if __name__ == "__main__":
    main()
