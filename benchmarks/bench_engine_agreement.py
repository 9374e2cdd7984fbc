"""Do the two LLM engines give the same answers? End-to-end accuracy / ASR per backend and
the share of identical answers, on the same retrieval sets.

    nice -n 10 python benchmarks/bench_engine_agreement.py --questions 20
    python benchmarks/bench_engine_agreement.py --model qwen2.5-0.5b --datasets nq hotpotqa \\
        --questions 50 --defenses none ragdefender

For each dataset: the first ``--questions`` questions of the *test* split (odd positions of
``target_queries.json``), one seed, the clean setting and ``--attack`` (default ``mixed``:
PoisonedRAG + blind + GARAG interleaved) at ratio 1, each defense in ``--defenses``. Every
(question, context) the evaluation asks is answered by each backend (greedy, ≤ 32 new
tokens, first line: the bench_e2e settings); ASR = the answer contains the attacker's
target, ACC = it contains the correct answer. Engines (``--backends``): the float32
transformers reference, llama.cpp on the packaged GGUF and llama.cpp on its bf16 widening
(``weights="bf16"``, what ``auto`` picks on an AVX512-BF16 CPU); for each non-reference
engine, the share of prompts whose answer equals the reference's word for word (after
``strip``). Answers are cached on disk per backend
(the cache key includes the backend), so a rerun costs nothing; ``--engine-cache DIR``
gives the non-reference engines a cache of their own (re-measure them, keep the
reference's answers).

``--replay N`` (llama.cpp engines): every distinct prompt asked again through
``generate_many`` with a fresh engine and no answer cache, ``N`` prompts per call, twice:
pass 1 in the order the evaluation asked them (rows batched, the prefix tree, saved KV
states of earlier calls restored where a prompt shares a long head with one), pass 2 in
reverse order in calls of ``N - 1``, where every prompt restores all but its last token
from its own saved state (``state_cache_mb``, on by default). Each pass prints the
prompt tokens restored / computed, its identical-answer share against the reference and
the accuracy / ASR its answers give (the evaluation scored again from them): the scan's
way of asking, checked against the float32 reference. ``--refill`` replays with
continuous batching (a finished row's sequence takes the call's next prompt).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
REFERENCE = "transformers"
#: engine name -> make_generator options; the reference is float32 transformers.
BACKENDS = {
    REFERENCE: {"backend": "transformers", "dtype": "float32"},
    "llama.cpp": {"backend": "llama.cpp", "weights": "packaged"},
    "llama.cpp-bf16": {"backend": "llama.cpp", "weights": "bf16"},
}


class Recording:
    """Pass-through generator that remembers every answer by its exact request."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.answers: dict[tuple[str, tuple[str, ...]], str] = {}
        self.computed_s = 0.0
        self.computed = 0

    def generate(self, question: str, contexts: Sequence[str]) -> Any:
        g = self.inner.generate(question, contexts)
        self.answers[(question, tuple(contexts))] = g.text.strip()
        if g.details.get("cache") == "miss":
            self.computed += 1
            self.computed_s += g.timings.get("prefill", 0.0) + g.timings.get("decode", 0.0)
        return g

    def count_tokens(self, text: str) -> int:
        return int(self.inner.count_tokens(text))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-0.5b")
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--datasets", nargs="+", default=["nq"])
    ap.add_argument("--attack", default="mixed")
    ap.add_argument("--defenses", nargs="+", default=["none", "ragdefender"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cache", type=Path, default=Path("runs/engine-agreement-cache"))
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--engine-cache", type=Path, default=None)
    ap.add_argument("--replay", type=int, default=0, help="prompts per generate_many call")
    ap.add_argument(
        "--refill", action="store_true",
        help="--replay with continuous batching (LlamaEngineOptions.refill): a finished row's "
        "sequence takes the next prompt of the call",
    )  # fmt: skip
    args = ap.parse_args()
    shared = args.data / "poisoning"
    if not shared.is_dir():
        print(f"error: shared data not found at {shared} (pass --data)", file=sys.stderr)
        return 2

    from ragshield.defenses.registry import build_chain
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
    from ragshield.eval.poisoning import run_poisoning_eval
    from ragshield.eval.report import markdown_table
    from ragshield.generate.factory import make_generator

    enc = SentenceTransformerEncoder()
    defenses = {d: (None if d == "none" else build_chain(d, enc)) for d in args.defenses}
    print(
        f"# bench_engine_agreement — {args.model}, backends {', '.join(args.backends)} (transformers "
        f"in float32), {args.threads} thread(s), encoder {enc.name}, seed {args.seed}, test "
        f"split, first {args.questions} questions, clean + {args.attack} at ratio 1, "
        f"defenses {', '.join(args.defenses)}\n"
    )
    for ds in args.datasets:
        recorded: dict[str, Recording] = {}
        for backend in args.backends:
            cache = args.cache if backend == REFERENCE else (args.engine_cache or args.cache)
            inner = make_generator(
                args.model, cache_dir=cache, max_new_tokens=32, threads=args.threads,
                **BACKENDS[backend],
            )  # fmt: skip
            rec = recorded[backend] = Recording(inner)
            t0 = time.perf_counter()
            res = run_poisoning_eval(
                shared / ds, defenses, attacks=[args.attack], ratios=[1], seeds=[args.seed],
                encoder=enc, generator=rec,  # type: ignore[arg-type]
                limit=args.questions, split="test", include_clean=True,
            )  # fmt: skip
            print(f"## {ds} on {backend}")
            print(markdown_table(res, metrics=["asr", "accuracy", "gold_in_context"]))
            per = rec.computed_s / rec.computed if rec.computed else float("nan")
            print(
                f"{len(rec.answers)} distinct prompts answered in {time.perf_counter() - t0:.0f} s; "
                f"{rec.computed} computed now ({per:.2f} s each), the rest from the cache\n"
            )
        if REFERENCE not in recorded:
            continue
        ref = recorded[REFERENCE].answers
        for backend in [b for b in args.backends if b != REFERENCE]:
            fast = recorded[backend].answers
            common = sorted(set(ref) & set(fast))
            same = sum(ref[k] == fast[k] for k in common)
            print(
                f"**{ds}: {backend} gives the reference's answer on {same}/{len(common)} "
                f"prompts ({same / max(len(common), 1):.1%})**"
            )
            for k in [k for k in common if ref[k] != fast[k]][:10]:
                print(f"- {k[0]!r}: transformers {ref[k]!r} / {backend} {fast[k]!r}")
            print()
            if args.replay and BACKENDS[backend].get("backend") == "llama.cpp":
                _replay(args, backend, list(fast), ref, shared / ds, defenses, enc)
    print(f"load avg at the end {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


class Lookup:
    """A generator answering from recorded answers: the evaluation scored again."""

    def __init__(self, name: str, answers: dict[tuple[str, tuple[str, ...]], str]) -> None:
        self.name = name
        self.answers = answers

    def generate(self, question: str, contexts: Sequence[str]) -> Any:
        from ragshield.types import Generation

        return Generation(self.answers[(question, tuple(contexts))])


def _replay(
    args: argparse.Namespace,
    backend: str,
    asked: list[tuple[str, tuple[str, ...]]],
    ref: dict[tuple[str, tuple[str, ...]], str],
    data: Path,
    defenses: dict[str, Any],
    enc: Any,
) -> None:
    """The two ``--replay`` passes of the module docstring for one llama.cpp engine."""
    from ragshield.eval.poisoning import run_poisoning_eval
    from ragshield.eval.report import markdown_table
    from ragshield.generate import counters
    from ragshield.generate.factory import make_generator

    gen = make_generator(  # no answer cache: every prompt runs
        args.model, max_new_tokens=32, threads=args.threads, **BACKENDS[backend],
        **({"refill": True} if args.refill else {}),
    )  # fmt: skip
    n = args.replay
    for label, order, width in (
        ("pass 1, asked order", asked, n),
        ("pass 2, reversed, own states", asked[::-1], max(1, n - 1)),
    ):
        before, t0 = counters.snapshot(), time.perf_counter()
        got: dict[tuple[str, tuple[str, ...]], str] = {}
        for i in range(0, len(order), width):
            chunk = order[i : i + width]
            for k, g in zip(chunk, gen.generate_many(chunk), strict=True):  # type: ignore[attr-defined]
                got[k] = g.text.strip()
        moved = counters.since(before)
        same = sum(got[k] == ref[k] for k in got if k in ref)
        print(
            f"**{backend} replayed ({label}, {width} prompts per call"
            f"{', refilled rows' if args.refill else ''}): the reference's "
            f"answer on {same}/{sum(k in ref for k in got)} prompts**; prompt tokens "
            f"requested {moved.get('requested', 0):,}, computed {moved.get('computed', 0):,}, "
            f"shared {moved.get('shared', 0):,}, restored {moved.get('restored', 0):,}, "
            f"reused {moved.get('reused', 0):,}; {time.perf_counter() - t0:.0f} s"
        )
        for k in [k for k in got if k in ref and got[k] != ref[k]][:10]:
            print(f"- {k[0]!r}: transformers {ref[k]!r} / replayed {got[k]!r}")
        res = run_poisoning_eval(
            data, defenses, attacks=[args.attack], ratios=[1], seeds=[args.seed],
            encoder=enc, generator=Lookup(gen.name, got),  # type: ignore[arg-type]
            limit=args.questions, split="test", include_clean=True,
        )  # fmt: skip
        print(markdown_table(res, metrics=["asr", "accuracy"]) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
