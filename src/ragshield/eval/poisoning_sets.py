"""Retrieval sets of the poisoning evaluation: the attack names and how a set is built.

Example::

    from ragshield.eval.poisoning_sets import VectorBank, build_retrieval_sets, resolve_attack

    bank = VectorBank(encoder)
    sets = build_retrieval_sets(cases, "poisonedrag", ratio=2, seed=0, bank=bank)

A set is the golden passage, the ``n_benign`` golden passages of *other* questions nearest
the question (benign but irrelevant), and ``M = round(base_size × ratio)`` adversarial
passages, shuffled; the full description is in :mod:`ragshield.eval.poisoning`, which runs
and scores the sets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragshield.attacks import registry as attack_registry
from ragshield.attacks.base import CorpusAttack
from ragshield.embed.base import Encoder, l2_normalize
from ragshield.errors import InputError
from ragshield.eval.datasets import ATTACK_SOURCES, PoisoningCase
from ragshield.types import Passage, RetrievedPassage

CLEAN = "clean"
MIXED = "mixed"


def register_attack(name: str, factory: str | Callable[[], CorpusAttack]) -> None:
    """Make a :class:`CorpusAttack` available by name, in the one attack registry
    (:mod:`ragshield.attacks.registry`), so :func:`run_poisoning_eval`, ``scan`` and the CLI
    all resolve it."""
    if name in (*ATTACK_SOURCES, MIXED, CLEAN):
        raise InputError(f"attack name {name!r} is reserved for the data-backed attacks.")
    attack_registry.register(name, factory, "corpus")


def available_attacks() -> list[str]:
    """The data-backed attacks, ``mixed``, then every corpus attack of the registry."""
    return [*ATTACK_SOURCES, MIXED, *attack_registry.available("corpus")]


def resolve_attack(attack: str | CorpusAttack) -> str | CorpusAttack:
    """A data-backed attack name stays a name; anything else becomes a CorpusAttack
    (a registry name, or ``"package.module:Class"`` of any CorpusAttack)."""
    if isinstance(attack, str):
        if attack in ATTACK_SOURCES or attack == MIXED:
            return attack
        if attack in attack_registry.available("corpus"):
            attack = attack_registry.build_attack(attack, kind="corpus")
        elif ":" in attack:
            attack = attack_registry.load_target(attack)()
        else:
            raise InputError(
                f"unknown attack {attack!r}; available: {', '.join(available_attacks())} "
                "(or 'package.module:Class' of a CorpusAttack)."
            )
    if not isinstance(attack, CorpusAttack):
        raise InputError(
            f"attacks must be names or CorpusAttack objects; got {type(attack).__name__}."
        )
    return attack


def attack_name(attack: str | CorpusAttack) -> str:
    return (
        attack if isinstance(attack, str) else str(getattr(attack, "name", type(attack).__name__))
    )


# --------------------------------------------------------------------------- retrieval sets


@dataclass(frozen=True)
class RetrievalSet:
    """One shuffled retrieved set with its ground truth (kept out of the passages)."""

    case: PoisoningCase
    attack: str
    ratio: float
    seed: int
    m_requested: int
    passages: tuple[RetrievedPassage, ...]
    sources: tuple[str, ...]  # per passage: "golden", "benign" or the attack source

    @property
    def adversarial_mask(self) -> np.ndarray:
        return np.array([s not in ("golden", "benign") for s in self.sources], dtype=bool)

    @property
    def golden_mask(self) -> np.ndarray:
        return np.array([s == "golden" for s in self.sources], dtype=bool)

    @property
    def m_used(self) -> int:
        return int(self.adversarial_mask.sum())


class VectorBank:
    """Text -> unit vector, filled by one batched encode call per new batch of texts."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self._vec: dict[str, np.ndarray] = {}

    def add(self, texts: Iterable[str], show_progress: bool = False) -> None:
        todo = list(dict.fromkeys(t for t in texts if t not in self._vec))
        if todo:
            vecs = l2_normalize(self.encoder.encode(todo, show_progress=show_progress))
            self._vec.update(zip(todo, vecs, strict=True))

    def get(self, texts: Sequence[str]) -> np.ndarray:
        self.add(texts)
        return np.vstack([self._vec[t] for t in texts]) if texts else np.zeros((0, 1), np.float32)

    def export(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """The vectors of ``texts`` (encoded now if new), e.g. to ship to another worker."""
        texts = list(texts)
        self.add(texts)
        return {t: self._vec[t] for t in texts}

    def put(self, vectors: Mapping[str, np.ndarray]) -> None:
        """Adopt vectors encoded elsewhere (see :meth:`export`), so a worker scores with
        exactly the vectors of the run it is part of."""
        self._vec.update(vectors)


def benign_passages(
    cases: Sequence[PoisoningCase], bank: VectorBank, n_benign: int
) -> dict[str, tuple[str, ...]]:
    """Per question, the ``n_benign`` golden passages of *other* questions nearest to it
    (the data README's stand-in for the BEIR corpus's benign-but-irrelevant passages)."""
    pool = list(dict.fromkeys(c.golden for c in cases))
    pool_vecs = bank.get(pool)
    q_vecs = bank.get([c.question for c in cases])
    sims = q_vecs @ pool_vecs.T
    out: dict[str, tuple[str, ...]] = {}
    for qi, c in enumerate(cases):
        own = {c.golden, *c.supporting}
        order = np.argsort(-sims[qi], kind="stable")
        out[c.id] = tuple([pool[j] for j in order if pool[j] not in own][:n_benign])
    return out


def _rng(seed: int, case_index: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([seed, case_index, salt])


def adversarial_texts(
    case: PoisoningCase,
    attack: str | CorpusAttack,
    m: int,
    seed: int,
    case_index: int = 0,
) -> list[tuple[str, str]]:
    """``(source, text)`` of up to ``m`` distinct adversarial passages for one question.

    A single data-backed attack yields a random subset of its passages (all of them when
    it has fewer than ``m``); ``"mixed"`` shuffles each source and takes them round-robin;
    a :class:`CorpusAttack` is asked to craft ``m`` texts for the question's incorrect
    answer. Duplicates are dropped, never added.
    """
    if m <= 0:
        return []
    rng = _rng(seed, case_index, 1)
    if isinstance(attack, str):
        names = ATTACK_SOURCES if attack == MIXED else (attack,)
        queues: list[list[tuple[str, str]]] = []
        for name in names:
            texts = list(case.adversarial.get(name, ()))
            perm = rng.permutation(len(texts))
            queues.append([(name, texts[i]) for i in perm])
        picked: list[tuple[str, str]] = []
        depth = max((len(q) for q in queues), default=0)
        for level in range(depth):
            for q in queues:
                if level < len(q) and len(picked) < m:
                    picked.append(q[level])
        out = picked
    else:
        crafted = attack.craft(case.question, case.incorrect_answer, m, seed=seed)
        if isinstance(crafted, str):
            raise InputError(f"attack {attack_name(attack)!r} returned a bare string, not a list.")
        out = [(attack_name(attack), str(t)) for t in crafted][:m]
    protected = {case.golden, *case.supporting}
    seen: set[str] = set()
    unique = []
    for src, t in out:
        if t.strip() and t not in seen and t not in protected:
            seen.add(t)
            unique.append((src, t))
    return unique


def as_retrieved(
    case: PoisoningCase, texts: Sequence[str], bank: VectorBank
) -> tuple[RetrievedPassage, ...]:
    """Texts in their shuffled order as a retrieval result: unlabelled ids, cached vectors,
    query similarity as the score."""
    vecs = bank.get(texts)
    scores = vecs @ bank.get([case.question])[0]
    return tuple(
        RetrievedPassage(Passage(f"{case.id}#{i}", t), float(scores[i]), i, vecs[i])
        for i, t in enumerate(texts)
    )


def shuffled_retrieved(
    case: PoisoningCase,
    items: Sequence[tuple[str, str]],
    bank: VectorBank,
    rng: np.random.Generator,
) -> tuple[list[tuple[str, str]], tuple[RetrievedPassage, ...]]:
    """``(source, text)`` items in a seeded random order and their retrieval result.

    Both harnesses (poisoning and injection) shuffle with their own seeded ``rng``, so a
    defense never sees the attack passages first, as they are in the authors' evaluation.
    """
    perm = rng.permutation(len(items))
    shuffled = [items[i] for i in perm]
    return shuffled, as_retrieved(case, [t for _, t in shuffled], bank)


def build_retrieval_set(
    case: PoisoningCase,
    benign: Sequence[str],
    attack: str | CorpusAttack | None,
    ratio: float,
    seed: int,
    bank: VectorBank,
    *,
    case_index: int = 0,
    base_size: int = 5,
    n_golden: int = 1,
) -> RetrievalSet:
    """Golden (+ ``n_golden − 1`` supporting golden) + benign + M adversarial, shuffled.

    ``ratio`` 0 (or ``attack`` None) is the clean setting. Scores are cosine similarities to
    the question; ``rank`` is the position after shuffling (the defense must not rely on
    adversarial passages coming first, as they do in the authors' evaluation).
    """
    goldens = [case.golden, *case.supporting][: max(n_golden, 1)]
    items: list[tuple[str, str]] = [("golden", g) for g in goldens]
    items += [("benign", b) for b in benign if b not in goldens]
    m_req = 0 if attack is None or ratio <= 0 else round(base_size * ratio)
    if m_req:
        assert attack is not None
        taken = {t for _, t in items}
        items += [
            (s, t)
            for s, t in adversarial_texts(case, attack, m_req, seed, case_index)
            if t not in taken
        ]
    items, passages = shuffled_retrieved(case, items, bank, _rng(seed, case_index, 2))
    return RetrievalSet(
        case=case,
        attack=CLEAN if m_req == 0 else attack_name(attack),  # type: ignore[arg-type]
        ratio=float(ratio) if m_req else 0.0,
        seed=seed,
        m_requested=m_req,
        passages=passages,
        sources=tuple(s for s, _ in items),
    )


def build_retrieval_sets(
    cases: Sequence[PoisoningCase],
    attack: str | CorpusAttack | None,
    ratio: float,
    seed: int,
    encoder: Encoder | VectorBank,
    *,
    n_benign: int = 4,
    base_size: int = 5,
    n_golden: int = 1,
    benign: Mapping[str, Sequence[str]] | None = None,
    positions: Sequence[int] | None = None,
) -> list[RetrievalSet]:
    """One retrieval set per case for one (attack, ratio, seed) setting.

    ``positions`` are the cases' places in their split (default ``0..n-1``): a position
    seeds its set's random draws, so a question's set is the same whether it is built
    alone (a Ray worker's share) or with the whole split.
    """
    bank = encoder if isinstance(encoder, VectorBank) else VectorBank(encoder)
    resolved = None if attack is None else resolve_attack(attack)
    if benign is None:
        benign = benign_passages(cases, bank, n_benign)
    if positions is None:
        positions = range(len(cases))
    return [
        build_retrieval_set(
            c,
            benign[c.id],
            resolved,
            ratio,
            seed,
            bank,
            case_index=i,
            base_size=base_size,
            n_golden=n_golden,
        )
        for i, c in zip(positions, cases, strict=True)
    ]
