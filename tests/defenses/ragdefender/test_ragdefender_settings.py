"""RAGDefender's per-stage parameter dataclasses and the flat names configs use (issue #22)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from ragshield.defenses.params import init_param_names
from ragshield.defenses.ragdefender import RAGDefender
from ragshield.defenses.ragdefender.settings import FLAT, STAGES, EchoParams, EvidenceParams
from ragshield.defenses.registry import build_filter
from ragshield.errors import InputError

# one case per stage: (flat name, a non-default value)
CASES = [
    ("p", 3.0),
    ("tight_threshold", 0.8),
    ("conflict_max_diff", 4),
    ("natural_similarity", 0.97),
    ("echo_threshold", 0.7),
    ("group_knn", False),
    ("coverage_threshold", 101.0),
]


def test_every_stage_has_a_case_and_no_flat_name_is_in_two_stages() -> None:
    assert {FLAT[name] for name, _ in CASES} == set(STAGES)
    fields = [f.name for cls in STAGES.values() for f in dataclasses.fields(cls)]
    assert len(fields) == len(set(fields)) == len(FLAT)


def test_constructor_is_grouped() -> None:
    assert len(inspect.signature(RAGDefender).parameters) <= 12


@pytest.mark.parametrize(("name", "value"), CASES)
def test_flat_keyword_equals_the_stage_object(name: str, value: object) -> None:
    stage = FLAT[name]
    flat = RAGDefender(**{name: value})
    grouped = RAGDefender(**{stage: STAGES[stage](**{name: value})})
    assert getattr(flat, name) == getattr(grouped, name) == value
    assert getattr(getattr(flat, stage), name) == value
    assert flat.to_dict() == grouped.to_dict()
    assert flat.to_dict() != RAGDefender().to_dict()


@pytest.mark.parametrize(("name", "value"), CASES)
def test_assigning_a_flat_name_replaces_the_frozen_stage(name: str, value: object) -> None:
    f = RAGDefender()
    before = getattr(f, FLAT[name])
    f._params_checked = True  # as after a first call
    setattr(f, name, value)
    assert getattr(getattr(f, FLAT[name]), name) == value
    assert getattr(before, name) != value  # the old stage object is untouched
    assert not f._params_checked  # checked again on the next call


def test_a_flat_name_overrides_its_stage_object() -> None:
    f = RAGDefender(echo=EchoParams(echo_threshold=0.6, echo_pairs=False), echo_threshold=0.7)
    assert f.echo == EchoParams(echo_threshold=0.7, echo_pairs=False)


def test_config_keeps_its_flat_format() -> None:
    f = RAGDefender(mode="multi_hop", echo_threshold=0.7, trusted_ids=("a",))
    data = f.to_dict()
    assert set(data["init_parameters"]) == {"mode", "trusted_ids", *FLAT}
    assert data["init_parameters"]["echo_threshold"] == 0.7
    assert init_param_names(RAGDefender) == list(data["init_parameters"])
    assert RAGDefender.from_dict(data).to_dict() == data
    again = pickle.loads(pickle.dumps(f))
    assert again.to_dict() == data


def test_registry_params_stay_flat_and_unknown_names_fail_in_one_line() -> None:
    f = build_filter("ragdefender", params={"group_knn": False, "natural_similarity": 0.9})
    assert isinstance(f, RAGDefender)
    assert not f.knn.group_knn and f.evidence == EvidenceParams(natural_similarity=0.9)
    with pytest.raises(InputError, match="has no parameter 'nope'"):
        build_filter("ragdefender", params={"nope": 1})


def test_a_bad_value_in_a_stage_object_gets_the_template() -> None:
    f = RAGDefender(echo=EchoParams(echo_threshold=3.0))  # stored, checked on first use
    with pytest.raises(InputError, match="The 'echo_threshold' parameter of RAGDefender"):
        f.filter("q?", [])
