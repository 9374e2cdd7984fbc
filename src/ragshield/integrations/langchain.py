"""LangChain adapter (``pip install "ragshield[langchain]"``, needs ``langchain-core``).

Example::

    from langchain_classic.retrievers import ContextualCompressionRetriever
    from ragshield.integrations.langchain import RagshieldCompressor

    safe = ContextualCompressionRetriever(
        base_compressor=RagshieldCompressor("ragdefender"), base_retriever=retriever
    )

inside a LangChain 1.x agent, on what its retrieval tools return
(:class:`RagshieldToolMiddleware`)::

    agent = create_agent(model, tools=[search_docs], middleware=[RagshieldToolMiddleware()])

or, in an LCEL chain, after a step that yields ``{"question": ..., "context": [docs]}``::

    chain = {"context": retriever, "question": RunnablePassthrough()} | RagshieldRunnable() | ...

Both return copies of the kept :class:`~langchain_core.documents.Document` objects (same
class, id and metadata) with ragshield's verdict under ``metadata["ragshield"]``; removed
documents are reported through a ``ragshield_filter`` custom callback event, which LangSmith
and any callback handler record. LangChain documents carry no vectors, so texts are encoded by
the ragshield encoder (cached per text) unless ``embedding_key`` names a metadata field that
holds the vector and ``embeddings_model_name`` names the encoder's model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ragshield.errors import InputError
from ragshield.integrations._core import (
    DEFAULT_DEFENSE,
    DEFAULT_METADATA_KEY,
    DefenseSpec,
    EncoderSpec,
    Shield,
    _build_encoder,
    audit_event,
    missing_extra,
)
from ragshield.integrations._pydantic import ShieldModel

try:
    from langchain_core.callbacks import AsyncCallbackManager, CallbackManager, Callbacks
    from langchain_core.callbacks.manager import (
        AsyncCallbackManagerForChainRun,
        CallbackManagerForChainRun,
        adispatch_custom_event,
        dispatch_custom_event,
    )
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.runnables import RunnableConfig, RunnableSerializable
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra("langchain-core", extra="langchain", framework="LangChain") from exc

EVENT_NAME = "ragshield_filter"

__all__ = [
    "EVENT_NAME",
    "GeneratorChat",
    "RagshieldCompressor",
    "RagshieldEmbeddings",
    "RagshieldRunnable",
    "RagshieldToolMiddleware",
]


class _ShieldFields(ShieldModel):
    """Parameters shared by the compressor and the runnable (see :class:`Shield`).

    ``embedding_key``: metadata field holding a document's vector, reused under the rule of
    :mod:`ragshield.integrations._core` (``None`` = always encode with the ragshield encoder).
    """

    embedding_key: str | None = None

    def _filter(
        self, query: str, documents: Sequence[Document]
    ) -> tuple[list[Document], dict[str, Any]]:
        """Kept document copies (in input order) and the audit event of the call."""
        docs = _check_documents(documents, type(self).__name__)
        key = self.embedding_key
        vectors = [d.metadata.get(key) for d in docs] if key else None
        out = self.shield.run(query, [d.page_content for d in docs], vectors)
        kept: list[Document] = []
        for v in out.kept:
            doc = docs[v.index]
            meta = {**doc.metadata, self.shield.metadata_key: v.to_metadata()}
            if v.rewritten and key:
                meta.pop(key, None)  # the vector described the original text
            kept.append(doc.model_copy(update={"page_content": v.text, "metadata": meta}))
        return kept, audit_event(out, [d.id for d in docs])


class RagshieldCompressor(_ShieldFields, BaseDocumentCompressor):
    """A :class:`BaseDocumentCompressor` that removes (or trims) adversarial documents.

    Use it as ``base_compressor`` of ``ContextualCompressionRetriever`` or inside a
    ``DocumentCompressorPipeline``. Parameters: see :class:`ragshield.integrations.Shield`.
    """

    def __init__(self, defense: DefenseSpec = DEFAULT_DEFENSE, **kwargs: Any) -> None:
        super().__init__(defense=defense, **kwargs)

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        kept, event = self._filter(query, documents)
        if callbacks is not None:
            manager = CallbackManager.configure(inheritable_callbacks=callbacks)
            if manager.handlers and manager.parent_run_id is not None:
                manager.on_custom_event(EVENT_NAME, event, run_id=manager.parent_run_id)
        return kept

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        """The filter is CPU-bound numpy/torch work: run it in a thread, off the event loop."""
        kept, event = await asyncio.to_thread(self._filter, query, documents)
        if callbacks is not None:
            manager = AsyncCallbackManager.configure(inheritable_callbacks=callbacks)
            if manager.handlers and manager.parent_run_id is not None:
                await manager.on_custom_event(EVENT_NAME, event, run_id=manager.parent_run_id)
        return kept

    def as_runnable(
        self, *, query_key: str = "question", documents_key: str = "context"
    ) -> RagshieldRunnable:
        """The same defense as an LCEL step (see :class:`RagshieldRunnable`)."""
        runnable = RagshieldRunnable(
            self.defense,
            encoder=self.encoder,
            embeddings_model_name=self.embeddings_model_name,
            metadata_key=self.metadata_key,
            embedding_key=self.embedding_key,
            query_key=query_key,
            documents_key=documents_key,
        )
        runnable._shield = self.shield  # share the defense and the loaded encoder
        return runnable


class RagshieldRunnable(_ShieldFields, RunnableSerializable[dict[str, Any], dict[str, Any]]):
    """An LCEL step: ``{query_key: str, documents_key: [Document]}`` in, the same dict out
    with the documents filtered (every other key passes through untouched).

    It sits where a chain has both the question and the retrieved documents, typically right
    after ``{"context": retriever, "question": RunnablePassthrough()}``.
    """

    query_key: str = "question"
    documents_key: str = "context"

    def __init__(self, defense: DefenseSpec = DEFAULT_DEFENSE, **kwargs: Any) -> None:
        super().__init__(defense=defense, **kwargs)

    def _split(self, value: Any) -> tuple[str, Sequence[Document]]:
        if (
            not isinstance(value, dict)
            or self.query_key not in value
            or (self.documents_key not in value)
        ):
            got = sorted(value) if isinstance(value, dict) else type(value).__name__
            raise InputError(
                f"RagshieldRunnable expects a dict with the keys {self.query_key!r} and "
                f"{self.documents_key!r} (set query_key/documents_key to match your chain). "
                f"Got {got} instead."
            )
        return value[self.query_key], value[self.documents_key]

    def _run(
        self,
        value: dict[str, Any],
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> dict[str, Any]:
        query, docs = self._split(value)
        kept, event = self._filter(query, docs)
        dispatch_custom_event(EVENT_NAME, event, config=config)
        return {**value, self.documents_key: kept}

    async def _arun(
        self,
        value: dict[str, Any],
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> dict[str, Any]:
        query, docs = self._split(value)
        kept, event = await asyncio.to_thread(self._filter, query, docs)
        await adispatch_custom_event(EVENT_NAME, event, config=config)
        return {**value, self.documents_key: kept}

    def invoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")


class RagshieldEmbeddings(Embeddings):
    """LangChain :class:`Embeddings` backed by a ragshield encoder (packaged MiniLM, offline).

    Index with it and pass ``embeddings_model_name=embeddings.model_name`` to the compressor:
    the names then match by construction. Vectors are L2-normalised (cosine == dot product).
    """

    def __init__(self, encoder: EncoderSpec = None) -> None:
        self.encoder = encoder
        self._encoder = _build_encoder(encoder)  # resolves the model path; loads lazily

    @property
    def model_name(self) -> str:
        return self._encoder.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self._encoder.encode(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self._encoder.encode([text])[0].tolist()
        return vector

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


def _check_documents(documents: object, owner: str) -> list[Document]:
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
        raise InputError(
            f"{owner} expects a list of LangChain Documents. Got {type(documents).__name__} "
            "instead."
        )
    docs = list(documents)
    for i, d in enumerate(docs):
        if not isinstance(d, Document):
            raise InputError(
                f"{owner} expects LangChain Documents; item {i} is {type(d).__name__}."
            )
    return docs


# ---- LangChain 1.x agent middleware -----------------------------------------------------------

try:  # the agent runtime lives in the `langchain` 1.x package, not in langchain-core
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import BaseMessage, ToolMessage

    _HAVE_AGENTS = True
except ImportError:  # pragma: no cover - exercised when only langchain-core is installed
    _HAVE_AGENTS = False
    AgentMiddleware = object  # type: ignore[assignment,misc]

#: Where a tool's text output is split into passages when it returns no Documents (the
#: joiner of langchain-core's retriever tool).
TOOL_SEPARATOR = "\n\n"
EMPTY_TOOL_RESULT = "No retrieved passage passed ragshield's screening."


class RagshieldToolMiddleware(AgentMiddleware):
    """Screen what retrieval tools return inside a LangChain 1.x agent.

    Example::

        from langchain.agents import create_agent
        from ragshield.integrations.langchain import RagshieldToolMiddleware

        agent = create_agent(model, tools=[search_docs],
                             middleware=[RagshieldToolMiddleware("ragdefender,ecosaferag")])

    Why: in an agent, retrieval is a tool call, so the documents reach the model as a
    :class:`~langchain_core.messages.ToolMessage`, past any retriever-level adapter that
    was not wired in; LangChain 1.x documents middleware as the place for such guardrails.
    ``wrap_tool_call`` runs the tool, then the defense chain on its output: the passages
    are the ``artifact`` Documents when the tool returns ``content_and_artifact`` (the
    retriever tool does), else the text split on ``separator``. The query is the tool
    call's ``query`` argument (``query_arg``), else the last human message. The model then
    sees only the kept (possibly sentence-trimmed) passages; the ToolMessage carries every
    verdict under ``response_metadata["ragshield"]``. ``screened_tools`` limits screening
    to those tool names (``None`` = every tool whose output has passages).
    """

    def __init__(
        self,
        defense: DefenseSpec = DEFAULT_DEFENSE,
        *,
        screened_tools: Sequence[str] | None = None,
        query_arg: str = "query",
        separator: str = TOOL_SEPARATOR,
        encoder: EncoderSpec = None,
        metadata_key: str = DEFAULT_METADATA_KEY,
    ) -> None:
        if not _HAVE_AGENTS:
            raise missing_extra("langchain", extra="langchain", framework="LangChain agents")
        super().__init__()
        self.defense = defense
        # not `tools`: on AgentMiddleware that names tools a middleware adds to the agent
        self.screened_tools = None if screened_tools is None else tuple(screened_tools)
        self.query_arg = query_arg
        self.separator = separator
        self.encoder = encoder
        self.metadata_key = metadata_key
        self._shield = Shield(defense, encoder=encoder, metadata_key=metadata_key)

    @property
    def name(self) -> str:  # AgentMiddleware names nodes after it
        return "RagshieldToolMiddleware"

    def warm_up(self) -> None:
        self._shield.warm_up()

    def _query(self, request: Any) -> str | None:
        arg = (request.tool_call.get("args") or {}).get(self.query_arg)
        if isinstance(arg, str) and arg.strip():
            return arg
        messages = (request.state or {}).get("messages", []) if request.state else []
        for m in reversed(messages):
            if isinstance(m, BaseMessage) and m.type == "human" and isinstance(m.content, str):
                return m.content
        return None

    def screen(self, request: Any, result: Any) -> Any:
        """The tool's ToolMessage with only the passages the chain kept (see above)."""
        if not isinstance(result, ToolMessage) or result.status == "error":
            return result
        if self.screened_tools is not None and request.tool_call.get("name") not in (
            self.screened_tools
        ):
            return result
        docs = result.artifact if _is_documents(result.artifact) else None
        if docs is not None:
            texts = [d.page_content for d in docs]
        elif isinstance(result.content, str):
            texts = [t for t in result.content.split(self.separator) if t.strip()]
        else:
            return result
        query = self._query(request)
        if not texts or query is None:
            return result
        out = self._shield.run(query, texts)
        kept = out.kept
        content = self.separator.join(v.text for v in kept) or EMPTY_TOOL_RESULT
        artifact = result.artifact
        if docs is not None:
            artifact = [
                docs[v.index].model_copy(
                    update={
                        "page_content": v.text,
                        "metadata": {**docs[v.index].metadata, self.metadata_key: v.to_metadata()},
                    }
                )
                for v in kept
            ]
        report = {
            "defense": self._shield.filter_.name if self._shield.filter_ else str(self.defense),
            "query": query,
            "kept": [v.index for v in kept],
            "removed": [
                {
                    "index": v.index,
                    "reason": v.reason,
                    "stage": v.stage,
                    "text": v.original_text[:300],
                }
                for v in out.removed
            ],
        }
        return result.model_copy(
            update={
                "content": content,
                "artifact": artifact,
                "response_metadata": {**result.response_metadata, self.metadata_key: report},
            }
        )

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        return self.screen(request, handler(request))

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        result = await handler(request)
        return await asyncio.to_thread(self.screen, request, result)


def _is_documents(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(d, Document) for d in value)


class GeneratorChat(BaseChatModel):
    """A LangChain chat model over a ragshield generator, with a fixed tool policy: it calls
    the tool ``tool_name`` with the user's question, then answers from that tool's passages.

    Example::

        model = GeneratorChat(generator=make_generator("smollm2-135m", encoder))
        agent = create_agent(model, tools=[search_docs], middleware=[RagshieldToolMiddleware()])

    Why: a small local model cannot choose tools itself, yet an offline agent (the shipped
    example, the middleware's tests) needs one whose answer comes only from what the tool
    returned, so the middleware's effect is what changes the answer. A real agent's model
    decides its own calls; the middleware is the same. The passages are the tool text split
    on :data:`TOOL_SEPARATOR`, as the middleware reads them.
    """

    generator: Any
    tool_name: str = "search_docs"  # the example's retrieval tool

    @property
    def _llm_type(self) -> str:
        return "ragshield-generator"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> GeneratorChat:
        return self  # the policy is fixed: nothing to bind

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        question = str(next(m.content for m in reversed(messages) if m.type == "human"))
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:  # retrieve first
            call = {"name": self.tool_name, "args": {"query": question}, "id": "call-1"}
            msg = AIMessage("", tool_calls=[call])
        else:
            text = str(results[-1].content)
            contexts = [c for c in text.split(TOOL_SEPARATOR) if c.strip()]
            msg = AIMessage(self.generator.generate(question, contexts).text)
        return ChatResult(generations=[ChatGeneration(message=msg)])
