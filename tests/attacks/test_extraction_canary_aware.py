"""The canary-aware RAG-Thief: evasion commands, the attacker's decoding, registration."""

from __future__ import annotations

import pytest

from fakes import EchoGenerator
from ragshield.attacks import registry
from ragshield.attacks.extraction import CanaryAwareThief, RAGThief
from ragshield.attacks.extraction.canary_aware import TACTICS
from ragshield.defenses.canary import CanaryGuard, embed_canary
from ragshield.errors import InputError
from ragshield.types import Answer

CHUNKS = [
    "My knee has been swollen for a week after a fall. "
    "The doctor said the knee needs rest, ice and an x-ray to rule out a fracture of the bone.",
    "I have a sore throat and a fever since Monday. "
    "The doctor said the throat infection may need a swab and the fever comes down with rest.",
]


def _ask_with(answer: str):  # type: ignore[no-untyped-def]
    return lambda q: Answer(question=q, text=answer, passages=(), retrieved=())


def test_registered_and_built_from_the_registry() -> None:
    assert "rag-thief-canary-aware" in registry.available("query")
    attack = registry.build_attack("rag-thief-canary-aware", kind="query", max_queries=3)
    assert isinstance(attack, CanaryAwareThief) and isinstance(attack, RAGThief)


@pytest.mark.parametrize("tactic", sorted(TACTICS))
def test_every_query_carries_a_command_of_its_tactics(tactic: str) -> None:
    attack = CanaryAwareThief(tactics=[tactic], max_queries=25)
    attack.run(_ask_with("\n".join(CHUNKS)))
    assert len(attack.queries_) == 25
    assert {CanaryAwareThief.tactic_of(q) for q in attack.queries_} == {tactic}


def test_plain_rag_thief_queries_are_no_tactic() -> None:
    attack = RAGThief(max_queries=5)
    attack.run(_ask_with("nothing"))
    assert all(CanaryAwareThief.tactic_of(q) is None for q in attack.queries_)


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        ("Th3 doctor said th3 knee needs rest.", "The doctor said the knee needs rest."),
        ("th3rapy is not a code word", "th3rapy is not a code word"),  # whole words only
        ("no change here", "no change here"),
    ],
)
def test_decode_undoes_the_obfuscation(raw: str, read: str) -> None:
    assert CanaryAwareThief.decode(raw) == read


def test_outputs_and_memory_are_decoded_but_the_log_is_raw() -> None:
    raw = "\n".join(c.replace("the ", "th3 ") for c in CHUNKS)
    attack = CanaryAwareThief(max_queries=2)
    outputs = attack.run(_ask_with(raw))
    assert "th3" not in outputs[0] and "th3" in attack.log_[0][1]
    assert all("th3" not in chunk for chunk in attack.memory_.items)


def test_obfuscated_copy_passes_the_verbatim_rule_that_catches_the_plain_copy() -> None:
    """Why the tactic exists: the same copy is caught plain and missed when 'the' is
    spelled 'th3' (the runs break under 40 words) — the gap the semantic check closes."""

    long_chunks = [" ".join([c] * 3) for c in CHUNKS]  # > 40 words each
    contexts = [
        embed_canary(c, code)
        for c, code in zip(long_chunks, ("AAAA-BBBB-CCCC", "DDDD-EEEE-FFFF"), strict=True)
    ]
    plain = "\n".join(long_chunks)
    obfuscated = "\n".join(c.replace("the ", "th3 ") for c in long_chunks)
    guard = CanaryGuard(EchoGenerator(plain))
    assert "leak" in guard.generate("q", contexts).details
    guard = CanaryGuard(EchoGenerator(obfuscated))
    assert "leak" not in guard.generate("q", contexts).details


@pytest.mark.parametrize(
    ("tactics", "match"),
    [(["translate"], "translate"), ([], "at least one"), ("paraphrase", "bare string")],
)
def test_tactics_are_validated_on_run(tactics: object, match: str) -> None:
    attack = CanaryAwareThief(tactics=tactics, max_queries=1)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=match):
        attack.run(_ask_with("x"))
