"""StagedParams: per-stage frozen dataclasses behind flat parameter names (issue #22)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from numbers import Real
from typing import Any, ClassVar

import pytest

from ragshield.defenses.params import Interval, ParamTable, StagedParams, init_param_names
from ragshield.errors import InputError


@dataclass(frozen=True)
class Cut:
    tau: float = 0.4
    window: int = 2


@dataclass(frozen=True)
class Cluster:
    eps: float = 0.5


class Toy(StagedParams):
    name = "toy-staged"
    _stages: ClassVar[dict[str, type]] = {"cut": Cut, "cluster": Cluster}
    _own_params = ("mode",)
    _parameter_constraints: ClassVar[ParamTable] = {
        "eps": [Interval(Real, 0.0, 2.0, closed="right")]
    }

    def __init__(
        self, encoder: Any = None, *, mode: str = "a", cut: Any = None, cluster: Any = None,
        **flat: Any,
    ) -> None:  # fmt: skip
        self.encoder = encoder
        self.mode = mode
        self._set_stages({"cut": cut, "cluster": cluster}, flat)

    def check(self) -> None:
        self._validate_params()


def test_flat_names_are_listed_in_constructor_order() -> None:
    assert init_param_names(Toy) == ["mode", "tau", "window", "eps"]


@pytest.mark.parametrize(
    "kwargs", [{"eps": 0.3}, {"cluster": Cluster(eps=0.3)}, {"cluster": {"eps": 0.3}}]
)
def test_a_stage_flat_or_as_a_table_is_the_same_filter(kwargs: dict[str, Any]) -> None:
    f = Toy(**kwargs)
    assert f.eps == f.cluster.eps == 0.3
    assert f.cut == Cut()
    assert f.get_params() == {"mode": "a", "tau": 0.4, "window": 2, "eps": 0.3}


def test_flat_overrides_apply_on_top_of_a_given_stage() -> None:
    f = Toy(cut=Cut(tau=0.1, window=5), window=3)
    assert f.cut == Cut(tau=0.1, window=3)


def test_assigning_a_flat_name_replaces_the_frozen_stage_and_checks_again() -> None:
    f = Toy()
    f.check()
    before = f.cluster
    f.eps = 5.0
    assert before.eps == 0.5 and f.cluster.eps == 5.0  # the old stage is untouched
    with pytest.raises(InputError, match="'eps' parameter of Toy"):
        f.check()


def test_unknown_names_fail_like_a_misspelt_keyword_with_a_hint() -> None:
    with pytest.raises(TypeError, match=r"no parameter 'epss' \(did you mean 'eps'"):
        Toy(epss=1)
    with pytest.raises(TypeError, match="no parameter 'taux' in cut; it takes tau, window"):
        Toy(cut={"taux": 1})
    with pytest.raises(TypeError, match="cut must be a Cut or a table of its fields"):
        Toy(cut=0.5)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = Toy().nope


def test_config_round_trip_and_pickle_keep_the_stages() -> None:
    f = Toy(mode="b", tau=0.2)
    assert f.to_dict()["init_parameters"] == {"mode": "b", "tau": 0.2, "window": 2, "eps": 0.5}
    again = Toy.from_dict(f.to_dict())
    assert (again.mode, again.cut, again.cluster) == (f.mode, f.cut, f.cluster)
    copy = pickle.loads(pickle.dumps(f))
    assert copy.cut == f.cut and copy.tau == 0.2
