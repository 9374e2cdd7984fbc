"""``benchmarks/bench_writer_tokens.py``: its stop rule fires only where the text an attack
keeps can no longer change, whatever the model would have written after it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

CONTINUATIONS = (
    "",
    " And then more words follow.",
    " unfinished tail",
    "\n\n**Note:** x",
    '"',
    "'",
)
LONG = " ".join(f"word{i}" for i in range(64))  # 64 words: past PoisonedRAG's cut of 60


def _bench() -> ModuleType:
    bench_dir = Path(__file__).resolve().parents[2] / "benchmarks"
    if str(bench_dir) not in sys.path:  # a benchmark imports its siblings by name
        sys.path.insert(0, str(bench_dir))
    spec = importlib.util.spec_from_file_location(
        "bench_writer_tokens", bench_dir / "bench_writer_tokens.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


BENCH = _bench()
KIND = {k.name: k for k in BENCH.KINDS}


@pytest.mark.parametrize(
    ("kind", "prefix", "done"),
    [
        ("poisonedrag", f"Intro. {LONG}. Next", True),  # a sentence end after word 60
        ("poisonedrag", f"**Passage:** {LONG}! Next", True),
        ("poisonedrag", LONG, False),  # no sentence end yet: a later one decides the cut
        ("poisonedrag", f"{LONG}.", False),  # no text after the stop yet
        ("poisonedrag", f"'{LONG}. Next", False),  # a quote pair strips only at the end
        ("poisonedrag", "Short. Passage of a few words. Then", False),
        ("misleading", f"{LONG}. Next", False),  # its cut is at 100 words
        ("target", "Sydney\nBecause it is", True),
        ("target", "\n\nSydney", False),  # leading blank lines do not end the first line
        ("target", "Sydney", False),
    ],
)
def test_the_stop_rule_fires_only_where_the_kept_text_is_fixed(
    kind: str, prefix: str, done: bool
) -> None:
    rule = KIND[kind]
    assert rule.done(prefix) is done
    kept = {rule.kept(prefix + more) for more in CONTINUATIONS}
    if done:  # one kept text for every continuation
        assert len(kept) == 1, kept


def test_prompt_kinds_are_told_apart() -> None:
    from ragshield.attacks.misleading import MisleadingPassageAttack
    from ragshield.attacks.poisonedrag import PoisonedRAGAttack

    q, t = "who founded the city", "John Doe"
    pr = PoisonedRAGAttack("template").prompt(q, t, "")
    mis = MisleadingPassageAttack("template").prompt(q, t, "")
    assert BENCH._kind_of(pr).name == "poisonedrag"
    assert BENCH._kind_of(mis).name == "misleading"
    assert BENCH._kind_of("Passage: something else") is None


def test_an_empty_cache_folder_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["bench_writer_tokens.py", str(tmp_path)])
    with pytest.raises(SystemExit) as stop:
        BENCH.main()
    assert stop.value.code == 2 and "no cached writer replies" in capsys.readouterr().err
