"""A defense's params and the pipeline overrides refuse wrong shapes in one line (issue
#27, root cause 15: ``encoder`` inside a defense's params was a TypeError for every
registered filter; ``build_chain(123)``, ``with_overrides(defenses=123)`` and
``with_overrides(generator_options=5)`` were TypeErrors)."""

from __future__ import annotations

from typing import Any

import pytest

from ragshield.config import PipelineConfig
from ragshield.defenses import registry
from ragshield.errors import InputError


@pytest.mark.parametrize("name", registry.available("filter"))
def test_encoder_in_params_is_refused(name: str) -> None:
    with pytest.raises(InputError, match=f"defense {name!r}.*'encoder' is set by the pipeline"):
        registry.build_chain(name, None, {name: {"encoder": "all-MiniLM-L6-v2"}})


@pytest.mark.parametrize("params", [5, "x", ["a"]])
def test_params_not_a_table(params: Any) -> None:
    with pytest.raises(InputError, match="must be a table"):
        registry.build_chain("similarity-threshold", None, {"similarity-threshold": params})


@pytest.mark.parametrize("spec", [123, 1.5, b"ragdefender", {"ragdefender": 1}, [1, 2]])
def test_build_chain_bad_spec(spec: Any) -> None:
    with pytest.raises(InputError, match="defense"):
        registry.build_chain(spec)


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        ({"defenses": 123}, "defenses must be"),
        ({"generator_options": 5}, "generator_options must be a mapping"),
        ({"generator_options": ["a"]}, "generator_options must be a mapping"),
    ],
)
def test_with_overrides_bad_types(flags: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        PipelineConfig().with_overrides(**flags)
