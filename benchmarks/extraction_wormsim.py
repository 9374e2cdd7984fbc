"""The worm's retrieval without the LLM: which chunks its queries are served, to 1,000+ rounds.

Why a module of its own: the worm's live rows cost one LLM answer a round (~5 CPU-s), so
its 1,000-round budget (RAGFort §5.1) does not fit a session; but what stalls it is
retrieval, not copying (``--served-logs``: it copies about half of what it is served, and
after 200 rounds had been served 123 distinct chunks of 500). The chunks a query is served
do not depend on the answer's wording as long as the answer carries them, so a perfect
copier (the retrieved chunks returned as ``[1] text ... [k] text``) drives the worm's own
loop and the served-chunk curve is *measured* to any budget; times the live copy rate it
gives the budget that would reach a CRR. ``bench_extraction.py --worm-sim`` prints it;
with ``--worm-sim-sizes`` it does so per knowledge-base size (the issue's "size the
knowledge base to the attack budget": the size at which a fixed budget is served enough).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from extraction_logs import print_table
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_int
from ragshield.eval.extraction_data import KnowledgeBase, encode_cached

MARKS = (25, 50, 100, 200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000)


def served_by_simulation(
    attack: Any,
    texts: Sequence[str],
    vectors: np.ndarray,
    encoder: Encoder,
    top_k: int = 5,
    progress: Callable[[list[list[int]]], None] | None = None,
) -> list[list[int]]:
    """Run ``attack`` (anything with ``run(ask)``) against an exact inner-product top
    ``top_k`` over ``vectors``, answered by a perfect copier; return the chunk ids each
    query was served, in query order. ``progress`` sees the served lists after each query
    (a long run reports its curve as it goes: a run stopped early still says how far)."""
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    served: list[list[int]] = []

    def ask(query: str) -> str:
        q = np.ascontiguousarray(encoder.encode([query]), dtype=np.float32)
        ids = [int(c) for c in index.search(q, top_k)[1][0] if c >= 0]
        served.append(ids)
        if progress is not None:
            progress(served)
        return "\n".join(f"[{i + 1}] {texts[c]}" for i, c in enumerate(ids))

    attack.run(ask)
    return served


def union_curve(runs: Sequence[Sequence[Sequence[int]]], marks: Sequence[int]) -> list[int]:
    """Distinct chunks served by all ``runs`` together after ``n`` queries of each, per
    mark ``n`` (marks past the shortest run are left out): instances of an attack started
    side by side from different seeds, as one attacker's budget of ``len(runs) * n``."""
    shortest = min((len(r) for r in runs), default=0)
    return [
        len({int(c) for r in runs for ids in r[:n] for c in ids}) for n in marks if n <= shortest
    ]


def worm_sim(
    kb: KnowledgeBase,
    encoder: Encoder,
    cache_dir: Path,
    rounds: int,
    seeds: Sequence[int],
    make_attack: Callable[[int], Any],
    top_k: int = 5,
) -> list[list[list[int]]]:
    """Print the distinct chunks served after each mark, per seed and for the seeds
    together, with each instance's CPU seconds (the collision search's cost); return each
    instance's served lists."""
    check_int(rounds, "rounds", "worm_sim (--worm-sim)", low=1)
    check_int(len(seeds), "seeds", "worm_sim (--worm-sim-seeds)", low=1)
    vectors = encode_cached(kb.texts, encoder, cache_dir)
    texts = list(kb.texts)
    marks = [n for n in MARKS if n <= rounds]
    print(
        f"knowledge base {kb.name}: {len(texts)} chunks; worm simulated without the LLM "
        f"(perfect copier), top {top_k}, {rounds} rounds, seeds {list(seeds)}"
    )
    print_table(
        f"| instance | CPU-s | distinct chunks served after {' / '.join(map(str, marks))} rounds |"
    )
    runs = []
    for seed in seeds:
        t0 = time.process_time()

        def report(served: list[list[int]], seed: int = seed, t0: float = t0) -> None:
            if len(served) in marks:
                n = union_curve([served], [len(served)])[0]
                cpu = time.process_time() - t0
                print(
                    f"  seed {seed}: {n} distinct after {len(served)} rounds, {cpu:.0f} CPU-s",
                    flush=True,
                )

        runs.append(served_by_simulation(make_attack(seed), texts, vectors, encoder, top_k, report))
        row = union_curve(runs[-1:], marks)
        print(f"| seed {seed} | {time.process_time() - t0:.0f} | {' / '.join(map(str, row))} |")
    if len(runs) > 1:
        row = union_curve(runs, marks)
        print(f"| seeds together ({len(runs)} × n rounds) | - | {' / '.join(map(str, row))} |")
    return runs


def parse_sizes(text: str) -> list[int]:
    """``"100,150,200"`` -> ``[100, 150, 200]`` (``--worm-sim-sizes``), refused with a
    clear message unless every entry is a whole number of chunks >= 1."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.removeprefix("-").isdigit() for part in parts):
        raise InputError(
            f"--worm-sim-sizes must be chunk counts separated by commas (e.g. 100,150,200); "
            f"got {text!r}."
        )
    sizes = [int(part) for part in parts]
    for n in sizes:
        check_int(n, "sizes", "worm_sim (--worm-sim-sizes)", low=1)
    return sizes


def estimated_crr(served: int, n_chunks: int, copy_share: float) -> float:
    """CRR if the answers recover ``copy_share`` of the chunks served: an estimate (the
    share is measured on a live run, the served count by the simulation)."""
    return served * copy_share / n_chunks


def size_sweep(
    load: Callable[[int], KnowledgeBase],
    encoder: Encoder,
    cache_dir: Path,
    rounds: int,
    sizes: Sequence[int],
    seed: int,
    make_attack: Callable[[int], Any],
    copy_share: float,
    top_k: int = 5,
) -> None:
    """One worm instance (``seed``) per knowledge-base size (``load(size)``: the seeded
    subset), then a summary: chunks served after ``rounds`` and the CRR they would give at
    ``copy_share`` (the share of served chunks a live run's answers recovered)."""
    check_int(rounds, "rounds", "worm_sim (--worm-sim)", low=1)
    if not 0.0 < copy_share <= 1.0:
        raise InputError(f"--copy-share must be in (0, 1]; got {copy_share!r}.")
    summary = []
    for size in sizes:
        kb = load(size)
        served = worm_sim(kb, encoder, cache_dir, rounds, [seed], make_attack, top_k)[0]
        n_served = union_curve([served], [len(served)])[0]
        n = len(kb.passages)
        summary.append(
            f"| {n} | {n_served} | {n_served / n:.2f} | {estimated_crr(n_served, n, copy_share):.2f} |"
        )
    print_table(
        f"summary, seed {seed}, {rounds} rounds | chunks | distinct served | served share | "
        f"CRR at copy share {copy_share} (an estimate) |",
        summary,
    )
