"""The one chain grammar (``none;a,b``) and the one chain builder, which calibrates."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from ragshield.defenses import registry
from ragshield.errors import InputError
from ragshield.store.profile import IndexProfile
from ragshield.types import FilterResult, RetrievedPassage


@pytest.mark.parametrize(
    ("spec", "labels"),
    [
        ("none", ["none"]),
        ("none;ragdefender", ["none", "ragdefender"]),
        (" none ; ragdefender , ecosaferag ;", ["none", "ragdefender,ecosaferag"]),
        ("ragdefender;ragdefender", ["ragdefender"]),  # a chain is measured once
        (["none", "ragdefender,ecosaferag"], ["none", "ragdefender,ecosaferag"]),
    ],
)
def test_chain_labels(spec: str | list[str], labels: list[str]) -> None:
    assert registry.chain_labels(spec) == labels


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ragdefender+ecosaferag", "join a chain's defenses with ','"),
        ("none,ragdefender", "'none' stands alone"),
        (";;", "names no chain"),
        ([3], "must be a string"),
    ],
)
def test_chain_labels_refuses(spec: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        registry.chain_labels(spec)  # type: ignore[arg-type]


class Calibrated:
    """A test filter that records the profile it was calibrated with."""

    name = "calibrated"

    def __init__(self, encoder: object = None, *, level: float = 0.0) -> None:
        self.level = level
        self.profile: IndexProfile | None = None

    def calibrate(self, profile: IndexProfile) -> None:
        self.profile = profile

    def filter(self, query: str, retrieved: Sequence[RetrievedPassage]) -> FilterResult:
        return FilterResult(self.name, tuple(retrieved), ())


@pytest.fixture()
def calibrated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry._REGISTRY, "calibrated", f"{__name__}:Calibrated")


@pytest.mark.usefixtures("calibrated")
def test_build_chains_builds_and_calibrates_every_alternative() -> None:
    profile = IndexProfile(n=10, sampled=10, quantiles={}, natural_similarity=0.7)
    chains = registry.build_chains(
        "none;calibrated;similarity-threshold,calibrated",
        params={"calibrated": {"level": 2.0}},
        profile=profile,
    )
    assert list(chains) == ["none", "calibrated", "similarity-threshold,calibrated"]
    assert chains["none"] is None
    one, two = chains["calibrated"], chains["similarity-threshold,calibrated"]
    assert one is not None and two is not None
    assert [f.name for f in two.filters][-1] == "calibrated"
    assert one.filters[0] is not two.filters[-1]  # each chain runs as it would alone
    for f in (one.filters[0], two.filters[-1]):
        assert isinstance(f, Calibrated) and f.level == 2.0 and f.profile == profile


@pytest.mark.usefixtures("calibrated")
def test_build_chains_from_a_mapping_keeps_the_labels() -> None:
    chains = registry.build_chains({"undefended": None, "mine": "calibrated"})
    assert chains["undefended"] is None
    mine = chains["mine"]
    assert mine is not None and isinstance(mine.filters[0], Calibrated)
    assert mine.filters[0].profile is None  # no profile, no calibration


def test_build_chain_says_where_other_kinds_apply() -> None:
    with pytest.raises(InputError, match="not a post-retrieval filter"):
        registry.build_chain("ragfort-inter")
