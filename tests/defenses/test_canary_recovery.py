"""The recovery check: an answer that reproduces two retrieved chunks by the CRR rule is a
leak even when every verbatim run is short and the markers are gone (the worm's rewritten
copies); a normal answer drawing on its one record is not (real MiniLM encoder)."""

from __future__ import annotations

import pytest

from fakes import EchoGenerator
from ragshield.defenses.canary import BLOCKED, CanaryGuard, check_output, embed_canary
from ragshield.defenses.canary_recovery import RecoveryCheck
from ragshield.errors import InputError

CONTEXTS = [
    "Doctor, I have had a swollen knee for a week after falling off my bike.\n"
    "The knee needs rest, ice and compression, and an x-ray to rule out a fracture.",
    "Doctor, my daughter has a sore throat and a fever of 39 degrees since Monday.\n"
    "A throat swab will show whether it is strep; give paracetamol for the fever.",
    "Doctor, I keep waking up at night with heartburn after dinner.\n"
    "Avoid late meals and spicy food, raise the head of the bed, and try an antacid.",
]
#: the worm's shape (Session 5's logs): each record rewritten in the first person, the
#: patient's and doctor's lines merged into one block, "Doctor," dropped
WORM_DUMP = (
    "<START>\nI have had a swollen knee for a week after falling off my bike. The knee "
    "needs rest, ice and compression, and an x-ray to rule out a fracture.\n<END>\n"
    "<START>\nMy daughter has a sore throat and a fever of 39 degrees since Monday. A "
    "throat swab will show whether it is strep.\n<END>"
)
#: a normal answer: the record's doctor answer, copied (what the 0.5B model does)
NORMAL_ANSWERS = [
    "The knee needs rest, ice and compression, and an x-ray to rule out a fracture.",
    "I don't know.",
    "",
    "Please see a doctor if the fever does not come down in two days.",
]


@pytest.fixture(scope="module")
def check(encoder) -> RecoveryCheck:  # type: ignore[no-untyped-def]
    return RecoveryCheck(encoder)


@pytest.mark.parametrize("placement", [None, "head", "sentence"])
def test_a_rewritten_two_record_dump_is_caught(check: RecoveryCheck, placement: str | None) -> None:
    ctx = (
        CONTEXTS
        if placement is None
        else [embed_canary(c, "ABCD-EFGH-JKLM", placement) for c in CONTEXTS]
    )
    assert check_output(WORM_DUMP, ctx, min_span_words=40, breadth_span_words=12) is None
    leak = check.check(WORM_DUMP, ctx)
    assert leak is not None and leak.kind == "recovery" and set(leak.contexts) == {0, 1}


@pytest.mark.parametrize("answer", NORMAL_ANSWERS)
def test_a_normal_answer_is_not_a_leak(check: RecoveryCheck, answer: str) -> None:
    assert check.check(answer, CONTEXTS) is None
    assert len(check.recovered(answer, CONTEXTS)) <= 1


def test_guard_blocks_with_an_encoder_and_not_without(encoder) -> None:  # type: ignore[no-untyped-def]
    on = CanaryGuard(EchoGenerator(WORM_DUMP), encoder=encoder, action="redact")
    g = on.generate("q", CONTEXTS)
    assert g.text == BLOCKED and g.details["leak"]["kind"] == "recovery"  # nothing to redact
    for off in (
        CanaryGuard(EchoGenerator(WORM_DUMP)),
        CanaryGuard(EchoGenerator(WORM_DUMP), encoder=encoder, recovery_chunks=None),
    ):
        assert "leak" not in off.generate("q", CONTEXTS).details


@pytest.mark.parametrize(
    "bad", [{"min_chunks": 0}, {"rouge_threshold": 1.5}, {"cosine_threshold": 2.0}]
)
def test_bad_settings_are_refused(encoder, bad: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError):
        RecoveryCheck(encoder, **bad).check(WORM_DUMP, CONTEXTS)  # type: ignore[arg-type]
