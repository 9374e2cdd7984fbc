"""The throttle tells a diverse user from a signature-free sweeper (issue #15 item 13).

A small labelled set built here: a synthetic corpus of many short articles and a few long
ones, retrieved with TF-IDF (top 5, as the server hands to the generator), and sessions
replayed through the real :class:`ExtractionThrottle` on a SQLite ledger with the shipped
defaults. ``benchmarks/bench_throttle.py`` measures the same on SQuAD with a real encoder.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from bench_modules import benchmark
from ragshield.defenses.canary import CanaryGuard, canary_code, embed_canary, strip_canaries
from ragshield.server.config import ThrottleConfig
from ragshield.server.db import AuditRecord, Database
from ragshield.server.throttle import ExtractionThrottle, largest_region
from ragshield.types import Generation

SHORT, SHORT_LEN, LONG, LONG_LEN = 300, 6, 3, 120  # 2,160 chunks; a long article > region_limit


def _chunk(topic: str, j: int, n: int) -> str:
    # neighbouring chunks share a section word, as consecutive paragraphs share a subject
    nxt = f"{topic}s{j + 1}" if j + 1 < n else ""
    return f"{topic} {topic}s{j} {topic}s{j} {topic}s{j} {nxt} {nxt}"


def _corpus() -> list[tuple[str, str]]:
    out = []
    for t in range(SHORT):
        out += [(f"a{t}", _chunk(f"a{t}", j, SHORT_LEN)) for j in range(SHORT_LEN)]
    for t in range(LONG):
        out += [(f"b{t}", _chunk(f"b{t}", j, LONG_LEN)) for j in range(LONG_LEN)]
    return out


class _Index:
    def __init__(self) -> None:
        self.corpus = _corpus()
        self.vec = TfidfVectorizer()
        self.m = self.vec.fit_transform([text for _, text in self.corpus])

    def top5(self, query: str) -> list[str]:
        scores = (self.m @ self.vec.transform([query]).T).toarray().ravel()
        return [f"c{i}" for i in np.argsort(-scores, kind="stable")[:5]]


@pytest.fixture(scope="module")
def index() -> _Index:
    return _Index()


def _replay(
    index: _Index, queries: Sequence[str], tmp_path: Path, cfg: ThrottleConfig | None = None
) -> tuple[int | None, int]:
    """First slowed/refused query (1-based, or None) and distinct chunks served before it."""
    clock = [1_700_000_000.0]
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = Database(f"sqlite:///{tmp_path / 'ledger.db'}")
    db.migrate()
    throttle = ExtractionThrottle(
        cfg or ThrottleConfig(), db, len(index.corpus), clock=lambda: clock[0]
    )
    seen: set[str] = set()
    try:
        for i, q in enumerate(queries, 1):
            clock[0] += 10.0
            if throttle.check("k", q).action != "allow":
                return i, len(seen)
            ids = index.top5(q)
            seen.update(ids)
            rec = AuditRecord(
                "r", "k", clock[0], "ask", 200, "ok", "", 5, [], ids, [], None, None, None, 1.0
            )
            db.record(rec, served=ids)
        return None, len(seen)
    finally:
        db.close()


def test_largest_region_joins_answers_that_share_a_chunk() -> None:
    assert largest_region([]) == 0
    assert largest_region([["a", "b"], ["c", "d"]]) == 2
    assert largest_region([["a", "b"], ["c", "d"], ["b", "e"]]) == 3
    assert largest_region([["a", "b"], ["c", "d"], ["b", "c"]]) == 4


def test_diverse_user_is_not_slowed_within_30_queries(index: _Index, tmp_path: Path) -> None:
    rng = random.Random(0)
    queries = [
        f"what about a{t} a{t}s{rng.randrange(SHORT_LEN)}" for t in rng.sample(range(SHORT), 30)
    ]
    flagged, covered = _replay(index, queries, tmp_path)
    assert covered >= 100  # every answer brought new chunks: the novelty rule's blind spot
    assert flagged is None
    slowed, _ = _replay(
        index, queries, tmp_path / "old", ThrottleConfig(novelty_window=20, region_limit=0)
    )
    assert slowed is not None and slowed <= 21  # what issue #15 item 13 reported


def test_topical_user_with_follow_ups_is_not_slowed(index: _Index, tmp_path: Path) -> None:
    rng = random.Random(1)
    queries = []
    for _ in range(30):
        t = rng.choice(["b0", "b1", "a7"])
        n = LONG_LEN if t.startswith("b") else SHORT_LEN
        queries.append(f"tell me more about {t} {t}s{rng.randrange(n // 3)}")  # a part of each
    flagged, _ = _replay(index, queries, tmp_path)
    assert flagged is None


def test_signature_free_sweeper_is_slowed_before_it_covers_110_chunks(
    index: _Index, tmp_path: Path
) -> None:
    queries = [f"what does b1 b1s{j} say" for j in range(LONG_LEN)]  # plain questions, in order
    flagged, covered = _replay(index, queries, tmp_path)
    assert flagged is not None and covered < 110  # region_limit 100 (the benches' dev grids)
    missed, _ = _replay(index, queries, tmp_path / "off", ThrottleConfig(region_limit=0))
    assert missed is None  # without the region rule nothing catches it


@pytest.mark.parametrize(
    ("action", "leak", "refused"),
    [
        ("refuse", {"kind": "canary", "contexts": [0]}, True),
        ("refuse", {"kind": "verbatim", "contexts": [0, 3]}, True),
        ("refuse", {"kind": "breadth", "contexts": [0, 1, 4]}, True),
        ("refuse", {"kind": "recovery", "contexts": [1, 2]}, True),
        ("log", {"kind": "canary", "contexts": [0]}, False),
    ],
)
def test_a_reported_leak_blocks_the_key(
    tmp_path: Path, action: str, leak: dict[str, object], refused: bool
) -> None:
    """The canary output check's signal (issue #26): one answer caught copying chunks blocks
    the key, whatever its questions look like; another key is not affected."""
    clock = [1_700_000_000.0]
    db = Database(f"sqlite:///{tmp_path / 'ledger.db'}")
    db.migrate()
    try:
        throttle = ExtractionThrottle(
            ThrottleConfig(leak_action=action),
            db,
            1000,
            clock=lambda: clock[0],  # type: ignore[arg-type]
        )
        assert throttle.check("k", "what does b1 say").action == "allow"
        verdict = throttle.report_leak("k", leak)
        assert verdict.kind == "leak" and "copied" in verdict.reason
        assert f"({leak['kind']} output check)" in verdict.reason
        clock[0] += 10.0
        after = throttle.check("k", "an ordinary question")
        assert (after.action == "refuse") is refused
        if refused:
            assert after.kind == "blocked" and "copied" in after.reason
            clock[0] += ThrottleConfig().cooldown_seconds + 1  # the block ends
            assert throttle.check("k", "an ordinary question").action == "allow"
        assert throttle.check("other", "an ordinary question").action == "allow"
    finally:
        db.close()


class _Copier:
    """Test stand-in for an LLM told to repeat its context: from query ``start`` on, the
    answer is the retrieved chunks verbatim (with their canaries, as the 0.5B model wrote
    them in bench_extraction); before it, and for a normal user, a few words of the top one."""

    name = "copier"

    def __init__(self, start: int | None) -> None:
        self.start = start
        self.calls = 0

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        self.calls += 1
        if self.start is not None and self.calls >= self.start:
            return Generation(text="\n".join(contexts))
        return Generation(text=" ".join(strip_canaries(contexts[0]).split()[:3]))


def _served_session(
    index: _Index,
    queries: Sequence[str],
    tmp_path: Path,
    copy_from: int | None,
    cfg: ThrottleConfig,
) -> int | None:
    """First refused query (1-based, or None) of a session answered through the canary
    output check over a canaried copy of the index; a caught answer is reported to the
    throttle, as the service does."""
    marked = [
        embed_canary(text, canary_code("s3cret", f"c{i}"))
        for i, (_, text) in enumerate(index.corpus)
    ]
    guard = CanaryGuard(_Copier(copy_from))
    clock = [1_700_000_000.0]
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = Database(f"sqlite:///{tmp_path / 'ledger.db'}")
    db.migrate()
    throttle = ExtractionThrottle(cfg, db, len(index.corpus), clock=lambda: clock[0])
    try:
        for i, q in enumerate(queries, 1):
            clock[0] += 10.0
            if throttle.check("k", q).action != "allow":
                return i
            ids = index.top5(q)
            answer = guard.generate(q, [marked[int(c[1:])] for c in ids])
            rec = AuditRecord(
                "r", "k", clock[0], "ask", 200, "ok", "", 5, [], ids, [], None, None, None, 1.0
            )
            db.record(rec, served=ids)
            if "leak" in answer.details:
                throttle.report_leak("k", answer.details["leak"])
        return None
    finally:
        db.close()


# only the leak signal acts: no region rule, a coverage limit no session reaches
LEAK_ONLY = ThrottleConfig(region_limit=0, coverage_limit=1.0)


@pytest.mark.parametrize(
    ("who", "copy_from", "cfg", "expect"),
    [
        ("sweeper copying from its first answer", 1, LEAK_ONLY, 2),
        ("sweeper copying from query 12", 12, LEAK_ONLY, 13),
        ("the same sweeper, leak only logged", 12, LEAK_ONLY.model_copy(update={"leak_action": "log"}), None),
        ("diverse user, short answers", None, ThrottleConfig(), None),
    ],
)  # fmt: skip
def test_canary_signal_blocks_a_copying_session_at_the_next_query(
    index: _Index,
    tmp_path: Path,
    who: str,
    copy_from: int | None,
    cfg: ThrottleConfig,
    expect: int | None,
) -> None:
    """Issue #26: the canary check reads the *answer*, so a session of plain, signature-free
    questions is stopped at the query after the first copied answer; ordinary short answers
    never carry a canary, so a diverse user is never stopped by it."""
    rng = random.Random(2)
    if copy_from is None:
        picks = rng.sample(range(SHORT), 30)
        queries = [f"what about a{t} a{t}s{rng.randrange(SHORT_LEN)}" for t in picks]
    else:  # plain questions walking one long article (below the region rule: it is off)
        queries = [f"what does b2 b2s{j} say" for j in range(30)]
    assert _served_session(index, queries, tmp_path, copy_from, cfg) == expect, who


@pytest.mark.parametrize(
    ("leaks", "signal", "flag"),
    [
        ([False, False, True, False, False], True, (4, "blocked")),  # the query after the catch
        ([False, False, True, False, False], False, None),  # the signal is what stops it
        ([False] * 5, True, None),  # a session nothing caught is never stopped by it
    ],
)
def test_bench_replays_llm_sessions_with_the_canary_signal(
    tmp_path: Path, leaks: list[bool], signal: bool, flag: tuple[int, str] | None
) -> None:
    bench = benchmark("bench_throttle")
    queries = [f"what helps with symptom {i}?" for i in range(5)]
    served = [[f"c{i}"] for i in range(5)]
    got = bench.replay_llm(
        queries, served, leaks, {"signatures": {}}, 500, tmp_path, report_leaks=signal
    )
    assert got == flag


@pytest.mark.parametrize(("n", "runs"), [(30, 3), (10, 3), (6, 1)])
def test_topical_sessions_are_runs_of_neighbours(n: int, runs: int) -> None:
    """A topical user of the LLM-answered bench asks ``runs`` runs of follow-ups: each run
    is a seed question and the questions nearest to it, no question twice."""
    bench = benchmark("throttle_llm")
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(runs, 16))
    # one tight group of 20 questions per complaint, the groups far apart
    vecs = np.concatenate([c + 0.01 * rng.normal(size=(20, 16)) for c in centres])
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    order = bench.topical_order(vecs.astype(np.float32), random.Random(0), n, runs)
    assert len(order) == n and len(set(order)) == n
    sizes = [n // runs + (i < n % runs) for i in range(runs)]
    start = 0
    for size in sizes:
        groups = {i // 20 for i in order[start : start + size]}
        assert len(groups) == 1  # one run stays within one complaint
        start += size


def test_normal_sessions_keep_the_logged_verdicts() -> None:
    bench = benchmark("throttle_llm")
    recs = [{"query": f"q{i}", "leak": i == 3} for i in range(12)]
    served = [(f"c{i}",) for i in range(12)]
    vecs = np.eye(12, dtype=np.float32)
    got = bench.normal_sessions(recs, served, vecs, per_kind=2, queries=6, seed=0, half="dev")
    assert [s.kind for s in got] == ["normal-diverse"] * 2 + ["normal-topical"] * 2
    for s in got:
        assert s.label == "normal" and len(s.queries) == 6 == len(set(s.queries))
        for q, ids, leak in zip(s.queries, s.served, s.leaks, strict=True):
            assert ids == (f"c{q[1:]}",) and leak is (q == "q3")


@pytest.mark.parametrize(
    ("flags", "fp", "miss", "missed"),
    [
        ([True, False, True, False], 1, 1, ("worm-one",)),  # one user slowed, one sweep missed
        ([False, False, True, True], 0, 0, ()),
        ([True, True, False, False], 2, 2, ("sweep-opening", "worm-one")),
    ],
)
def test_pooled_counts_say_x_of_n(
    flags: list[bool], fp: int, miss: int, missed: tuple[str, ...]
) -> None:
    """Issue #26, Session 8: the pooled throttle bench reports counts, not only rates — a
    normal session flagged is a false positive, an attack session never flagged a miss,
    and both benches' counts add up."""
    bench = benchmark("throttle_pooled")
    labels = ["normal", "normal", "extraction", "extraction"]
    kinds = ["normal-diverse", "normal-topical", "sweep-opening", "worm-one"]
    c = bench.count(labels, kinds, flags)
    assert (c.fp, c.normal, c.miss, c.attacks, c.missed) == (fp, 2, miss, 2, missed)
    both = c + c
    assert (both.fp, both.normal, both.miss, both.attacks) == (2 * fp, 4, 2 * miss, 4)
    assert f"FP {2 * fp}/4" in both.cell() and f"miss {2 * miss}/4" in both.cell()


def test_extra_attack_sessions_use_fresh_seeds() -> None:
    """``--extra-attacks`` adds every kind, worm-one included, on seeds the first build
    never used (``seed * 1000 + i`` with i < per_kind), so no added session repeats one."""
    bench = benchmark("bench_throttle")
    makers = bench.attack_makers(None, 5)
    assert list(makers) == ["rag-thief-plain", "rag-thief", "worm", "worm-one"]
    assert bench.EXTRA_SEED_OFFSET > 100  # above any --per-kind the bench is run with
    assert makers["worm-one"](bench.EXTRA_SEED_OFFSET).name == "worm-one"
