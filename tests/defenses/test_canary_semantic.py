"""The semantic output check: paraphrased dumps of several chunks are caught, a normal
answer that restates its one record is not (real MiniLM encoder)."""

from __future__ import annotations

import pytest

from fakes import EchoGenerator
from ragshield.defenses.canary import BLOCKED, CanaryGuard, embed_canary, wrap_canary
from ragshield.defenses.canary_semantic import SemanticCopyCheck
from ragshield.errors import InputError

CONTEXTS = [
    "I have had a swollen knee for a week after falling off my bike.\n"
    "The knee needs rest, ice and compression, and an x-ray to rule out a fracture.",
    "My daughter has a sore throat and a fever of 39 degrees since Monday.\n"
    "A throat swab will show whether it is strep; give paracetamol for the fever.",
    "I keep waking up at night with heartburn after dinner.\n"
    "Avoid late meals and spicy food, raise the head of the bed, and try an antacid.",
]
#: what the model writes when asked to restate the context in other words (hand-written)
PARAPHRASED_DUMP = (
    "Someone's knee has been swollen for seven days since a bicycle fall. "
    "It should be rested, iced and compressed, with an x-ray to exclude a broken bone.\n"
    "A girl has had a sore throat and a 39 degree fever since Monday. "
    "A swab of the throat will tell if it is strep, and paracetamol helps the fever.\n"
    "A person wakes at night with heartburn after eating dinner. "
    "They should not eat late or spicy, should prop up the bed head and take an antacid."
)
NORMAL_ANSWER = (
    "Rest the knee, put ice on it and keep it compressed. "
    "Get an x-ray so that a fracture can be ruled out."
)


@pytest.fixture(scope="module")
def check(encoder) -> SemanticCopyCheck:  # type: ignore[no-untyped-def]
    return SemanticCopyCheck(encoder)


def test_paraphrased_dump_is_caught(check: SemanticCopyCheck) -> None:
    leak = check.check(PARAPHRASED_DUMP, CONTEXTS)
    assert leak is not None and leak.kind == "semantic" and len(leak.contexts) >= 2


def test_canaries_in_the_context_do_not_matter(check: SemanticCopyCheck) -> None:
    marked = [embed_canary(c, "ABCD-EFGH-JKLM") for c in CONTEXTS]
    assert check.check(PARAPHRASED_DUMP, marked) is not None


@pytest.mark.parametrize(
    "answer",
    [NORMAL_ANSWER, "I don't know.", "", "Please see a doctor if it gets worse."],
)
def test_a_normal_answer_is_not_a_leak(check: SemanticCopyCheck, answer: str) -> None:
    assert check.check(answer, CONTEXTS) is None


def test_restatements_name_the_chunk_each_sentence_restates(check: SemanticCopyCheck) -> None:
    rs = check.restatements(NORMAL_ANSWER, CONTEXTS)
    assert rs[0].context == 0 and rs[0].sentences == 2


def test_min_chunks_one_flags_a_single_restated_record(encoder) -> None:  # type: ignore[no-untyped-def]
    one = SemanticCopyCheck(encoder, min_chunks=1, threshold=0.6)
    assert one.check(NORMAL_ANSWER, CONTEXTS) is not None


@pytest.mark.parametrize(
    ("params", "match"),
    [({"threshold": 2.0}, "threshold"), ({"min_chunks": 0}, "min_chunks")],
)
def test_validated_on_use(encoder, params: dict[str, float], match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=match):
        SemanticCopyCheck(encoder, **params).check("x y z w", CONTEXTS)


def test_bare_string_contexts_refused(check: SemanticCopyCheck) -> None:
    with pytest.raises(InputError, match="bare string"):
        check.restatements("some answer text here", "one context")


@pytest.mark.parametrize("action", ["block", "redact"])
def test_guard_blocks_a_paraphrased_dump_only_when_asked(encoder, action: str) -> None:  # type: ignore[no-untyped-def]
    plain = CanaryGuard(EchoGenerator(PARAPHRASED_DUMP), action=action)  # type: ignore[arg-type]
    assert "leak" not in plain.generate("q", CONTEXTS).details  # no marker, no long run
    guard = CanaryGuard(
        EchoGenerator(PARAPHRASED_DUMP),  # type: ignore[arg-type]
        action=action,  # type: ignore[arg-type]
        semantic_threshold=0.85,
        encoder=encoder,
    )
    got = guard.generate("q", CONTEXTS)
    assert got.details["leak"]["kind"] == "semantic" and got.text == BLOCKED
    normal = CanaryGuard(
        EchoGenerator(NORMAL_ANSWER),  # type: ignore[arg-type]
        semantic_threshold=0.85,
        encoder=encoder,
    )
    assert normal.generate("q", CONTEXTS).text == NORMAL_ANSWER


def test_registry_entry_hands_the_encoder_to_the_semantic_check(encoder) -> None:  # type: ignore[no-untyped-def]
    guard = wrap_canary(EchoGenerator("x"), encoder=encoder, semantic_threshold=0.85)  # type: ignore[arg-type]
    assert guard.encoder is encoder
    with pytest.raises(InputError, match="needs an encoder"):
        CanaryGuard(EchoGenerator("x"), semantic_threshold=0.85).generate("q", CONTEXTS)  # type: ignore[arg-type]
