"""GARAG-style typo copies of a passage (Cho et al., EMNLP 2024 Findings).

Example (how a harness calls it: the source passage is the question's gold passage or its
top retrieved one)::

    from ragshield.attacks.garag import TypoAttack

    attack = TypoAttack()                         # packaged MiniLM encoder by default
    copies = attack.craft_from(question, gold_text, n=3, seed=0, answers=["Canberra"])
    # or, as a plain CorpusAttack, with the sources given up front:
    attack = TypoAttack(sources={question: gold_text})
    copies = attack.craft(question, "unused", n=3, seed=0)

GARAG ("Typos that broke the RAG's back") plants copies of a genuine document carrying
low-level perturbations (typos) found by a genetic algorithm that keeps the copy
*retrievable* (retriever relevance to the question stays high) while hurting the reader.
Here the search uses the retriever only — the index's own encoder, no LLM:

* an individual is a set of character edits, at most one per word (insert, delete,
  substitute with a keyboard neighbour, swap adjacent letters — the typo operations GARAG
  draws on), on up to ``rate × words`` words;
* fitness = cosine(question, perturbed copy) − ``penalty`` × (unused edit budget, as a
  fraction) − ``penalty`` × (fraction of the right answer's words left intact, when
  ``answers`` are given: a copy whose answer words are garbled stops supporting the right
  answer, the reader-side goal of GARAG);
* a population of ``population`` edit sets evolves for ``generations`` rounds by
  tournament selection, uniform crossover of the parents' edits and mutation (add, drop
  or redraw one edit); each generation's new copies are encoded as one batch, a copy text
  met before is not encoded again (numpy, deterministic per ``seed``);
* the ``n`` fittest distinct copies seen are returned (:meth:`TypoAttack.search` gives their
  scores too).

The RAGDefender artefact files in ``../shared/data`` edit about two thirds of the words of
a passage; ``rate = 0.25`` (our default) is milder and keeps the copy readable. All
defaults are ours: the paper's GA also scores the reader, which needs an LLM per candidate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragshield.embed.base import Encoder
from ragshield.embed.sentence_transformer import DefaultEncoder
from ragshield.errors import InputError, check_float, check_int, check_query
from ragshield.text import normalize_answer

_TOKEN = re.compile(r"[A-Za-z]{2,}")
_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_OPS = ("insert", "delete", "substitute", "swap")


def _neighbours() -> dict[str, str]:
    """QWERTY neighbours of each letter (same row ±1 and the rows above/below)."""
    pos = {c: (r, i) for r, row in enumerate(_ROWS) for i, c in enumerate(row)}
    out: dict[str, str] = {}
    for c, (r, i) in pos.items():
        near = [
            d for d, (r2, i2) in pos.items() if d != c and abs(r2 - r) <= 1 and abs(i2 - i) <= 1
        ]
        out[c] = "".join(sorted(near))
    return out


_NEAR = _neighbours()

Edit = tuple[int, int, int, int]  # (word slot, op, position, random draw for the character)


def apply_typo(word: str, op: int, pos: int, draw: int) -> str:
    """One typo on ``word`` (positions are taken modulo the word length, so any draw is
    valid); the case of a replaced letter is kept."""
    n = len(word)
    kind = _OPS[op % len(_OPS)]
    i = pos % n
    ch = word[i]
    near = _NEAR.get(ch.lower(), "e")
    new = near[draw % len(near)]
    new = new.upper() if ch.isupper() else new
    if kind == "insert":
        return word[:i] + new + word[i:]
    if kind == "delete" and n > 2:
        return word[:i] + word[i + 1 :]
    if kind == "swap" and n > 2:
        j = i if i < n - 1 else n - 2
        return word[:j] + word[j + 1] + word[j] + word[j + 2 :]
    return word[:i] + new + word[i + 1 :]


@dataclass(frozen=True)
class TypoCopy:
    """One perturbed copy with its search scores."""

    text: str
    similarity: float  # cosine(question, copy) under the search encoder
    fitness: float
    edited_words: int


class TypoAttack(DefaultEncoder):
    """Typo copies of a source passage (a :class:`~ragshield.attacks.base.CorpusAttack`).

    Parameters
    ----------
    encoder: the retriever's encoder (use the index's own); ``None`` = packaged MiniLM.
    rate: fraction of the passage's words (letters only, 2+ long) that carry a typo.
    population, generations: GA size; 16 × 12 encodes ~200 copies per call.
    penalty: weight of the budget and answer-intact penalties in the fitness.
    tournament: candidates per tournament selection.
    sources: optional question -> source passage, so :meth:`craft` works without
        :meth:`craft_from`.
    """

    name = "garag-typos"

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        rate: float = 0.25,
        population: int = 16,
        generations: int = 12,
        penalty: float = 0.2,
        tournament: int = 3,
        sources: Mapping[str, str] | None = None,
    ) -> None:
        self.encoder = encoder
        self.rate = rate
        self.population = population
        self.generations = generations
        self.penalty = penalty
        self.tournament = tournament
        self.sources = sources

    def _check(self, n: int) -> None:
        owner = type(self).__name__
        check_int(n, "n", f"{owner}.craft_from", low=0)
        check_float(self.rate, "rate", owner, low=0.0, high=1.0, low_open=True)
        check_int(self.population, "population", owner, low=2)
        check_int(self.generations, "generations", owner, low=0)
        check_float(self.penalty, "penalty", owner, low=0.0, high=10.0)
        check_int(self.tournament, "tournament", owner, low=1)

    # -- the CorpusAttack call -----------------------------------------------------------

    def craft(self, question: str, target_answer: str, n: int, *, seed: int = 0) -> list[str]:
        """Copies of ``sources[question]``; GARAG needs a source passage, so without one
        this is a user error that says to call :meth:`craft_from`."""
        check_query(question)
        source = (self.sources or {}).get(question)
        if source is None:
            raise InputError(
                "garag-typos perturbs an existing passage: call "
                "craft_from(question, passage, n) or build it with sources={question: passage}."
            )
        return self.craft_from(question, source, n, seed=seed)

    def craft_from(
        self,
        question: str,
        passage: str,
        n: int,
        *,
        seed: int = 0,
        answers: Sequence[str] = (),
    ) -> list[str]:
        """``n`` distinct typo copies of ``passage`` kept close to ``question``."""
        return [c.text for c in self.search(question, passage, n, seed=seed, answers=answers)]

    # -- the search ------------------------------------------------------------------------

    def search(
        self,
        question: str,
        passage: str,
        n: int,
        *,
        seed: int = 0,
        answers: Sequence[str] = (),
    ) -> list[TypoCopy]:
        """Run the GA; the ``n`` fittest distinct copies, best first."""
        check_query(question)
        check_query(passage, what="source passage")
        if isinstance(answers, str):
            answers = [answers]
        self._check(n)
        if n == 0:
            return []
        spans = [m.span() for m in _TOKEN.finditer(passage)]
        if not spans:
            raise InputError("the source passage has no word a typo can go into.")
        budget = max(1, round(self.rate * len(spans)))
        answer_slots = _answer_slots(passage, spans, answers)
        rng = np.random.default_rng(seed)
        q = self.encoder_.encode([question])[0]

        def render(ind: frozenset[Edit]) -> str:
            parts, last = [], 0
            for slot, op, pos, draw in sorted(ind):
                a, b = spans[slot]
                parts += [passage[last:a], apply_typo(passage[a:b], op, pos, draw)]
                last = b
            parts.append(passage[last:])
            return "".join(parts)

        def random_edit(slot: int) -> Edit:
            return (slot, int(rng.integers(4)), int(rng.integers(64)), int(rng.integers(64)))

        def random_individual() -> frozenset[Edit]:
            k = int(rng.integers(max(1, budget // 2), budget + 1))
            slots = rng.choice(len(spans), size=min(k, len(spans)), replace=False)
            return frozenset(random_edit(int(s)) for s in slots)

        seen: dict[str, TypoCopy] = {}
        # cosine to the question per copy text: a text the search met before (a child equal
        # to an earlier copy, two edit sets writing the same words) is not encoded again
        sim_of: dict[str, float] = {}

        def score(pop: list[frozenset[Edit]]) -> np.ndarray:
            texts = [render(ind) for ind in pop]
            new = [t for t in dict.fromkeys(texts) if t not in sim_of]
            if new:
                sims = self.encoder_.encode(new) @ q
                sim_of.update(zip(new, (float(s) for s in sims), strict=True))
            fit = np.empty(len(pop), dtype=np.float64)
            for i, (ind, text) in enumerate(zip(pop, texts, strict=True)):
                slots = {e[0] for e in ind}
                short = (budget - len(slots)) / budget
                intact = len(answer_slots - slots) / len(answer_slots) if answer_slots else 0.0
                sim = sim_of[text]
                fit[i] = sim - self.penalty * (short + intact)
                if text != passage and (text not in seen or seen[text].fitness < fit[i]):
                    seen[text] = TypoCopy(text, sim, float(fit[i]), len(slots))
            return fit

        pop = [random_individual() for _ in range(self.population)]
        fit = score(pop)
        for _ in range(self.generations):
            children = []
            for _ in range(self.population):
                a = pop[self._select(fit, rng)]
                b = pop[self._select(fit, rng)]
                child = self._cross(a, b, budget, rng)
                children.append(self._mutate(child, budget, len(spans), rng, random_edit))
            child_fit = score(children)
            # elitism: the best half of parents and children together survive
            merged = pop + children
            merged_fit = np.concatenate([fit, child_fit])
            keep = np.argsort(-merged_fit, kind="stable")[: self.population]
            pop = [merged[i] for i in keep]
            fit = merged_fit[keep]
        ranked = sorted(seen.values(), key=lambda c: (-c.fitness, c.text))
        return ranked[:n]

    def _select(self, fit: np.ndarray, rng: np.random.Generator) -> int:
        idx = rng.integers(len(fit), size=min(self.tournament, len(fit)))
        return int(idx[np.argmax(fit[idx])])

    @staticmethod
    def _cross(
        a: frozenset[Edit], b: frozenset[Edit], budget: int, rng: np.random.Generator
    ) -> dict[int, Edit]:
        """Uniform crossover: each word slot edited by a parent comes from one of them."""
        by_slot: dict[int, list[Edit]] = {}
        for e in (*a, *b):
            by_slot.setdefault(e[0], []).append(e)
        child: dict[int, Edit] = {}
        for slot in sorted(by_slot):
            opts = sorted(by_slot[slot])
            if len(opts) == 2 or rng.random() < 0.5:
                child[slot] = opts[int(rng.integers(len(opts)))]
        if len(child) > budget:
            drop = rng.choice(sorted(child), size=len(child) - budget, replace=False)
            for s in drop:
                del child[int(s)]
        return child

    @staticmethod
    def _mutate(
        child: dict[int, Edit],
        budget: int,
        n_slots: int,
        rng: np.random.Generator,
        random_edit: Callable[[int], Edit],
    ) -> frozenset[Edit]:
        """Add (while under budget), drop or redraw one edit."""
        roll = rng.random()
        if (roll < 0.4 or not child) and len(child) < budget:
            slot = int(rng.integers(n_slots))
            child[slot] = random_edit(slot)
        elif roll < 0.6 and len(child) > 1:
            del child[sorted(child)[int(rng.integers(len(child)))]]
        elif child:
            slot = sorted(child)[int(rng.integers(len(child)))]
            child[slot] = random_edit(slot)
        return frozenset(child.values())


def _answer_slots(
    passage: str, spans: Sequence[tuple[int, int]], answers: Sequence[str]
) -> set[int]:
    """Word slots that belong to an occurrence of a right answer in the passage."""
    targets = {w for a in answers for w in normalize_answer(a).split()}
    return {i for i, (a, b) in enumerate(spans) if passage[a:b].lower() in targets}
