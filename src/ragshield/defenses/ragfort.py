"""RAGFort as registry entries: the inter-class re-index and the intra-class cascade.

RAGFort is not a post-retrieval filter. Its inter-class part changes the index
(``ragshield reindex``, :mod:`ragshield.reindex`), its intra-class part changes how the
answer is generated (:class:`~ragshield.generate.cascade.CascadeGenerator`). The registry
names them ``ragfort-inter`` (kind ``index``) and ``ragfort-intra`` (kind
``generator_wrapper``); ``ragfort`` is both. Any pipeline built by
:func:`ragshield.config.build_pipeline` applies them the same way:

.. code-block:: toml

    index = "kb-index-ragfort"        # written by: ragshield reindex kb-index --out ...
    generator = "qwen2.5-1.5b"        # the cascade's reference model
    [defenses]
    chain = ["ragfort"]
    [defenses.params]
    ragfort-intra = { draft = "qwen2.5-0.5b" }

Both builders import their heavy parts on call, so resolving the names stays light.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragshield.embed.base import Encoder
from ragshield.errors import InputError
from ragshield.generate.base import Generator
from ragshield.store.base import VectorStore

# MODELS.md: the two Qwen2.5-Coder models share one tokenizer, a true draft/reference pair.
DEFAULT_DRAFT = "qwen2.5-0.5b"


def open_reindexed(
    path: str | os.PathLike[str],
    *,
    encoder: str | None = None,
    uri: str | None = None,
    symmetric: bool | None = None,
) -> tuple[VectorStore, Encoder]:
    """The re-indexed store and its query encoder.

    The index must carry the ``ragfort.json`` ``ragshield reindex`` writes (a plain index
    named with ``ragfort-inter`` is an error, not a silently undefended pipeline). Query
    encoder: an explicit ``encoder`` wins; else ``symmetric`` picks the trained encoder
    (``True``) or the base one (``False``, the paper's choice); else the one the re-index
    recorded (:func:`ragshield.indexing.open_index`).
    """
    from ragshield.embed.sentence_transformer import DEFAULT_ENCODER
    from ragshield.indexing import open_index
    from ragshield.reindex.build import ENCODER_DIR, read_spec

    if symmetric is not None and not isinstance(symmetric, bool):
        raise InputError(
            f"The 'symmetric' parameter of ragfort-inter must be a bool. Got {symmetric!r}."
        )
    spec = read_spec(path)
    if encoder is None and symmetric is True:
        encoder = str(Path(path) / spec.get("index_encoder", ENCODER_DIR))
    elif encoder is None and symmetric is False:
        encoder = str(spec.get("base_encoder", DEFAULT_ENCODER))
    return open_index(Path(path), encoder, uri=uri)


def build_cascade(
    draft: str | Generator,
    reference: str | Generator,
    llm_options: Mapping[str, Any],
    **params: Any,
) -> Generator:
    """A cascade whose draft and reference load with the pipeline's LLM options (dtype,
    prompt style, answer length), so it answers like the generator it replaces."""
    from ragshield.generate.cascade import CascadeGenerator
    from ragshield.generate.factory import make_generator

    options = dict(llm_options)
    for key in ("max_new_tokens", "prompt_style"):
        if key in options:
            params.setdefault(key, options[key])
    d = make_generator(draft, **options) if isinstance(draft, str) else draft
    r = make_generator(reference, **options) if isinstance(reference, str) else reference
    cascade: Generator = CascadeGenerator(d, r, **params)
    return cascade


def wrap_cascade(
    generator: Generator,
    *,
    encoder: Encoder,
    options: Mapping[str, Any],
    draft: str = DEFAULT_DRAFT,
    **params: Any,
) -> Generator:
    """``ragfort-intra``: the configured LLM becomes the cascade's reference model.

    ``params`` are :class:`~ragshield.generate.cascade.CascadeGenerator`'s (gamma, alpha,
    eta, span, seed, ...); ``options`` the pipeline's generator options, used for the draft.
    """
    if not hasattr(type(generator), "model_"):
        raise InputError(
            f"ragfort-intra wraps a local LLM (the cascade's reference model), but the "
            f"generator is {getattr(generator, 'name', type(generator).__name__)!r}: set "
            "generator to a packaged model or a local folder (e.g. 'qwen2.5-1.5b')."
        )
    if not isinstance(draft, str) or not draft:
        raise InputError(
            f"The 'draft' parameter of ragfort-intra must be a model name or folder. Got {draft!r}."
        )
    return build_cascade(draft, generator, options, **params)
