"""integrations/_pydantic: the base the LangChain and LlamaIndex adapters share — fields
validated by pydantic, the core built once on first use from them, and the four fields in
the model dump the frameworks serialise. No model is loaded (``shield`` is lazy)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ragshield.integrations._core import DEFAULT_DEFENSE, DEFAULT_METADATA_KEY
from ragshield.integrations._pydantic import ShieldModel


def test_shield_is_built_once_from_the_fields() -> None:
    m = ShieldModel(defense="ragdefender", metadata_key="rs")
    assert m._shield is None  # nothing built at construction
    s = m.shield
    assert m.shield is s and s.defense == "ragdefender" and s.metadata_key == "rs"
    assert s.filter_ is None  # built, not loaded: warm_up loads


@pytest.mark.parametrize(
    ("kwargs", "dumped"),
    [
        ({}, {"defense": DEFAULT_DEFENSE, "metadata_key": DEFAULT_METADATA_KEY}),
        ({"embeddings_model_name": "m"}, {"embeddings_model_name": "m"}),
    ],
)
def test_fields_and_their_dump(kwargs: dict, dumped: dict) -> None:
    data = ShieldModel(**kwargs).model_dump()
    assert set(data) == {"defense", "encoder", "embeddings_model_name", "metadata_key"}
    assert dumped.items() <= data.items()


def test_field_types_are_checked() -> None:
    with pytest.raises(ValidationError, match="metadata_key"):
        ShieldModel(metadata_key=3)
