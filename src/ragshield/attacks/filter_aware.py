"""A filter-aware attacker: black-box search against the deployed defense chain (issue #28).

Example::

    from ragshield.attacks.adaptive import AttackTarget
    from ragshield.attacks.filter_aware import ChainOracle, FilterAwareAttack

    oracle = ChainOracle(store, encoder, chain, k=10, context_k=5)   # a copy is never built
    found = FilterAwareAttack(budget=50).search(target, oracle, seed=0, checkpoints=(10, 50))
    found.survivors[50]            # the texts planted with 50 calls: only ones that survived

The attacker of Carlini et al. 2019 / Tramèr et al. 2020, with black-box access only: it
may plant a candidate set of passages into a copy of the index, ask the target question,
and observe which of its passages reached the generator's context (survived the chain and
ranked in the ``context_k`` nearest). Each such observation is one *call*; the budget is
calls per target (issue #28: 10 / 50 / 200). The search:

1. candidates come from the adaptive generators (:mod:`ragshield.attacks.adaptive`) with
   several seeds — a pool of distinct passages, each with its family;
2. each family's own set of ``n`` passages is tried once (families in a seeded order);
3. what it plants must itself survive: when only some passages of a set survived, the
   survivors alone are planted and observed next (removing a passage can change what a
   group-based filter does with the rest);
4. then (1+1) hill climbing from the largest set seen with *every* member in the context:
   add a pool passage (below ``n``) or swap one, preferring the families that survived; a
   child is kept when all of it survives and it is at least as large (ties move, so the
   search drifts on plateaus);
5. it stops when ``n`` passages survive together or the budget is spent. The planted set
   for a budget is the best all-surviving set observed within that many calls
   (``checkpoints`` snapshot it after 10 / 50 / ... calls, so one search gives the whole
   budget curve); nothing is planted for a target where nothing ever survived.

:class:`ChainOracle` answers a call exactly as planting into a copy would, without copying
the index: the top-k of (index + candidates) under exact inner product is the merge of the
index's own top-k and the candidates' scores. Other targets' planted passages are not in
the attacker's copy (it tests one target at a time).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ragshield.attacks.adaptive import AdaptiveText, AttackTarget
from ragshield.embed.base import Encoder
from ragshield.errors import InputError, check_int, check_names
from ragshield.text import contains_answer
from ragshield.types import Passage, RetrievedPassage

if TYPE_CHECKING:
    from ragshield.store.calibration_novelty import NoveltyIndex

#: Families the search draws from (every rule-based adaptive attack; no model needed).
FAMILIES: tuple[str, ...] = (
    "prefix-statement", "prefix-drop", "prefix-synonym", "prefix-reorder", "prefix-typo",
    "question-middle", "question-end", "no-question", "answer-spread", "facet-spread",
    "near-duplicate", "excerpt-edit", "meta-epistemic", "meta-epistemic-long",
    "meta-epistemic-own", "meta-epistemic-named", "meta-epistemic-borrowed",
)  # fmt: skip


#: When a benchmark's planted passages entered the index, stamped as ``ragshield add`` stamps
#: what it appends (:func:`ragshield.ingest.with_provenance`): fixed so a run repeats, and
#: after every index the benchmarks build (whose own passages carry no ``added_at``).
PLANTED_AT = "2026-01-01T00:00:00Z"


def as_added(passages: Sequence[Passage], source: str, provenance: bool = True) -> list[Passage]:
    """``passages`` as ``ragshield add`` would hold them (``source``, ``added_at`` =
    :data:`PLANTED_AT`); ``provenance=False``: as given (an index that records none)."""
    if not provenance:
        return list(passages)
    from ragshield.ingest import with_provenance

    return with_provenance(passages, source, PLANTED_AT)


def planted_id(text: str) -> str:
    """The id a candidate passage is planted under (stable across calls: one per text)."""
    return "fa::" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


class BlackBox(Protocol):
    """One call: which of ``texts`` (planted together) reach the context for ``question``,
    each with ``payload`` still in its kept text."""

    def survivors(
        self, question: str, texts: Sequence[str], payloads: Sequence[str]
    ) -> list[bool]: ...


class ChainOracle:
    """The deployed chain as a black box over an index (see the module docstring).

    Parameters
    ----------
    store: the index (any object with ``search(vectors, k)``; FAISS exact inner product).
    encoder: the index's encoder (candidates are embedded as ``planted_copy`` does).
    chain: a PassageFilter (``None`` = no defense), already calibrated as deployed.
    k / context_k: retrieved passages and the survivors a generator reads (ragshield's
        defaults: 10 and 5).
    novelty: the index's novelty table (a ``NoveltyIndex``, as ``ragshield index`` stores
        it); each call's candidates join it (``with_added``, as ``ragshield add`` would add
        them) before the chain reads it. ``None``: the chain gets no table.
    provenance: candidates carry the metadata ``ragshield add`` stamps (:func:`as_added`),
        as they would in a managed index; ``False``: none (an index that records none).
    """

    def __init__(
        self, store: object, encoder: Encoder, chain: object | None, *, k: int = 10,
        context_k: int = 5, novelty: NoveltyIndex | None = None, provenance: bool = True,
    ) -> None:  # fmt: skip
        self.novelty = novelty
        self.provenance = provenance
        self.store = store
        self.encoder = encoder
        self.chain = chain
        self.k = k
        self.context_k = context_k
        self.calls = 0
        self._vec: dict[str, np.ndarray] = {}
        self._base: dict[str, tuple[np.ndarray, list[RetrievedPassage]]] = {}

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._vec]
        if todo:
            for t, v in zip(todo, np.asarray(self.encoder.encode(todo)), strict=True):
                self._vec[t] = v.astype(np.float32)
        return np.stack([self._vec[t] for t in texts])

    def _question(self, question: str) -> tuple[np.ndarray, list[RetrievedPassage]]:
        if question not in self._base:
            qv = np.asarray(self.encoder.encode([question]), dtype=np.float32)
            n = min(self.k, len(self.store))  # type: ignore[arg-type]
            hits = self.store.search(qv, n)[0]  # type: ignore[attr-defined]
            self._base[question] = (qv[0], hits)
        return self._base[question]

    def retrieve(self, question: str, texts: Sequence[str]) -> list[RetrievedPassage]:
        """The top-k for ``question`` of the index with ``texts`` planted (exact merge)."""
        qv, hits = self._question(question)
        cands: list[RetrievedPassage] = []
        if texts:
            vecs = self._vectors(texts)
            docs = as_added([Passage(planted_id(t), t) for t in texts], "attacker", self.provenance)
            for d, v, s in zip(docs, vecs, vecs @ qv, strict=True):
                cands.append(RetrievedPassage(d, float(s), 0, v))
        merged = sorted([*hits, *cands], key=lambda r: -r.score)[: self.k]
        return [RetrievedPassage(r.passage, r.score, i, r.embedding) for i, r in enumerate(merged)]

    def survivors(self, question: str, texts: Sequence[str], payloads: Sequence[str]) -> list[bool]:
        self.calls += 1
        return self.reach(question, texts, payloads)

    def reach(self, question: str, texts: Sequence[str], payloads: Sequence[str]) -> list[bool]:
        """Which of ``texts``, all in the index, reach the context with their payload
        (:meth:`survivors` without counting a call)."""
        retrieved = self.retrieve(question, texts)
        if self.novelty is not None and self.chain is not None:
            from ragshield.store.calibration_novelty import use_added_novelty

            ids = [planted_id(t) for t in texts]
            vecs = self._vectors(texts) if texts else np.zeros((0, 1), np.float32)
            use_added_novelty([self.chain], self.novelty, ids, texts, vecs)
        kept = list(retrieved) if self.chain is None else list(
            self.chain.filter(question, retrieved).kept  # type: ignore[attr-defined]
        )  # fmt: skip
        context = sorted(kept, key=lambda r: -r.score)[: self.context_k]
        in_ctx = {r.text: r for r in context}  # sentence filters rebuild passages: by id too
        by_id = {r.id: r for r in context}
        out = []
        for t, p in zip(texts, payloads, strict=True):
            r = in_ctx.get(t) or by_id.get(planted_id(t))
            out.append(r is not None and contains_answer(r.text, p))
        return out


def shipped_screen(encoder: Encoder, profile: Any, spec: str | None = None) -> Any:
    """The ingestion screen as ``ragshield add`` builds it (:func:`ragshield.ingest.
    add_documents`): ``spec`` (default :data:`~ragshield.ingest.DEFAULT_SCREEN`) with the
    screen's parameters, warmed up and calibrated from the index's ``profile``."""
    from ragshield.defenses.calibration import calibrate
    from ragshield.defenses.registry import build_chain
    from ragshield.ingest import DEFAULT_SCREEN, SCREEN_PARAMS

    chain = build_chain(spec or DEFAULT_SCREEN, encoder, SCREEN_PARAMS)
    chain.warm_up()
    calibrate(chain, profile)
    return chain


class IngestOracle(ChainOracle):
    """The product's two layers as one black box: a call adds the candidates through the
    ingestion screen, then asks the question (one add-then-ask).

    In the product planted passages enter a managed index through ``ragshield add`` (or
    ``POST /v1/admin/index/add``), which screens each new document with the batch it came
    in (:func:`ragshield.ingest.screen_documents`) before it is searchable; a flagged one
    goes to the quarantine. Here the accepted candidates alone are planted and the
    query-time ``chain`` runs as in :class:`ChainOracle`; the attacker still observes only
    which of its passages reached the context (a quarantined passage looks like one the
    chain removed). Each call starts from the same clean index: against a live index an
    attacker's accepted passages would stay and its quarantined ones would wait in the
    operator's queue — this copy is the generous reading for the attacker.

    Parameters (beyond :class:`ChainOracle`'s)
    ------------------------------------------
    screen: the ingestion chain, built as ``ragshield add`` builds it (:func:`shipped_screen`).
    screen_k: indexed neighbours per new document (``ragshield add``'s default, 10).
    one_per_batch: each candidate is added alone (the attacker adapted to the layer: no
        batch neighbour to be judged with); ``False`` adds the call's set as one batch.
    verdicts: a cache of screen verdicts per batch, to share between oracles over the same
        index and screen (a verdict does not depend on the query-time chain).

    ``submitted`` / ``quarantined`` count the candidate passages the calls added and the
    ones the screen flagged.
    """

    def __init__(
        self, store: object, encoder: Encoder, chain: object | None, screen: object, *,
        k: int = 10, context_k: int = 5, novelty: NoveltyIndex | None = None, screen_k: int = 10,
        one_per_batch: bool = False, verdicts: dict[frozenset[str], dict[str, bool]] | None = None,
        provenance: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(store, encoder, chain, k=k, context_k=context_k, novelty=novelty,
                         provenance=provenance)  # fmt: skip
        self.screen = screen
        self.screen_k = screen_k
        self.one_per_batch = one_per_batch
        self._verdicts = {} if verdicts is None else verdicts
        self.submitted = 0
        self.quarantined = 0

    def accepted(self, texts: Sequence[str]) -> list[bool]:
        """Which of ``texts`` the screen lets into the index (added as the oracle adds
        them: one batch, or one per batch); a verdict is a function of its batch, cached."""
        from ragshield.ingest import screen_documents, with_provenance

        batches = [[t] for t in texts] if self.one_per_batch else [list(dict.fromkeys(texts))]
        for batch in batches:
            key = frozenset(batch)
            if batch and key not in self._verdicts:
                docs = with_provenance([Passage(planted_id(t), t) for t in batch], "attacker", "")
                vecs = self._vectors(batch)
                store: Any = self.store  # any object with search(vectors, k) and len()
                found = screen_documents(
                    store, self.encoder, docs, vecs, self.screen, self.screen_k
                )
                self._verdicts[key] = {t: not s.flagged for t, s in zip(batch, found, strict=True)}
        verdict = {t: v for b in batches if b for t, v in self._verdicts[frozenset(b)].items()}
        return [verdict[t] for t in texts]

    def survivors(self, question: str, texts: Sequence[str], payloads: Sequence[str]) -> list[bool]:
        self.calls += 1
        ok = self.accepted(texts)
        self.submitted += len(ok)
        self.quarantined += ok.count(False)
        kept = [(t, p) for t, p, a in zip(texts, payloads, ok, strict=True) if a]
        if not kept:  # all quarantined: nothing of the attacker's can reach the context
            return ok
        alive = iter(self.reach(question, [t for t, _ in kept], [p for _, p in kept]))
        return [a and next(alive) for a in ok]


@dataclass(frozen=True)
class SearchResult:
    """One target's search: ``survivors[b]`` = what is planted with budget ``b``;
    ``calls`` actually spent (fewer when every passage survived early)."""

    survivors: Mapping[int, tuple[AdaptiveText, ...]]
    calls: int
    best: int
    trace: tuple[int, ...] = field(default=(), repr=False)  # best score after each call


class FilterAwareAttack:
    """Black-box search for passages that survive the deployed chain.

    Parameters
    ----------
    budget: calls per target (issue #28's scan default: 50).
    n: passages planted per target at most (PoisonedRAG's N = 5).
    families: adaptive attacks the candidates come from (:data:`FAMILIES`).
    seeds: seeds per family for the candidate pool (3: a pool of ~100 distinct passages
        for a target with five published bodies; ours).
    """

    name = "filter-aware"

    def __init__(
        self, budget: int = 50, *, n: int = 5, families: Sequence[str] = FAMILIES,
        seeds: int = 3,
    ) -> None:  # fmt: skip
        self.budget = budget
        self.n = n
        self.families = families
        self.seeds = seeds

    def _check(self) -> None:
        owner = type(self).__name__
        check_int(self.budget, "budget", owner, low=1)
        check_int(self.n, "n", owner, low=1)
        check_int(self.seeds, "seeds", owner, low=1)
        check_names(self.families, "families", owner, what="attack names")

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        """Refused: what this attacker plants depends on the chain it searched against."""
        raise InputError(
            "filter-aware crafts against a deployed chain: call search(target, ChainOracle("
            "store, encoder, chain)), or run the setting through ragshield scan / eval retrieval"
        )

    def pool(self, target: AttackTarget, seed: int) -> list[list[AdaptiveText]]:
        """Candidate sets: one per (family, seed), distinct texts across the pool."""
        from ragshield.attacks.registry import build_attack

        seen: set[str] = set()
        sets: list[list[AdaptiveText]] = []
        for s in range(self.seeds):
            for fam in self.families:
                made = build_attack(fam).craft_for(target, self.n, seed=seed * 1000 + s)
                fresh = [t for t in made if t.text not in seen]
                seen.update(t.text for t in fresh)
                if fresh:
                    sets.append(fresh)
        return sets

    def search(
        self, target: AttackTarget, oracle: BlackBox, *, seed: int = 0,
        checkpoints: Sequence[int] | None = None,
    ) -> SearchResult:  # fmt: skip
        """Search (see the module docstring); ``checkpoints`` (<= budget) add snapshots."""
        self._check()
        marks = sorted({*(checkpoints or ()), self.budget})
        if marks[0] < 1 or marks[-1] > self.budget:
            raise InputError(f"checkpoints must be in 1..budget ({self.budget}). Got {marks}.")
        rng = random.Random(f"{seed}:filter-aware:{target.question}")
        sets = self.pool(target, seed)
        pool = [t for s in sets for t in s]
        first = sets[: len(self.families)]
        rng.shuffle(first)
        queue: list[list[AdaptiveText]] = [*first, *sets[len(self.families) :]]
        pending: list[list[AdaptiveText]] = []  # survivors of a partly stopped set, to verify
        tried: set[frozenset[str]] = set()
        best: list[AdaptiveText] = []  # the largest set seen planted with every member alive
        snaps: dict[int, tuple[AdaptiveText, ...]] = {}
        trace: list[int] = []
        calls = 0

        def evaluate(cand: list[AdaptiveText]) -> None:
            nonlocal best, calls
            tried.add(frozenset(t.text for t in cand))
            alive = oracle.survivors(target.question, [t.text for t in cand],
                                     [t.payload for t in cand])  # fmt: skip
            calls += 1
            if all(alive) and len(cand) >= len(best):  # ties move: drift on a plateau
                best = list(cand)
            elif any(alive):
                kept = [t for t, a in zip(cand, alive, strict=True) if a]
                if len(kept) > len(best) and frozenset(t.text for t in kept) not in tried:
                    pending.insert(0, kept)  # plant only survivors: check them alone
            trace.append(len(best))
            if calls in marks:
                snaps[calls] = tuple(best)

        while calls < self.budget and len(best) < self.n and pool:
            if pending:
                evaluate(pending.pop(0))
            elif queue and (not best or calls < len(first)):
                evaluate(queue.pop(0))
            else:
                evaluate(self._mutate(best, pool, tried, rng))
        for m in marks:  # stopped before m calls: budget m plants what was found
            snaps.setdefault(m, tuple(best))
        return SearchResult({m: snaps[m] for m in marks}, calls, len(best), tuple(trace))

    def _mutate(
        self, best: list[AdaptiveText], pool: list[AdaptiveText], tried: set[frozenset[str]],
        rng: random.Random,
    ) -> list[AdaptiveText]:  # fmt: skip
        """A child of the best all-surviving set: one passage added (below ``n``) or one
        swapped, drawn mostly from the families that survived; an untried set when one
        is found in a few draws."""
        child = list(best)
        for _ in range(8):
            have = {t.text for t in best}
            fams = {t.family for t in best}
            liked = [t for t in pool if t.family in fams and t.text not in have]
            other = [t for t in pool if t.text not in have]
            pick = (liked if liked and rng.random() < 0.7 else other) or other
            if not pick:
                return child
            new = rng.choice(pick)
            if not best:
                child = rng.sample(other, min(self.n, len(other)))
            elif len(best) < self.n:
                child = [*best, new]
            else:
                child = list(best)
                child[rng.randrange(len(child))] = new
            if frozenset(t.text for t in child) not in tried:
                break
        return child
