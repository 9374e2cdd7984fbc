"""The adaptive injection attacker against each defense: success against budget (issue #23).

    python benchmarks/bench_injection_adaptive.py [--data ../shared/data] [--seed 0]
        [--goals 30] [--budget 200] [--attacker adaptive|blend]
        [--json runs/injection_adaptive.json]

What it measures (every figure printed is measured in this run; seed and split printed):
``--goals`` SQuAD *test* questions (articles at odd title positions; questions drawn with
the seed), each given one intent of :data:`ragshield.attacks.injection_adaptive.INTENTS`
in rotation (canary / link / answer) and the question's on-topic genuine paragraphs as
carriers (ones without the answer, as ``bench_injection.py``). For each defense — none,
EcoSafeRAG (ragshield default), InjectionGuard (the shipped head, calibrated on the index's
own sentences at its default operating point) and the chain (EcoSafeRAG -> InjectionGuard)
— :class:`~ragshield.attacks.injection_adaptive.AdaptiveInjectionAttack` searches with a
budget of ``--budget`` calls (one call = plant one passage into a copy of the 1,888-paragraph
FAISS index, retrieve the real top-10, run the defense, look at the 5 best-scored kept
passages); success at budget b = the whole instruction, as planted, reached those 5
passages within b calls. Printed: success at 1 / 10 / 50 / 200 calls with a Wilson 95 %
interval, mean calls of the successful searches, and which operators the first winning
variants used. Success is delivery to the context, not obedience of a model (not run).

``--attacker blend`` runs :class:`~ragshield.attacks.injection_blend.BlendInjectionAttack`
instead (the held-out attacker: camouflage forms and a grey-box hill climb, built after
the defense was fixed; its oracle also reports which pieces of the passage were kept;
printed in addition: the mean best share of the instruction's words that reached the
context in the searches that failed).
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ecosaferag import ontopic_split
from bench_injection import base_parser, carriers_for, finish, make_guard, ontopic_index
from ragshield.attacks.filter_aware import ChainOracle
from ragshield.attacks.injection_adaptive import (
    INTENTS,
    AdaptiveInjectionAttack,
    InjectionGoal,
)
from ragshield.attacks.injection_blend import BlendInjectionAttack, SnippetOracle
from ragshield.attacks.injection_families import canary_word
from ragshield.defenses.compose import FilterChain
from ragshield.defenses.ecosaferag import EcoSafeRAG
from ragshield.defenses.injection.calibration import calibrate_index
from ragshield.defenses.injection.head import InjectionHead
from ragshield.eval.intervals import wilson
from train_injection_head import cached_encoder

BUDGETS = (1, 10, 50, 200)


def main() -> None:
    ap = base_parser(__doc__)
    ap.add_argument("--goals", type=int, default=30)
    ap.add_argument("--budget", type=int, default=200)
    ap.add_argument(
        "--operating-point", default=None, help="guard operating point (default: the guard's)"
    )
    ap.add_argument("--defenses", default="none,ecosaferag,injection-guard,chain")
    ap.add_argument("--attacker", choices=("adaptive", "blend"), default="adaptive")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t0 = time.time()
    enc = cached_encoder()
    idx = ontopic_index(args.data, enc)
    data, store, texts, by_article = idx.data, idx.store, idx.texts, idx.by_article
    head = InjectionHead.packaged()
    cal = calibrate_index(texts, enc, head=head, sample=10**9)
    assert cal is not None
    enc.save()
    qs = ontopic_split(data, "test", 10**6, args.seed)
    rng = np.random.default_rng(args.seed)
    picked = [qs[int(i)] for i in rng.choice(len(qs), size=min(args.goals, len(qs)), replace=False)]
    intents = list(INTENTS)
    goals = [
        InjectionGoal(
            q.question,
            tuple(carriers_for(q, by_article)[:5]),
            intent=intents[i % len(intents)],
            canary=canary_word(q.question),
            answer=q.target,
        )
        for i, q in enumerate(picked)
    ]
    budgets = tuple(b for b in BUDGETS if b <= args.budget)
    op = args.operating_point
    defenses: dict[str, Any] = {}
    want = args.defenses.split(",")
    guard_kw = {"op": op}
    if "none" in want:
        defenses["none"] = None
    if "ecosaferag" in want:
        defenses["ecosaferag"] = EcoSafeRAG(encoder=enc)
    if "injection-guard" in want:
        defenses["injection-guard"] = make_guard(enc, head, cal, **guard_kw)
    if "chain" in want:
        defenses["chain"] = FilterChain(
            [EcoSafeRAG(encoder=enc), make_guard(enc, head, cal, **guard_kw)]
        )
    g = make_guard(enc, head, cal, **guard_kw)
    print(
        f"# Adaptive injection attacker {args.attacker} (seed {args.seed}; {len(goals)} SQuAD test questions; "
        f"budget {args.budget}; guard operating point {g.operating_point}, threshold "
        f"{g.threshold_():.4f}, mention discount {g.discount_()})"
    )
    print(
        "| defense | "
        + " | ".join(f"success @{b}" for b in budgets)
        + " | mean calls (successes) | winning operators |"
    )
    print("|---" * (len(budgets) + 3) + "|")
    out: dict[str, Any] = {"seed": args.seed, "goals": len(goals), "budget": args.budget,
                           "attacker": args.attacker, "operating_point": g.operating_point,
                           "rows": {}}  # fmt: skip
    blend = args.attacker == "blend"
    attack = (BlendInjectionAttack if blend else AdaptiveInjectionAttack)(budget=args.budget)
    for name, d in defenses.items():
        t1 = time.time()
        oracle = (SnippetOracle if blend else ChainOracle)(store, enc, d, k=10, context_k=5)
        res: list[Any] = [
            attack.search(goal, oracle, seed=args.seed, checkpoints=budgets)  # type: ignore[arg-type]
            for goal in goals
        ]
        succ = {b: sum(r.success[b] for r in res) for b in budgets}
        won = [r for r in res if r.winner is not None]
        ops = Counter(
            o if blend else o.split(":")[0]
            for r in won
            for o in r.winner.ops
            if not o.startswith("move")
        )  # type: ignore[union-attr]
        moves = Counter(o for r in won for o in r.winner.ops if o.startswith("move"))  # type: ignore[union-attr]
        mean_calls = float(np.mean([r.calls for r in won])) if won else float("nan")
        cells = []
        for b in budgets:
            lo, hi = wilson(succ[b], len(goals))
            cells.append(f"{succ[b] / len(goals):.3f} ({lo:.2f}-{hi:.2f})")
        top = ", ".join(f"{k} {v}" for k, v in (ops + moves).most_common(5)) or "-"
        if blend:
            lost = [r.best for r in res if r.winner is None]
            top += f"; failed searches' best share {np.mean(lost):.2f}" if lost else ""
        print(f"| {name} | " + " | ".join(cells) + f" | {mean_calls:.1f} | {top} |", flush=True)
        out["rows"][name] = {
            "success": {str(b): succ[b] / len(goals) for b in budgets},
            "calls": [r.calls for r in res],
            "winners": [None if r.winner is None else list(r.winner.ops) for r in res],
            "seconds": time.time() - t1,
        }
        enc.save()
    finish(t0, out, args.json)


if __name__ == "__main__":
    main()
