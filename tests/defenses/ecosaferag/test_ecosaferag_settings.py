"""EcoSafeRAG's parameter groups (issue #22): a group, a table of its fields and the flat
names build the same filter; the flat names still read, set and serialise; a misspelt
name is refused in one line. No model: the groups are checked without an encoder."""

from __future__ import annotations

import pickle
from dataclasses import fields

import pytest

from ragshield.defenses.ecosaferag import (
    PRESETS,
    Baiting,
    Clustering,
    EcoSafeRAG,
    Features,
    Reading,
    Screening,
)
from ragshield.defenses.ecosaferag.settings import CONSTRAINTS, FLAT, GROUPS
from ragshield.defenses.registry import build_filter
from ragshield.errors import InputError


def test_every_flat_name_has_one_group_and_a_default() -> None:
    names = [f.name for cls in GROUPS.values() for f in fields(cls)]
    assert len(names) == len(set(names)) == len(FLAT) == 25
    assert set(CONSTRAINTS) <= set(FLAT)  # the table speaks the flat names
    assert set(PRESETS["paper"]) <= set(FLAT)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"screening": Screening(tau=0.3), "clustering": Clustering(eps=0.5)},
        {"screening": {"tau": 0.3}, "clustering": {"eps": 0.5}},  # TOML sub-tables
        {"tau": 0.3, "eps": 0.5},  # the flat names of every earlier config
        {"clustering": Clustering(eps=0.9), "tau": 0.3, "eps": 0.5},  # flat wins
    ],
    ids=["groups", "tables", "flat", "flat-over-group"],
)
def test_groups_tables_and_flat_names_build_the_same_filter(kwargs: dict) -> None:
    f = EcoSafeRAG(**kwargs)
    assert f.screening == Screening(tau=0.3) and f.clustering == Clustering(eps=0.5)
    assert (f.reading, f.features, f.baiting) == (Reading(), Features(), Baiting())
    assert f.tau == 0.3 and f.eps == 0.5
    assert f.get_params() == EcoSafeRAG(tau=0.3, eps=0.5).get_params()


def test_defaults_are_the_groups_defaults() -> None:
    params = EcoSafeRAG().get_params()
    assert params["tau"] == 0.4 and params["eps"] == 0.6 and params["min_samples"] == 4
    assert params["abs_threshold"] == 0.92 and params["max_chars"] == 20_000
    assert isinstance(params["bait_types"], list) and params["baits"] is None


def test_setting_a_flat_name_replaces_its_group_and_is_checked_again() -> None:
    f = EcoSafeRAG(clustering=Clustering(eps=0.5, min_samples=3))
    before = f.clustering
    f.eps = 0.7
    assert f.clustering == Clustering(eps=0.7, min_samples=3) and before.eps == 0.5
    assert not f._params_checked
    f.eps = -1
    with pytest.raises(InputError, match=r"The 'eps' parameter of EcoSafeRAG"):
        f._validate_params()


def test_to_dict_stays_flat_and_a_config_table_may_group() -> None:
    f = EcoSafeRAG(screening={"tau": 0.3}, baiting={"bait_types": ["role_play"]})
    data = f.to_dict()
    assert data["type"] == "ecosaferag" and list(data["init_parameters"]) == list(FLAT)
    assert EcoSafeRAG.from_dict(data).get_params() == f.get_params()
    assert build_filter("ecosaferag", None, {"clustering": {"eps": 0.5}}).eps == 0.5  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 1}, r"no parameter 'epsilon' \(did you mean 'eps'.*\); it takes "),
        ({"clustering": {"epsilon": 1}}, r"no parameter 'epsilon' in clustering; it takes eps"),
        ({"clustering": 0.5}, r"clustering must be a Clustering or a table of its fields"),
    ],
)
def test_unknown_names_are_refused_in_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        EcoSafeRAG(**kwargs)
    with pytest.raises(InputError, match="bad parameters for defense 'ecosaferag'"):
        build_filter("ecosaferag", None, kwargs)


def test_from_dict_takes_the_flat_names_only() -> None:
    with pytest.raises(InputError, match=r"no parameter 'epsilon'; it takes language, ") as e:
        EcoSafeRAG.from_dict({"type": "ecosaferag", "init_parameters": {"epsilon": 1}})
    assert "screening" not in str(e.value)  # a saved config names fields, not groups


def test_unknown_attribute_is_an_attribute_error_and_pickling_works() -> None:
    f = EcoSafeRAG(eps=0.5)
    with pytest.raises(AttributeError, match="no attribute 'epsilon'"):
        _ = f.epsilon
    g = pickle.loads(pickle.dumps(f))
    assert g.get_params() == f.get_params() and g.clustering == f.clustering
