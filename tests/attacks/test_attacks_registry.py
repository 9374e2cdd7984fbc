"""The one attack registry: names, kinds, presets, errors, and the eval modules using it."""

from __future__ import annotations

import pytest

from ragshield.attacks import registry
from ragshield.attacks.base import CorpusAttack, QueryAttack
from ragshield.errors import InputError

#: Attacks that build without a model download or an LLM call at construction time.
CORPUS = [
    "garag-typos",
    "injection",
    "injection-offtopic",
    "injection-question",
    "misleading",
    "poisonedrag-blackbox",
    "poisonedrag-whitebox",
    "suffix",
    "suffix-offtopic",
    "suffix-question",
]


class TestRegistry:
    def test_kinds_partition_the_names(self) -> None:
        corpus, query = registry.available("corpus"), registry.available("query")
        assert set(CORPUS) <= set(corpus)
        assert {"rag-thief", "worm"} <= set(query)
        assert not set(corpus) & set(query)
        assert sorted(corpus + query) == registry.available()

    def test_data_backed_names_are_not_reused(self) -> None:
        """'poisonedrag', 'blind', 'garag' mean the published passages in eval.poisoning."""
        from ragshield.eval.datasets import ATTACK_SOURCES

        assert not set(ATTACK_SOURCES) & set(registry.available())

    @pytest.mark.parametrize("name", CORPUS)
    def test_every_corpus_attack_builds_and_is_named(self, name: str) -> None:
        attack = registry.build_attack(name)
        assert isinstance(attack, CorpusAttack)
        assert attack.name == name

    @pytest.mark.parametrize("name", ["rag-thief", "worm"])
    def test_query_attacks_build(self, name: str) -> None:
        attack = registry.build_attack(name, kind="query", max_queries=1)
        assert isinstance(attack, QueryAttack)

    def test_presets_are_overridable(self) -> None:
        attack = registry.build_attack("injection-question", framing="off-topic")
        assert attack.name == "injection-offtopic"

    def test_errors(self) -> None:
        with pytest.raises(InputError, match=r"unknown attack 'nope'; available: .*worm"):
            registry.build_attack("nope")
        with pytest.raises(
            InputError, match=r"unknown query attack 'injection'; available: rag-thief"
        ):
            registry.build_attack("injection", kind="query")
        with pytest.raises(InputError, match="bad parameters for attack 'suffix'"):
            registry.build_attack("suffix", bogus=1)
        with pytest.raises(InputError, match="attack kind must be one of"):
            registry.available("poison")
        with pytest.raises(InputError, match=r"package\.module:Class"):
            registry.register("x", "no-colon", "corpus")
        registry.register("broken-test", "no.such.module:Thing", "corpus")
        with pytest.raises(InputError, match="cannot load attack 'broken-test'"):
            registry.build_attack("broken-test")


class TestEvalUsesTheRegistry:
    def test_poisoning_resolves_registry_names(self) -> None:
        from ragshield.eval.poisoning_sets import available_attacks, resolve_attack

        assert resolve_attack("poisonedrag") == "poisonedrag"  # data-backed stays a name
        attack = resolve_attack("injection-offtopic")
        assert not isinstance(attack, str) and attack.name == "injection-offtopic"
        assert set(CORPUS) <= set(available_attacks())

    def test_extraction_factory_resolves_registry_names(self, encoder) -> None:  # type: ignore[no-untyped-def]
        from ragshield.attacks.extraction import RAGThief, WormAttack
        from ragshield.eval.extraction import attack_factory

        thief = attack_factory("rag-thief", encoder=encoder, max_queries=2, seed=3)()
        worm = attack_factory("worm", encoder=encoder, max_queries=2, iterations=1)()
        assert isinstance(thief, RAGThief) and isinstance(worm, WormAttack)
        assert thief.max_queries == 2 and worm.iterations == 1
        with pytest.raises(InputError, match="unknown extraction attack 'injection'"):
            attack_factory("injection", encoder=encoder, max_queries=1)
