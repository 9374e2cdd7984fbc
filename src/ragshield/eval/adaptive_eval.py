"""Every setting of the table, the chain-dependent ones included, on real retrieval.

Example::

    from ragshield.eval.adaptive_eval import run_settings

    res = run_settings(data, cases, {"none": None, "ragdefender": rd},
                       ["clean", "adaptive", "filter-aware:200"], encoder=enc)

Why a layer over :func:`ragshield.eval.real_retrieval.run_real_eval`: most settings plant
the same passages whatever the defense, so one planted copy serves every chain. The
``filter-aware`` setting (:mod:`ragshield.attacks.filter_aware`) cannot: its attacker
searches against *the chain deployed*, so each chain meets the passages that survived it.
Here those settings are searched per chain (through :class:`ChainOracle`, calibrated as
the chain is deployed), the survivors written into a copy of the cases
(``QACase.attack_texts["filter-aware"]``), and the same harness scores them — one executor,
one set of metrics, rows merged in table order. Group names (``adaptive``) and ``all``
expand through :func:`ragshield.attacks.settings.expand`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragshield.attacks.filter_aware import (
    BlackBox,
    ChainOracle,
    FilterAwareAttack,
    SearchResult,
)
from ragshield.attacks.settings import expand, resolve
from ragshield.defenses.base import PassageFilter
from ragshield.embed.base import Encoder
from ragshield.eval.ontopic import OnTopicData, QACase
from ragshield.eval.plant import SEARCHED_KEY, adaptive_target, pick_target
from ragshield.eval.real_retrieval import (
    RealResults,
    build_base_store,
    index_novelty,
    run_real_eval,
)
from ragshield.store.calibration_novelty import NoveltyIndex
from ragshield.store.faiss_store import FaissStore


def search_cases(
    cases: Sequence[QACase],
    store: FaissStore,
    encoder: Encoder,
    chain: PassageFilter | None,
    *,
    budget: int,
    golden_text: Mapping[str, str],
    k: int = 10,
    context_k: int = 5,
    seed: int = 0,
    checkpoints: Sequence[int] = (),
    on_case: Callable[[QACase, SearchResult], None] | None = None,
    novelty: NoveltyIndex | None = None,
    oracle: BlackBox | None = None,
) -> dict[int, list[QACase]]:
    """Per budget (``checkpoints`` + ``budget``): the cases with the filter-aware
    survivors against ``chain`` in ``attack_texts["filter-aware"]``. ``novelty``: the
    index's novelty table (a ``NoveltyIndex``); the attacker's candidates join it on each
    call, as ``ragshield add`` would add them (:class:`ChainOracle`). ``oracle``: another
    black box to search against (e.g. an :class:`~ragshield.attacks.filter_aware.
    IngestOracle`) in place of that ChainOracle."""
    if oracle is None:
        oracle = ChainOracle(store, encoder, chain, k=k, context_k=context_k, novelty=novelty)
    attack = FilterAwareAttack(budget=budget)
    marks = sorted({*checkpoints, budget})
    out: dict[int, list[QACase]] = {m: [] for m in marks}
    for case in cases:
        target = pick_target(case, cases, seed)
        gold = golden_text.get(case.id, "")
        found = attack.search(adaptive_target(case, target, gold), oracle, seed=seed,
                              checkpoints=marks)  # fmt: skip
        if on_case is not None:
            on_case(case, found)
        for m in marks:
            texts = tuple(t.text for t in found.survivors[m])
            out[m].append(
                dataclasses.replace(case, attack_texts={**case.attack_texts, SEARCHED_KEY: texts})
            )
    return out


def run_settings(
    data: OnTopicData,
    cases: Sequence[QACase],
    defenses: Mapping[str, PassageFilter | None],
    settings: Sequence[str],
    *,
    encoder: Encoder,
    k: int = 10,
    context_k: int = 5,
    seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    base_store: FaissStore | None = None,
    calibrate_index: bool = True,
    on_search: Callable[[str, QACase, SearchResult], None] | None = None,
    **kwargs: Any,
) -> RealResults:
    """:func:`run_real_eval` over ``settings`` (groups expanded), the chain-dependent ones
    searched per chain first; ``kwargs`` go to :func:`run_real_eval` (split, generator,
    on_question, show_progress)."""
    names = expand(settings)
    direct = [s for s in names if not resolve(s).needs_chain and s != "extraction"]
    searched = [s for s in names if resolve(s).needs_chain]
    cache = str(cache_dir) if cache_dir else None
    store = base_store or build_base_store(data, encoder, cache)
    if calibrate_index and searched:  # the attacker meets the chain as deployed
        from ragshield.defenses.calibration import calibrate_from

        calibrate_from(defenses.values(), [p.text for p in store.passages], store.vectors, encoder)
    # the index's novelty table, computed once for every run_real_eval call and the oracle
    novelty = index_novelty(store, kwargs.pop("novelty", True))
    common: dict[str, Any] = dict(encoder=encoder, k=k, context_k=context_k, seed=seed,
                                  cache_dir=cache_dir, base_store=store, novelty=novelty,
                                  calibrate_index=calibrate_index, **kwargs)  # fmt: skip
    res = run_real_eval(data, cases, defenses, direct, **common) if direct else None
    rows = list(res.rows) if res else []
    golden = data.golden_text(cases)
    notes: dict[str, Any] = dict(res.notes) if res else {}
    for setting in searched:
        budget = resolve(setting).budget
        for name, chain in defenses.items():
            calls: list[int] = []

            def seen(
                case: QACase, found: SearchResult, s: str = setting, calls: list[int] = calls
            ) -> None:
                calls.append(found.calls)
                if on_search is not None:
                    on_search(s, case, found)

            found = search_cases(
                cases, store, encoder, chain, budget=budget, golden_text=golden, k=k,
                context_k=context_k, seed=seed, on_case=seen, novelty=novelty,
            )[budget]  # fmt: skip
            one = run_real_eval(data, found, {name: chain}, [setting], **common)
            rows += list(one.rows)
            notes.setdefault("filter_aware_calls", {})[f"{setting} / {name}"] = sum(calls) / max(
                len(calls), 1
            )
            if res is None:
                res = one
    if res is None:
        raise ValueError("no setting to run")  # expand() never returns an empty list
    order = {s: i for i, s in enumerate(names)}
    rows.sort(key=lambda r: order.get(r.setting, len(order)))  # stable: chains keep order
    return dataclasses.replace(res, rows=tuple(rows), notes=notes)


def paraphrase_texts(
    cases: Sequence[QACase], writer: Any, *, on_chunk: Callable[[int], None] | None = None
) -> list[QACase]:
    """``cases`` with ``attack_texts["paraphrase"]``: the writer's LLM paraphrase of each
    question, for the opt-in ``prefix-llm`` setting. Replies go through the writer's disk
    cache, written in batches first (:func:`ragshield.attacks.writer.write_in_batches`)."""
    from ragshield.attacks.adaptive import LLMParaphraseAttack
    from ragshield.attacks.writer import write_in_batches

    attack = LLMParaphraseAttack(writer)

    def run() -> list[str]:
        return [attack.paraphrase_of(c.question) for c in cases]

    write_in_batches(writer, run, on_chunk=on_chunk)
    return [
        dataclasses.replace(c, attack_texts={**c.attack_texts, "paraphrase": (p,)})
        for c, p in zip(cases, run(), strict=True)
    ]
