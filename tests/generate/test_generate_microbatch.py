"""BatchingGenerator: concurrent generate() calls share generate_many calls, each caller
gets its own answer, and an error reaches every waiting caller (none hangs)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from ragshield.generate.microbatch import BatchingGenerator
from ragshield.types import Generation


class Slow:
    """Test stand-in: answers echo the question; a batch takes a little time."""

    name = "slow"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.lists: list[list[str]] = []
        self.lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return self.generate_many([(question, contexts)])[0]

    def generate_many(self, requests: Sequence[tuple[str, Sequence[str]]]) -> list[Generation]:
        with self.lock:
            self.lists.append([q for q, _ in requests])
        time.sleep(0.05)
        if self.fail:
            raise RuntimeError("model crashed")
        return [Generation(f"answer to {q} from {len(c)}") for q, c in requests]


def test_sessions_share_batches_and_get_their_own_answers() -> None:
    inner = Slow()
    gen = BatchingGenerator(inner, window_s=0.02)

    def session(i: int) -> list[str]:
        return [gen.generate(f"s{i} q{j}", ["c"] * i).text for j in range(5)]

    with ThreadPoolExecutor(6) as pool:
        out = list(pool.map(session, range(6)))
    assert out == [[f"answer to s{i} q{j} from {i}" for j in range(5)] for i in range(6)]
    asked = [q for batch in inner.lists for q in batch]
    assert sorted(asked) == sorted(f"s{i} q{j}" for i in range(6) for j in range(5))
    assert len(inner.lists) < 30 and max(gen.batches) > 1  # calls were shared
    assert sum(gen.batches) == 30


def test_an_error_reaches_every_waiting_caller() -> None:
    gen = BatchingGenerator(Slow(fail=True), window_s=0.05)
    errors: list[str] = []

    def call(i: int) -> None:
        try:
            gen.generate(f"q{i}", [])
        except RuntimeError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert errors == ["model crashed"] * 4


def test_max_batch_and_a_plain_inner() -> None:
    class Plain:
        name = "plain"

        def count_tokens(self, text: str) -> int:
            return 1

        def generate(self, question: str, contexts: Sequence[str]) -> Generation:
            return Generation(question.upper())

    gen = BatchingGenerator(Plain(), max_batch=2)  # type: ignore[arg-type]
    with ThreadPoolExecutor(5) as pool:
        out = list(pool.map(lambda q: gen.generate(q, []).text, ["a", "b", "c", "d", "e"]))
    assert out == ["A", "B", "C", "D", "E"] and max(gen.batches) <= 2
    assert gen.count_tokens("x y") == 1


@pytest.mark.parametrize("window", [0.0, 0.01])
def test_a_single_caller_is_answered_at_once(window: float) -> None:
    gen = BatchingGenerator(Slow(), window_s=window)
    assert gen.generate("q", ["c"]).text == "answer to q from 1"
    assert gen.batches == [1]


def test_rounds_wait_for_every_running_session() -> None:
    """Sessions doing different amounts of their own work between requests still meet in
    one call per round; a finished session is not waited for; a caller outside any session
    is answered through the time window."""
    from ragshield.generate.microbatch import RoundBatchingGenerator

    inner = Slow()
    rounds = [3, 3, 1]  # session 2 stops after one round
    gen = RoundBatchingGenerator(inner, range(3), window_s=0.01)

    def session(i: int) -> list[str]:
        out = []
        try:
            for j in range(rounds[i]):
                time.sleep(0.03 * i)  # its own work: the slower the later it asks
                with gen.asking(i):
                    out.append(gen.generate(f"s{i} r{j}", []).text)
        finally:
            gen.finish(i)
        return out

    with ThreadPoolExecutor(3) as pool:
        out = list(pool.map(session, range(3)))
    assert out == [[f"answer to s{i} r{j} from 0" for j in range(rounds[i])] for i in range(3)]
    assert gen.batches == [3, 2, 2]
    assert [sorted(b) for b in inner.lists] == [["s0 r0", "s1 r0", "s2 r0"], ["s0 r1", "s1 r1"],
                                                ["s0 r2", "s1 r2"]]  # fmt: skip
    assert gen.generate("outside", []).text == "answer to outside from 0"
    with pytest.raises(KeyError), gen.asking("nobody"):
        pass


def test_a_session_asking_several_at_once_is_one_round() -> None:
    """RAG-Thief asks a round's queries from several threads of its own: they are one
    round with the other session's query."""
    from ragshield.generate.microbatch import RoundBatchingGenerator

    inner = Slow()
    gen = RoundBatchingGenerator(inner, ["thief", "worm"], window_s=0.02)

    def ask(label: str, q: str) -> str:
        with gen.asking(label):
            return gen.generate(q, []).text

    def thief() -> list[str]:
        try:
            with ThreadPoolExecutor(4) as pool:
                return list(pool.map(lambda q: ask("thief", q), ["a", "b", "c", "d"]))
        finally:
            gen.finish("thief")

    def worm() -> list[str]:
        time.sleep(0.1)  # its collision search first
        try:
            return [ask("worm", "w")]
        finally:
            gen.finish("worm")

    with ThreadPoolExecutor(2) as pool:
        t, w = pool.submit(thief), pool.submit(worm)
        assert t.result() == [f"answer to {q} from 0" for q in "abcd"]
        assert w.result() == ["answer to w from 0"]
    assert gen.batches == [5]
