"""Poisoning defenses against published *and* adaptive attacks on real retrieval, with a
leave-one-family-out table (issue #28).

Usage::

    python benchmarks/bench_adaptive_poisoning.py                        # all sections
    python benchmarks/bench_adaptive_poisoning.py --sections main --datasets hotpotqa
    python benchmarks/bench_adaptive_poisoning.py --sections lofo,speed --limit 20
    python benchmarks/bench_adaptive_poisoning.py --sections main --split dev \
        --defenses ragdefender --hits-cache runs/hits        # a dev study (tuning split)

What it measures (metrics: :mod:`ragshield.eval.real_retrieval`): every passage of an
on-topic corpus (``../shared/data/ontopic/``) is indexed with the packaged MiniLM in an exact
FAISS index; each setting's passages are planted into a copy (all targets at once); every
question is retrieved for real with k = 10 and the 5 survivors nearest the question are the
context.

* Published settings come from :mod:`ragshield.eval.plant` (the shared PoisonedRAG / blind /
  GARAG texts where a question is a poisoning target, labelled template texts otherwise);
  ``garag`` plants only the GARAG passages of that pool.
* Adaptive settings are the *registered* attacks of :mod:`ragshield.attacks.adaptive`
  (``build_attack(name).craft_for``), five passages per target (one for
  ``near-duplicate`` / ``meta-epistemic``), bodies = the published PoisonedRAG texts when
  the question has them, else the attack's template bodies (the ``sources`` column says
  which).
* ``main``: none / the paper's algorithm / the authors' ``ragdefender`` package (when
  installed) / ragshield ``ragdefender`` / the recommended chain, on the test split
  (SQuAD odd articles, HotpotQA's 44 poisoning targets), published rows then adaptive rows.
* ``ablation``: ragshield ``ragdefender`` with each new signal switched off (the planted-group
  kNN signal, the echo pairs' second signal, the echo pairs, the near-copy conflicts).
* ``lofo``: for each attack family, the new signals' thresholds are chosen on the *dev*
  split (SQuAD even articles, HotpotQA non-targets) from a small grid using every *other*
  family (most attacks caught with clean benign removed <= 0.005 on dev), then the held-out
  family is reported on the test split. ``--lofo-writer SPEC`` adds the "LLM-written"
  family (PoisonedRAG and no-question settings whose target and texts the LLM wrote, template
  bodies where it wrote fewer than five:
  dev's unpublished questions, and HotpotQA test's targets in place of their published
  texts; ``--lofo-writer-datasets``, HotpotQA by default).
* ``--writer SPEC`` (:mod:`bench_written`): questions without published texts get the
  LLM's; with ``--writer-replace`` every question's are the LLM's (that family's rows in
  every column: ``--sections main --datasets hotpotqa --writer qwen2.5-0.5b
  --writer-replace``).
* The index-side novelty table (RAGDefender's ``derivative`` stage) is handed over as a
  deployment holds it: the table ``ragshield index`` stores for the corpus, each setting's
  planted passages added as ``ragshield add`` adds them (:meth:`Bench.novelty`, cached
  beside the hits); ``--no-novelty`` hands none (an index built before the table existed).
* Planted passages enter as a deployment gets them, through ``ragshield add``: with its
  ``source`` / ``added_at`` metadata (RAGDefender's ``provenance`` stage reads it; the
  none / paper / authors' columns ignore metadata). ``--no-provenance`` plants them bare
  (an index that records none: the issue's "no metadata" row). ``--later-share F`` gives
  a seeded share F of the index's own passages an ``added_at`` each (one instant apiece,
  all before the plants), as if a later ``add`` had brought them: the clean cost of the
  stage on genuine later additions (retrieval and the novelty table are unchanged).
* ``--split dev`` runs ``main`` / ``ablation`` / ``speed`` on the dev split (every dev
  figure of docs/results-poisoning.md has such a command); ``lofo`` always tunes on dev
  and reports on test.
* ``speed``: the filter's p50 / p95 on warm caches (vectors precomputed), k = 10, one thread.
* ``variants`` (not in the default): RAGDefender with each parameter set of
  ``--variants '{"label": {...}}'`` on every setting (the dev studies).
* ``novelty`` (not in the default): the index-side novelty alone, per setting and kind
  of retrieved passage (benign / gold / planted).
* ``groups`` (not in the default): the planted-group signal alone, on dev and test —
  the share of benign and of planted retrieved passages it flags.
"""

from __future__ import annotations

import bench_env  # noqa: F401  (offline and threading defaults, set first)
import argparse
import dataclasses
import datetime as dt
import hashlib
import itertools
import json
import os
import pickle
import random
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

from bench_written import llm_written
from ragshield.attacks.settings import SETTINGS

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATASETS = {
    "hotpotqa": ("ontopic/hotpotqa_distractor_dev100.json", "poisoning/hotpotqa", None),
    "squad": ("ontopic/squad_v1.1_dev_43articles.json", None, 6),
}
PUBLISHED = ("clean", "poisonedrag-1", "poisonedrag", "garag", "mixed-2x", "mixed-4x")
#: Every adaptive row of the settings table planted as written (not searched against a
#: chain, not opt-in): a new adaptive attack needs its table row only.
ADAPTIVE = tuple(
    name for name, row in SETTINGS.items()
    if row.group == "adaptive" and row.shape == "adaptive" and not row.opt_in
)  # fmt: skip
WRITTEN = "LLM-written"  # the family whose texts --lofo-writer's LLM writes
#: Attack families of the leave-one-family-out table (settings per family). The mixed
#: settings combine three families and are never used for tuning here.
FAMILIES: dict[str, tuple[str, ...]] = {
    "PoisonedRAG": ("poisonedrag-1", "poisonedrag"),
    "Tan et al. blind": ("no-question",),
    "GARAG": ("garag",),
    "rewritten prefixes": ("prefix-drop", "prefix-synonym", "prefix-reorder",
                           "prefix-statement", "prefix-typo", "question-middle",
                           "question-end", "answer-spread", "facet-spread"),
    "gold edits / single passage": ("near-duplicate", "excerpt-edit", "meta-epistemic",
                                    "meta-epistemic-long", "meta-epistemic-own",
                                    "meta-epistemic-named", "meta-epistemic-borrowed"),
    # on --lofo-writer's benches only: target and texts by the LLM (HotpotQA test: in place
    # of the published ones; template bodies where it wrote fewer than five; bench_written)
    WRITTEN: ("poisonedrag", "no-question"),
    # a search, not a setting: it is tuned on nothing, so bench_filter_aware's budget curve
    # is held out by construction (no row here)
    "filter-aware": (),
}  # fmt: skip
#: The grid the LOFO tuning searches (the new signals' thresholds; everything else fixed).
GRID: dict[str, tuple[Any, ...]] = {
    "coverage_threshold": (80.0, 85.0, 90.0),
    "echo_threshold": (0.75, 0.8),
}
DEFAULT_DEFENSES = "none;ragdefender-paper;authors;ragdefender;ragdefender,ecosaferag"
KEYS = ("benign_removed", "gold_retrieved", "gold_kept", "attack_reaches", "adv_majority",
        "filter_ms")  # fmt: skip
CLEAN_BUDGET = 0.005  # LOFO: dev clean benign removed must stay at or below this


# --------------------------------------------------------------------------- planting


def planted_for(
    cases: Sequence[Any], setting: str, seed: int, golden: Mapping[str, str]
) -> list[Any]:
    """Every passage ``setting`` plants for ``cases``: a row of the settings table through
    :func:`ragshield.eval.plant.attack_passages`, ``garag`` = mixed-4x's GARAG pool only."""
    from ragshield.eval.plant import attack_passages

    if setting != "garag":
        return attack_passages(cases, setting, seed=seed, golden_text=dict(golden))
    pool = attack_passages(cases, "mixed-4x", seed=seed, golden_text=dict(golden))
    return [p for p in pool if p.attack == "garag"]


def fingerprint(planted: Sequence[Any]) -> str:
    """A digest of what a setting plants (ids and texts): a cached retrieval is reused only
    for the passages it was made from. Why: the cache used to be keyed by the setting's
    name alone, so a change to an attack's text left the old planted passages in every
    later run until someone deleted the entry by hand."""
    h = hashlib.blake2b(digest_size=12)
    for p in planted:
        for part in (p.passage.id, p.passage.text):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
    return h.hexdigest()


CACHE_VERSION = 2  # entries with the fingerprint of what they were made from


def _load_cache(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """A cache file's entries and their fingerprints; a file of an older format (no
    fingerprints) or none gives nothing, so every setting is made again once."""
    if not path.is_file():
        return {}, {}
    with path.open("rb") as fh:
        raw = pickle.load(fh)
    if not (isinstance(raw, dict) and raw.get("version") == CACHE_VERSION):
        return {}, {}
    return dict(raw["entries"]), dict(raw["prints"])


# --------------------------------------------------------------------------- running


class Bench:
    """One dataset/split: its index, cases and the retrieved top-k of every setting."""

    def __init__(self, name: str, split: str, encoder: Any, args: argparse.Namespace, *,
                 writer: str | None = None, replace: bool = False) -> None:  # fmt: skip
        from ragshield.eval.ontopic import load_ontopic
        from ragshield.eval.real_retrieval import build_base_store

        rel, pois, per_topic = DATASETS[name]
        self.name, self.split, self.k, self.seed = name, split, args.k, args.seed
        self.data = load_ontopic(
            SHARED / rel, poisoning_dir=SHARED / pois if pois else None,
            per_topic=per_topic, seed=args.seed,
        )  # fmt: skip
        self.encoder = encoder
        self.writer = writer or getattr(args, "writer", None)
        self.cases = llm_written(self.data, self.data.split(split)[: args.limit], encoder,
                                 self.writer, args.seed, replace=replace)  # fmt: skip
        self.store = build_base_store(self.data, encoder, args.cache_dir)
        self.golden = self.data.golden_text(self.cases)
        self.qv = encoder.encode([c.question for c in self.cases])
        self.mode = "multi_hop" if name == "hotpotqa" else "single_hop"
        self._hits: dict[str, tuple[list[Any], dict[str, Any], float, str]] = {}
        self.provenance, self.later_share = bool(args.provenance), float(args.later_share)
        self._stamped: dict[str, list[Any]] = {}
        self._novelty: dict[str, dict[str, Any]] = {}
        self.with_novelty = bool(args.novelty)
        self._hits_file: Path | None = None
        self._planted: dict[str, tuple[list[Any], str]] = {}  # setting: (passages, fingerprint)
        self._hits_prints: dict[str, str] = {}
        self._novelty_prints: dict[str, str] = {}
        if args.hits_cache:  # the retrieved top-k of each setting, as a previous run left it
            self._hits_file = Path(args.hits_cache) / (
                f"{name}_{split}_k{args.k}_s{args.seed}_l{args.limit}"
                f"{'_w' + self.writer if self.writer else ''}{'_all' if replace else ''}.pkl"
            )
            # each entry is kept with the fingerprint of what its setting planted; one made
            # from other passages (an attack changed since) is recomputed, not reused
            # (a file of the older format, whose tables may lack NoveltyTable.uses, is none)
            self._hits, self._hits_prints = _load_cache(self._hits_file)
            self._novelty, self._novelty_prints = _load_cache(self._novelty_file)

    def save_hits(self) -> None:
        """Keep the retrieved sets for the next run (``--hits-cache``): planting and
        encoding every setting's passages is most of a cold run's time on a busy machine."""
        if self._hits_file is not None:
            self._hits_file.parent.mkdir(parents=True, exist_ok=True)
            for obj, prints, path in (
                (self._hits, self._hits_prints, self._hits_file),
                (self._novelty, self._novelty_prints, self._novelty_file),
            ):
                tmp = path.with_suffix(f".{os.getpid()}.tmp")  # runs may share the cache
                try:
                    with tmp.open("wb") as fh:
                        pickle.dump({"version": CACHE_VERSION, "entries": obj,
                                     "prints": prints}, fh)  # fmt: skip
                except (AttributeError, pickle.PicklingError) as exc:  # cannot pickle
                    tmp.unlink(missing_ok=True)
                    print(f"  not cached: {path.name} ({exc})", file=sys.stderr, flush=True)
                    continue
                tmp.replace(path)

    @property
    def _novelty_file(self) -> Path:
        assert self._hits_file is not None
        return self._hits_file.with_name(self._hits_file.stem + "_novelty_siblings.pkl")

    def novelty(self, setting: str) -> dict[str, Any]:
        """The index-side novelty table as a deployment holds it for ``setting``
        (:mod:`ragshield.store.calibration_novelty`): the corpus's table (``ragshield
        index``) with the planted passages added (``ragshield add``'s rule, the same call as
        the scan's, :func:`ragshield.eval.real_retrieval.hand_novelty`)."""
        from ragshield.eval.plant import planted_copy
        from ragshield.store.calibration_novelty import NoveltyIndex

        planted, fp = self.planted(setting)
        if setting not in self._novelty or self._novelty_prints.get(setting) != fp:
            if not hasattr(self, "_base_novelty"):
                st = self.store
                self._base_novelty = NoveltyIndex(
                    [p.id for p in st.passages], [p.text for p in st.passages], st.vectors,
                    index=st.neighbour_index(),
                )  # fmt: skip
            store = planted_copy(self.store, planted, self.encoder) if planted else self.store
            added = store.passages[len(self.store) :]
            self._novelty[setting] = self._base_novelty.with_added(
                [p.id for p in added], [p.text for p in added], store.vectors[len(self.store) :]
            )
            self._novelty_prints[setting] = fp
        return self._novelty[setting]

    def hits(self, setting: str) -> tuple[list[Any], dict[str, Any], float, str]:
        from ragshield.eval.plant import planted_copy

        planted, fp = self.planted(setting)
        if setting not in self._hits or self._hits_prints.get(setting) != fp:
            self._stamped.pop(setting, None)
            store = planted_copy(self.store, planted, self.encoder) if planted else self.store
            m = len(planted) / max(len(self.cases), 1)
            sources = "+".join(sorted({p.source for p in planted})) or "-"
            self._hits[setting] = (
                store.search(self.qv, self.k),
                {p.passage.id: p for p in planted},
                m,
                sources,
            )
            self._hits_prints[setting] = fp
        return self._hits[setting]

    def planted(self, setting: str) -> tuple[list[Any], str]:
        """What ``setting`` plants (:func:`planted_for`) and its :func:`fingerprint`, made
        once per run."""
        if setting not in self._planted:
            planted = planted_for(self.cases, setting, self.seed, self.golden)
            self._planted[setting] = (planted, fingerprint(planted))
        return self._planted[setting]

    def stamped(self, setting: str) -> list[Any]:
        """``setting``'s retrieved sets with the metadata a managed index would return:
        planted passages as ``ragshield add`` stamps them (or bare, ``--no-provenance``), and
        the ``--later-share`` of the index's passages stamped as later additions. Stamped
        here rather than read from the hits cache, whose sets may predate provenance."""
        from ragshield.attacks.filter_aware import PLANTED_AT, as_added
        from ragshield.types import RetrievedPassage

        if setting not in self._stamped:
            hits, planted, _, _ = self.hits(setting)
            meta = {p.passage.id: as_added([p.passage], "planted", self.provenance)[0].metadata
                    for p in planted.values() if not p.replaces}  # fmt: skip
            ids = sorted(p.id for p in self.store.passages)
            later = random.Random(self.seed).sample(ids, round(self.later_share * len(ids)))
            t0 = dt.datetime.fromisoformat(PLANTED_AT) - dt.timedelta(seconds=len(later) + 1)
            for n, pid in enumerate(later):  # each its own instant: every pair is ordered
                stamp = (t0 + dt.timedelta(seconds=n)).isoformat().replace("+00:00", "Z")
                meta[pid] = {"source": "later-add", "added_at": stamp}
            self._stamped[setting] = [
                [r if r.id not in meta else RetrievedPassage(
                    dataclasses.replace(r.passage, metadata=meta[r.id]), r.score, r.rank,
                    r.embedding) for r in retrieved]
                for retrieved in hits
            ]  # fmt: skip
        return self._stamped[setting]

    def run(self, defense: Any, setting: str) -> dict[str, float]:
        from ragshield.defenses.ragdefender import RAGDefender
        from ragshield.eval.real_retrieval import _mean, _score_question
        from ragshield.pipeline import select_context
        from ragshield.types import Answer

        _, planted, _, _ = self.hits(setting)
        hits = self.stamped(setting)
        for part in getattr(defense, "filters", [defense]) if self.with_novelty else ():
            if isinstance(part, RAGDefender):
                part.use_novelty(self.novelty(setting))
        rows = []
        for case, retrieved in zip(self.cases, hits, strict=True):
            t0 = time.perf_counter()
            res = None if defense is None else defense.filter(case.question, retrieved)
            kept = list(retrieved) if res is None else list(res.kept)
            ms = (time.perf_counter() - t0) * 1000.0
            ans = Answer(
                case.question,
                "",
                tuple(select_context(kept, 5)),  # the pipeline's one context rule
                tuple(retrieved),
                () if res is None else (res,),
            )
            s = _score_question(case, ans, planted)
            s["filter_ms"] = ms
            rows.append(s)
        return _mean(rows)


_ECHO: dict[int, Any] = {}


def calibrated(bench: Bench, defense: Any) -> Any:
    """As a pipeline over a saved index does: hand the index profile to the defense. The
    sentence vectors of the echo (a cache keyed by text, same encoder) are shared between
    the many RAGDefender instances of the ablation and the LOFO grid: each would otherwise
    re-encode every retrieved passage, which is time, not a decision."""
    from ragshield.defenses.calibration import calibrate
    from ragshield.defenses.ragdefender import RAGDefender
    from ragshield.defenses.ragdefender.echo import EchoVectors
    from ragshield.store.profile import profile_vectors

    if not hasattr(bench, "_profile"):
        bench._profile = profile_vectors(bench.store.vectors)  # type: ignore[attr-defined]
    calibrate(defense, bench._profile)  # type: ignore[attr-defined]
    for d in getattr(defense, "filters", [defense]):
        if isinstance(d, RAGDefender):
            d._echo = _ECHO.setdefault(id(bench.encoder), EchoVectors())
    return defense


class MemoEncoder:
    """The same MiniLM with its vectors kept in memory by text: the authors' package
    re-encodes every passage on every call, which is its latency, not its decisions (its
    real per-call cost is measured in ``bench_filter.py``); served from memory here so the
    quality table finishes."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "")
        self._vec: dict[str, np.ndarray] = {}

    @property
    def model_(self) -> Any:
        return self.inner.model_

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self._vec]
        if todo:
            self._vec.update(zip(todo, self.inner.encode(todo), strict=True))
        return np.vstack([self._vec[t] for t in texts]).astype(np.float32)


def defenses(bench: Bench, spec: str) -> dict[str, Any]:
    from ragshield.defenses.registry import build_chains
    from ragshield.eval.cli.retrieval import ragdefender_params

    names = [c for c in spec.split(";") if c.strip()]
    out: dict[str, Any] = build_chains(
        ";".join(c for c in names if c != "authors"), bench.encoder, ragdefender_params(bench.mode)
    )
    if "authors" in names:
        from bench_real_retrieval import _with_authors

        out = _with_authors(out, MemoEncoder(bench.encoder), bench.mode)
    return {k: (None if v is None else calibrated(bench, v)) for k, v in out.items()}


def table(title: str, rows: Mapping[tuple[str, str], Mapping[str, float]], bench: Bench) -> str:
    lines = [f"### {title}", ""]
    lines.append("| setting | planted/target (sources) | defense | " + " | ".join(KEYS) + " |")
    lines.append("|---" * (len(KEYS) + 3) + "|")
    for (setting, d), m in rows.items():
        _, _, per, src = bench.hits(setting)
        cells = " | ".join(_fmt(m.get(k, float("nan")), k) for k in KEYS)
        lines.append(f"| {setting} | {per:.1f} ({src}) | {d} | {cells} |")
    return "\n".join(lines) + "\n"


def _fmt(v: float, key: str) -> str:
    if v != v:
        return "–"
    return f"{v:.1f}" if key == "filter_ms" else f"{v:.3f}"


# --------------------------------------------------------------------------- sections


def section_main(benches: Sequence[Bench], args: argparse.Namespace) -> None:
    for b in benches:
        chains = defenses(b, args.defenses)
        for group, every in (("published", PUBLISHED), ("adaptive", ADAPTIVE)):
            settings = [x for x in every if not args.settings or x in args.settings.split(",")]
            if not settings:
                continue
            rows = {}
            for s in settings:
                for label, d in chains.items():
                    rows[(s, label)] = b.run(d, s)
                print(f"  {b.name} {s} done", file=sys.stderr, flush=True)
            print(table(f"{b.name} — {group} settings ({b.split} split, k={b.k}, context 5, "
                        f"seed {b.seed}, n={len(b.cases)})", rows, b), flush=True)  # fmt: skip
            b.save_hits()


ABLATION = {
    "ragdefender (all)": {},
    "- question coverage": {"coverage_threshold": 101.0},
    "- typo view": {"typo_view": False},
    "- coverage and typo view": {"coverage_threshold": 101.0, "typo_view": False},
    "- planted-group kNN": {"group_knn": False},
    "+ echo pairs' 2nd signal (clean-first)": {"echo_group_margin": 0.03},
    "- question-echo pairs": {"echo_pairs": False},
    "- near-copy conflicts": {"copy_conflicts": False},
    "- all five (previous release)": {
        "echo_pairs": False,
        "copy_conflicts": False,
        "group_knn": False,
        "coverage_threshold": 101.0,
        "typo_view": False,
    },
    "- verbatim restatement": {"restated_question": False},
    "- claim consensus": {"claim_consensus": False},
    "- numbers disagree": {"numbers_disagree": False},
    "- signature of distinct pages only": {"signature_distinct": False},
    "- lone restatement": {"lone_echo": 2.0},
    "- neighbourhood bars": {"neighbourhood_bars": False},
    "- derivative (index-side novelty)": {"derivative_novelty": -1.0},
    "+ density_lexical 0.8 (opt-in)": {"density_lexical": 0.8},
}


def section_ablation(benches: Sequence[Bench], args: argparse.Namespace) -> None:
    from ragshield.defenses.ragdefender import RAGDefender

    for b in benches:
        rows = {}
        for s in ("clean", *PUBLISHED[1:], *ADAPTIVE):
            for label, params in ABLATION.items():
                d = calibrated(b, RAGDefender(b.encoder, mode=b.mode, **params))  # type: ignore[arg-type]
                rows[(s, label)] = b.run(d, s)
        print(table(f"{b.name} — ablation ({b.split} split)", rows, b), flush=True)
        b.save_hits()


def section_variants(benches: Sequence[Bench], args: argparse.Namespace) -> None:
    """RAGDefender with each parameter set of ``--variants`` (a JSON object: label ->
    overrides) on every setting (or ``--settings``): the dev studies' command."""
    from ragshield.defenses.ragdefender import RAGDefender

    variants = json.loads(args.variants)
    every = [x for x in ("clean", *PUBLISHED[1:], *ADAPTIVE)
             if not args.settings or x in args.settings.split(",")]  # fmt: skip
    for b in benches:
        rows = {}
        for s in every:
            for label, params in variants.items():
                d = calibrated(b, RAGDefender(b.encoder, mode=b.mode, **params))
                rows[(s, label)] = b.run(d, s)
            print(f"  {b.name} {s} done", file=sys.stderr, flush=True)
        print(table(f"{b.name} — RAGDefender variants ({b.split} split)", rows, b), flush=True)
        b.save_hits()


def _grid() -> list[dict[str, Any]]:
    keys = list(GRID)
    return [dict(zip(keys, vals, strict=True)) for vals in itertools.product(*GRID.values())]


def section_lofo(dev: Sequence[Bench], test: Sequence[Bench], args: argparse.Namespace,
                 written: tuple[Sequence[Bench], Sequence[Bench]] = ((), ())) -> None:  # fmt: skip
    """Thresholds chosen without the held-out family (dev), its rows reported (test).
    ``written`` = (dev, test) benches whose texts the LLM wrote (``--lofo-writer``): the
    "LLM-written" family's settings run there, every other family's on ``dev`` / ``test``;
    without them that family is left out of the table (and of every tuning)."""
    from ragshield.defenses.ragdefender import RAGDefender

    dev_w, test_w = written
    families = {f: s for f, s in FAMILIES.items() if s and (f != WRITTEN or dev_w)}

    def cells(fam: str, plain: Sequence[Bench], llm: Sequence[Bench]) -> list[tuple[Bench, str]]:
        return [(b, x) for b in (llm if fam == WRITTEN else plain) for x in families[fam]]

    grid = _grid()
    scores: dict[tuple[int, int, str], dict[str, float]] = {}
    for gi, params in enumerate(grid):
        runs = [(b, "clean") for b in dev] + [c for f in families for c in cells(f, dev, dev_w)]
        made: dict[int, Any] = {}
        for b, x in runs:
            if id(b) not in made:
                made[id(b)] = calibrated(b, RAGDefender(b.encoder, mode=b.mode, **params))  # type: ignore[arg-type]
            scores[(gi, id(b), x)] = b.run(made[id(b)], x)
        print(f"  lofo grid {gi + 1}/{len(grid)} {params}", file=sys.stderr, flush=True)
        for b in (*dev, *dev_w):
            b.save_hits()
    lines = ["### Leave-one-family-out (tuned on dev without the family, reported on test)", "",
             "| held-out family | chosen on dev | dataset | settings | attack_reaches | "
             "adv_majority | gold_kept / gold_retrieved | clean benign_removed |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for fam in families:
        train = [c for f in families if f != fam for c in cells(f, dev, dev_w)]

        def objective(gi: int, train: list[tuple[Bench, str]] = train) -> tuple[float, float]:
            clean = max(scores[(gi, id(b), "clean")]["benign_removed"] for b in dev)
            caught = float(np.mean([1.0 - scores[(gi, id(b), x)]["attack_reaches"]
                                    for b, x in train]))  # fmt: skip
            return (caught if clean <= CLEAN_BUDGET else -1.0, -clean)

        best = max(range(len(grid)), key=objective)
        params = grid[best]
        for b in test_w if fam == WRITTEN else test:
            d = calibrated(b, RAGDefender(b.encoder, mode=b.mode, **params))  # type: ignore[arg-type]
            clean = b.run(d, "clean")
            ms = [b.run(d, x) for x in families[fam]]
            reach = np.mean([m["attack_reaches"] for m in ms])
            maj = np.mean([m["adv_majority"] for m in ms])
            gk = np.mean([m["gold_kept"] for m in ms])
            gr = np.mean([m["gold_retrieved"] for m in ms])
            pstr = ", ".join(f"{k}={v}" for k, v in params.items())
            name = b.name + (f" (texts: {b.writer})" if fam == WRITTEN else "")
            lines.append(f"| {fam} | {pstr} | {name} | {len(families[fam])} | {reach:.3f} | "
                         f"{maj:.3f} | {gk:.3f} / {gr:.3f} | {clean['benign_removed']:.3f} |")  # fmt: skip
    print("\n".join(lines) + "\n", flush=True)


def section_speed(benches: Sequence[Bench], args: argparse.Namespace) -> None:
    from ragshield.defenses.ragdefender import RAGDefender

    lines = ["### Filter time, warm caches (k=10, one thread)", "",
             "| dataset | setting | calls | p50 ms | p95 ms |", "|---|---|---|---|---|"]  # fmt: skip
    for b in benches:
        d = calibrated(b, RAGDefender(b.encoder, mode=b.mode))  # type: ignore[arg-type]
        for s in ("clean", "poisonedrag", "prefix-statement"):
            hits, _, _, _ = b.hits(s)
            for case, r in zip(b.cases, hits, strict=True):
                d.filter(case.question, r)  # warm: sentence and question vectors cached
            times = []
            for case, r in zip(b.cases, hits, strict=True):
                t0 = time.perf_counter()
                d.filter(case.question, r)
                times.append((time.perf_counter() - t0) * 1000.0)
            p50, p95 = statistics.median(times), float(np.percentile(times, 95))
            lines.append(f"| {b.name} | {s} | {len(times)} | {p50:.1f} | {p95:.1f} |")
    print("\n".join(lines) + "\n", flush=True)


def section_groups(dev: Sequence[Bench], test: Sequence[Bench], args: argparse.Namespace) -> None:
    """The planted-group signal alone (no filter around it): share of benign and of planted
    retrieved passages it flags, per split and setting, bars from the index profile."""
    from ragshield.defenses.ragdefender import trigram_cosine_matrix
    from ragshield.defenses.ragdefender.groups import knn_group_members

    lines = ["### Planted-group signal alone (benign flagged / planted flagged)", "",
             "| dataset | split | bars (2nd/3rd/4th NN p99.9) | setting | benign flagged | "
             "planted flagged | questions with every planted passage flagged |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for b in (*dev, *test):
        calibrated(b, None)  # computes the index profile once
        bars = b._profile.group_similarity  # type: ignore[attr-defined]
        for s in ("clean", "poisonedrag", *ADAPTIVE):
            hits, planted, _, _ = b.hits(s)
            fb = nb = fp = npl = every = attacked = 0
            for r in hits:
                v = np.vstack([h.embedding for h in r])
                lab = np.array([h.id in planted for h in r])
                lex = trigram_cosine_matrix([h.text for h in r])
                flag = knn_group_members(v @ v.T, lex, bars, 0.8).members
                fb, nb = fb + int((flag & ~lab).sum()), nb + int((~lab).sum())
                fp, npl = fp + int((flag & lab).sum()), npl + int(lab.sum())
                if lab.any():
                    attacked += 1
                    every += int(flag[lab].all())
            lines.append(f"| {b.name} | {b.split} | {'/'.join(f'{x:.3f}' for x in bars)} | {s} | "
                         f"{fb / max(nb, 1):.3f} ({fb}/{nb}) | "
                         f"{(f'{fp / npl:.2f}' if npl else '–')} | "
                         f"{(f'{every / attacked:.2f}' if attacked else '–')} |")  # fmt: skip
    print("\n".join(lines) + "\n", flush=True)


def section_novelty(benches: Sequence[Bench], args: argparse.Namespace) -> None:
    """The index-side novelty alone (:mod:`ragshield.store.calibration_novelty`, no filter
    around it): per setting, the retrieved benign, gold and planted passages' median
    novelty and the share at or below the derivative stage's bar with enough rare words
    (the stage also needs echo >= ``derivative_echo``, not applied here)."""
    from ragshield.defenses.ragdefender.settings import EvidenceParams

    e = EvidenceParams()
    lines = ["### Index-side novelty alone (median share / share <= bar with enough rare words)",
             "", f"bar {e.derivative_novelty}, rare words >= {e.derivative_min_rare}", "",
             "| dataset | split | setting | benign | gold | planted |", "|---|---|---|---|---|---|"]  # fmt: skip
    for b in benches:
        for s in ("clean", *PUBLISHED[1:], *ADAPTIVE):
            hits, planted, _, _ = b.hits(s)
            table = b.novelty(s)
            kinds: dict[str, list[Any]] = {"benign": [], "gold": [], "planted": []}
            for case, r in zip(b.cases, hits, strict=True):
                for h in r:
                    kind = "planted" if h.id in planted else (
                        "gold" if h.id in case.gold_ids else "benign")  # fmt: skip
                    kinds[kind].append(table[h.id])
            cells = []
            for v in kinds.values():
                if not v:
                    cells.append("–")
                    continue
                flagged = np.mean([x.share <= e.derivative_novelty and
                                   x.rare >= e.derivative_min_rare for x in v])  # fmt: skip
                cells.append(f"{np.median([x.share for x in v]):.2f} / {flagged:.3f} (n={len(v)})")
            lines.append(f"| {b.name} | {b.split} | {s} | " + " | ".join(cells) + " |")
        b.save_hits()
    print("\n".join(lines) + "\n", flush=True)


SECTIONS = ("main", "ablation", "lofo", "speed", "groups", "variants", "novelty")


def check_args(args: argparse.Namespace, sections: set[str]) -> str | None:
    """What is wrong with a command line, before any index is built (exit 2), or None.
    Why each combination is refused: ``--writer`` with ``--lofo-writer`` would put the
    LLM-written family into every tuning set (the dev split gets the writer's texts), so
    the held-out row would not be held out; ``--lofo-writer`` outside ``lofo`` and a
    writer dataset not run would be ignored without a word."""
    unknown = sections - set(SECTIONS)
    if unknown:
        return f"unknown section(s) {sorted(unknown)}; use {', '.join(SECTIONS)}"
    try:
        if not isinstance(json.loads(args.variants), dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return f"--variants must be a JSON object of objects ({exc})"
    if not 0.0 <= args.later_share <= 1.0:
        return f"--later-share must be in [0, 1], got {args.later_share}"
    if args.writer_replace and not args.writer:
        return "--writer-replace needs --writer SPEC"
    if "lofo" in sections and args.split != "test":
        return "lofo tunes on dev and reports on test: run it with --split test"
    if args.lofo_writer and "lofo" not in sections:
        return "--lofo-writer is the lofo section's LLM-written family: add lofo to --sections"
    if args.lofo_writer and args.writer:  # lofo is in sections (checked just above)
        return ("--writer with --lofo-writer puts the LLM-written family into every lofo "
                "tuning set: run lofo without --writer")  # fmt: skip
    if args.lofo_writer:
        names = set(args.datasets.split(","))
        stray = sorted(set(args.lofo_writer_datasets.split(",")) - names)
        if stray:
            return f"--lofo-writer-datasets {stray} not in --datasets {sorted(names)}"
    return None


def parser() -> argparse.ArgumentParser:
    """The command line (:func:`main`; :func:`check_args` judges what it parsed)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="hotpotqa,squad")
    ap.add_argument("--sections", default="main,ablation,lofo,speed")
    ap.add_argument("--defenses", default=DEFAULT_DEFENSES)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--no-novelty", dest="novelty", action="store_false",
                    help="hand RAGDefender no index-side novelty table (an old index)")  # fmt: skip
    ap.add_argument("--no-provenance", dest="provenance", action="store_false",
                    help="plant without the metadata `ragshield add` stamps (no added_at)")  # fmt: skip
    ap.add_argument("--later-share", type=float, default=0.0,
                    help="stamp this seeded share of the index's passages as later additions")  # fmt: skip
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", choices=("dev", "test"), default="test",
                    help="main / ablation / speed on this split (dev: tuning studies)")  # fmt: skip
    ap.add_argument("--limit", type=int, default=None, help="first N questions of each split")
    ap.add_argument("--cache-dir", default=os.path.expanduser("~/.cache/ragshield/bench"))
    ap.add_argument("--settings", default=None,
                    help="main: only these settings (comma list), e.g. to split a run")  # fmt: skip
    ap.add_argument("--variants", default='{"ragdefender": {}}',
                    help="variants: RAGDefender overrides per label, a JSON object")  # fmt: skip
    ap.add_argument("--writer", default=None,
                    help="e.g. qwen2.5-0.5b: questions without published texts get LLM-written "
                         "ones (target, PoisonedRAG bodies, Tan et al. passages; bench_written)")  # fmt: skip
    ap.add_argument("--writer-replace", action="store_true",
                    help="with --writer: every question's texts are the LLM's, the published "
                         "ones too (HotpotQA test: the LLM-written family's main rows)")  # fmt: skip
    ap.add_argument("--lofo-writer", default=None,
                    help="lofo: the LLM-written family, texts by this spec (e.g. qwen2.5-0.5b) "
                         "on --lofo-writer-datasets (dev: the unpublished questions; test: "
                         "every question, in place of the published texts)")  # fmt: skip
    ap.add_argument(
        "--lofo-writer-datasets",
        default="hotpotqa",
        help="lofo: datasets the LLM-written family runs on (comma list)",
    )
    ap.add_argument("--hits-cache", default=None,
                    help="keep / reuse each setting's retrieved top-k here (a directory)")  # fmt: skip
    return ap


def main() -> None:
    args = parser().parse_args()
    if not SHARED.is_dir():
        sys.exit(f"skipped: {SHARED} is absent (the shared evaluation data)")
    sections = set(args.sections.split(","))
    problem = check_args(args, sections)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        sys.exit(2)
    from ragshield.embed.sentence_transformer import SentenceTransformerEncoder

    random.seed(args.seed)
    enc = SentenceTransformerEncoder()
    names = args.datasets.split(",")
    test = [Bench(n, args.split, enc, args, replace=args.writer_replace) for n in names]
    print(f"# bench_adaptive_poisoning (seed {args.seed}, k={args.k}, MiniLM, "
          f"limit {args.limit}, planted with provenance: {args.provenance}, "
          f"later share {args.later_share}, attack texts written by {args.writer or 'nobody'}"
          f"{' for every question, published ones replaced' if args.writer_replace else ''})\n",
          flush=True)  # fmt: skip

    def dev() -> list[Bench]:  # lofo and groups tune on the dev split
        return [Bench(n, "dev", enc, args) for n in names]

    def written() -> tuple[list[Bench], list[Bench]]:  # lofo's LLM-written family
        if not args.lofo_writer:
            return [], []
        ws = [n for n in args.lofo_writer_datasets.split(",") if n in names]
        return ([Bench(n, "dev", enc, args, writer=args.lofo_writer) for n in ws],
                [Bench(n, "test", enc, args, writer=args.lofo_writer, replace=True) for n in ws])  # fmt: skip

    runs: dict[str, Any] = {  # the sections in the order they print
        "main": lambda: section_main(test, args),
        "ablation": lambda: section_ablation(test, args),
        "lofo": lambda: section_lofo(dev(), test, args, written()),
        "variants": lambda: section_variants(test, args),
        "novelty": lambda: section_novelty(test, args),
        "speed": lambda: section_speed(test, args),
        "groups": lambda: section_groups(dev(), test, args),
    }
    for section, run in runs.items():
        if section in sections:
            run()


if __name__ == "__main__":
    main()
