"""The throttle re-tuned on both benches' dev halves pooled, reported on both test halves.

Why a module of its own: neither bench alone can show the targets. The SQuAD bench
(``bench_throttle.py``: extractive answers, many cheap sessions, sweeps and seeded attacks
of ``--attack-queries`` each) cannot fire the output checks' leak signal; the ChatDoctor
bench (``throttle_llm.py``: Qwen2.5-0.5B answers, the leak signal as the service gets it)
has few attack sessions, since each costs hundreds of LLM answers. One setting serves
both kinds of deployment, so it is chosen on the two dev halves together and its false
positives and misses are reported on the two test halves with their counts (x of n):
a rate alone hides that one session is 4-20 points.

The grid is ``throttle_llm.LLM_GRID`` or ``--grid`` (novelty window × region limit; the
coverage shares stay at their defaults) with the signatures **off** (the attacker who avoids every known
command); the leak signal is on for the LLM sessions. The choice: fewest pooled dev misses
among the settings with pooled dev FP <= ``FP_TARGET``, as ``bench_throttle.pick``.
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Counts:
    """Flagged normal sessions and missed attack sessions of one group, with their sizes."""

    fp: int
    normal: int
    miss: int
    attacks: int
    missed: tuple[str, ...] = ()  # the missed sessions' kinds

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.fp + other.fp,
            self.normal + other.normal,
            self.miss + other.miss,
            self.attacks + other.attacks,
            self.missed + other.missed,
        )

    def cell(self) -> str:
        """``FP x/n (r %) · miss y/m (s %)``."""
        fp = self.fp / max(1, self.normal)
        miss = self.miss / max(1, self.attacks)
        return (
            f"FP {self.fp}/{self.normal} ({fp:.1%}) · miss {self.miss}/{self.attacks} ({miss:.1%})"
        )


def count(labels: Sequence[str], kinds: Sequence[str], flagged: Sequence[bool]) -> Counts:
    """:class:`Counts` of sessions labelled ``normal`` / anything else and their flags."""
    normal = [f for lab, f in zip(labels, flagged, strict=True) if lab == "normal"]
    attack = [(k, f) for lab, k, f in zip(labels, kinds, flagged, strict=True) if lab != "normal"]
    return Counts(
        sum(normal),
        len(normal),
        sum(not f for _, f in attack),
        len(attack),
        tuple(k for k, f in attack if not f),
    )


def pooled_bench(args: argparse.Namespace) -> None:
    """Both benches' sessions, the grid on pooled dev, both halves printed with counts."""
    from bench_throttle import FP_TARGET, load_sessions, pick, replay, replay_llm, split
    from throttle_llm import LLM_GRID, llm_halves

    t0 = time.perf_counter()
    squad, n_squad = load_sessions(args)
    sq = dict(zip(("dev", "test"), split(squad, args.seed), strict=True))
    llm, n_llm, n_pool = llm_halves(args)

    with tempfile.TemporaryDirectory(prefix="bench-throttle-pooled-") as tmp:
        work = Path(tmp)

        def squad_counts(half: str, over: dict[str, Any]) -> Counts:
            group = sq[half]
            got = [replay(s, over, n_squad, work) is not None for s in group]
            return count([s.label for s in group], [s.kind for s in group], got)

        def llm_counts(half: str, over: dict[str, Any]) -> Counts:
            group = llm[half]
            got = [
                replay_llm(s.queries, s.served, s.leaks, over, n_llm, work, report_leaks=True)
                is not None
                for s in group
            ]
            return count([s.label for s in group], [s.kind for s in group], got)

        grid = {k: tuple(v) for k, v in (args.grid or LLM_GRID).items()}
        no_sig: dict[str, Any] = {"signatures": {}}
        scored = []
        for values in itertools.product(*grid.values()):
            cfg = no_sig | dict(zip(grid, values, strict=True))
            c = squad_counts("dev", cfg) + llm_counts("dev", cfg)
            scored.append((c.fp / max(1, c.normal), c.miss / max(1, c.attacks), cfg))
        best = pick(scored)
        print(
            f"# throttle, both benches pooled — SQuAD ({n_squad} chunks; "
            f"{len(sq['dev'])} dev / {len(sq['test'])} test sessions, cache {args.cache}) + "
            f"ChatDoctor LLM ({n_llm} chunks; {len(llm['dev'])} / {len(llm['test'])} sessions, "
            f"normal ones cut from {n_pool} answered questions); seed {args.seed}; grid "
            f"{grid} on pooled dev, signatures off, leak signal on (fewest misses with FP "
            f"<= {FP_TARGET:.0%}); {time.perf_counter() - t0:.0f} s for the grid"
        )
        print()
        print("| setting | split | SQuAD | ChatDoctor LLM | **pooled** | missed (kinds) |")
        print("|---|---|---|---|---|---|")
        settings = {
            "shipped defaults (signatures on)": {},
            "shipped, signatures off": no_sig,
            "dev choice (signatures off)": best,
        }
        for name, over in settings.items():
            for half in ("dev", "test"):
                a, b = squad_counts(half, over), llm_counts(half, over)
                both = a + b
                print(
                    f"| {name} | {half} | {a.cell()} | {b.cell()} | **{both.cell()}** | "
                    f"{', '.join(both.missed) or '-'} |"
                )
        print()
        print(f"dev choice: {best}; total {time.perf_counter() - t0:.0f} s")
