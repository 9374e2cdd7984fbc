"""``DefaultEncoder``: the given encoder, else the packaged MiniLM, resolved once and late."""

from __future__ import annotations

from tests.fakes import HashEncoder

from ragshield.attacks.garag import TypoAttack
from ragshield.attacks.poisonedrag_whitebox import PoisonedRAGWhiteBoxAttack
from ragshield.embed.sentence_transformer import (
    DEFAULT_ENCODER,
    DefaultEncoder,
    SentenceTransformerEncoder,
)


def test_given_encoder_is_used_as_is() -> None:
    enc = HashEncoder()
    for owner in (TypoAttack(enc), PoisonedRAGWhiteBoxAttack(enc)):
        assert isinstance(owner, DefaultEncoder)
        assert owner.encoder_ is enc


def test_none_resolves_to_the_packaged_encoder_once() -> None:
    attack = TypoAttack()
    assert attack._encoder is None  # building the attack loaded nothing
    first = attack.encoder_
    assert isinstance(first, SentenceTransformerEncoder)
    assert first.name == DEFAULT_ENCODER
    assert attack.encoder_ is first
    # each owner resolves its own: the cache is per instance, not on the class
    assert PoisonedRAGWhiteBoxAttack().encoder_ is not first
