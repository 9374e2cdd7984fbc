"""The pydantic base of the LangChain and LlamaIndex adapters.

Why a module of its own: both frameworks' components are pydantic models, Haystack's are
not; the four :class:`~ragshield.integrations._core.Shield` fields, the lazily built core and
``warm_up`` were written in both pydantic adapters (issue #22), and :mod:`._core` stays
framework- and pydantic-free.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ragshield.integrations._core import DEFAULT_DEFENSE, DEFAULT_METADATA_KEY, Shield


class ShieldModel(BaseModel):
    """The fields and the lazily built :class:`Shield` of the pydantic adapters (LangChain's
    compressor and runnable, LlamaIndex's postprocessor): both frameworks' components are
    pydantic models, so one base holds what was written twice (issue #22)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    defense: Any = Field(default=DEFAULT_DEFENSE, description="ragshield defense(s)")
    encoder: Any = Field(default=None, description="ragshield encoder or local model path")
    embeddings_model_name: str | None = None
    metadata_key: str = DEFAULT_METADATA_KEY

    _shield: Shield | None = PrivateAttr(default=None)

    @property
    def shield(self) -> Shield:
        """The framework-neutral core, built on first use from the fields above."""
        if self._shield is None:
            self._shield = Shield.of(self)
        return self._shield

    def warm_up(self) -> None:
        """Build the defense and load the encoder now instead of on the first query."""
        self.shield.load()
