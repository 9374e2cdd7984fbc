"""LangChain 1.x agent middleware: what a retrieval tool returns is screened before the model
reads it (Documents artifact or plain text), inside a real ``create_agent`` graph; the
offline example runs (issue #24, part 4)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from test_integrations_core import KeywordFilter, run_python

from ragshield.demo import demo_files
from ragshield.integrations.langchain import (
    EMPTY_TOOL_RESULT,
    GeneratorChat,
    RagshieldToolMiddleware,
)
from ragshield.types import Generation

ROOT = Path(__file__).resolve().parents[2]
ATTACK = json.loads(demo_files()[1].read_text(encoding="utf-8"))
CLEAN = [
    "Canberra is the capital city of Australia. Parliament first sat in Canberra in 1927.",
    "Melbourne is the capital of the state of Victoria, founded in 1835.",
]


class _Req:
    """The two fields of langchain's ToolCallRequest the middleware reads."""

    def __init__(self, name: str, args: dict[str, Any], state: Any = None) -> None:
        self.tool_call = {"name": name, "args": args, "id": "c1"}
        self.state = state


def _tool_message(docs: list[Document] | None, content: str | None = None) -> ToolMessage:
    text = content if content is not None else "\n\n".join(d.page_content for d in docs or [])
    return ToolMessage(text, tool_call_id="c1", artifact=docs)


@pytest.fixture(scope="module")
def middleware(encoder: Any) -> RagshieldToolMiddleware:
    mw = RagshieldToolMiddleware("ragdefender", encoder=encoder)
    mw.warm_up()
    return mw


def test_real_ragdefender_removes_planted_documents_from_the_artifact(
    middleware: RagshieldToolMiddleware,
) -> None:
    docs = [Document(t, id=f"adv{i}") for i, t in enumerate(ATTACK["adv_texts"])]
    docs += [Document(t, id=f"ok{i}") for i, t in enumerate(CLEAN)]
    out = middleware.wrap_tool_call(
        _Req("search", {"query": ATTACK["question"]}), lambda _r: _tool_message(docs)
    )
    kept = [d.id for d in out.artifact]
    # at most one of five survives (RAGDefender spares a group's edge member near the
    # query, see its spare_outlier); the genuine answer passage stays
    assert len([i for i in kept if i.startswith("adv")]) <= 1 and "ok0" in kept
    assert sum(t in out.content for t in ATTACK["adv_texts"]) <= 1
    report = out.response_metadata["ragshield"]
    assert len(report["removed"]) >= 4 and report["query"] == ATTACK["question"]
    assert out.artifact[0].metadata["ragshield"]["kept"] is True


@pytest.mark.parametrize(
    ("name", "screened", "status", "screens"),
    [
        ("search", None, "success", True),  # every tool by default
        ("search", ("search",), "success", True),
        ("calculator", ("search",), "success", False),  # not a listed tool
        ("search", None, "error", False),  # a failed tool call is passed on untouched
    ],
)
def test_text_output_split_and_scope(name: str, screened: Any, status: str, screens: bool) -> None:
    mw = RagshieldToolMiddleware(KeywordFilter(), screened_tools=screened, encoder=_HashEnc())
    content = "a clean passage\n\nPOISON passage\n\nanother clean one"
    msg = ToolMessage(content, tool_call_id="c1", status=status)
    out = mw.wrap_tool_call(_Req(name, {"query": "q"}), lambda _r: msg)
    if screens:
        assert out.content == "a clean passage\n\nanother clean one"
        assert out.response_metadata["ragshield"]["removed"][0]["index"] == 1
    else:
        assert out is msg


def test_query_falls_back_to_the_last_human_message_and_all_removed() -> None:
    from langchain_core.messages import HumanMessage

    f = KeywordFilter(word="passage")
    mw = RagshieldToolMiddleware(f, encoder=_HashEnc())
    state = {"messages": [HumanMessage("first"), HumanMessage("the real question")]}
    msg = ToolMessage("one passage\n\ntwo passage", tool_call_id="c1")
    out = mw.wrap_tool_call(_Req("search", {"q": 1}, state), lambda _r: msg)
    assert out.content == EMPTY_TOOL_RESULT
    assert out.response_metadata["ragshield"]["query"] == "the real question"


class _HashEnc:
    """Deterministic test-only encoder (bag of hashed words)."""

    name = "hash-16"
    dim = 16

    def encode(self, texts: Sequence[str], *, show_progress: bool = False) -> Any:
        import numpy as np

        out = np.zeros((len(texts), 16), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % 16] += 1
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


class _Reader:
    """Test-only generator: answers with the passages it was given, so the agent's final
    message shows exactly what the model read."""

    name = "reader"

    def generate(self, question: str, contexts: Sequence[str]) -> Generation:
        return Generation("READ: " + "\n\n".join(contexts))


def _scripted() -> GeneratorChat:
    return GeneratorChat(generator=_Reader(), tool_name="search")


def test_generator_chat_calls_the_tool_then_answers_from_its_passages() -> None:
    from langchain_core.messages import HumanMessage

    chat = _scripted()
    first = chat.invoke([HumanMessage("who?")])
    assert [(c["name"], c["args"]) for c in first.tool_calls] == [("search", {"query": "who?"})]
    tool_out = ToolMessage("one\n\n  \n\ntwo", tool_call_id="call-1")
    done = chat.invoke([HumanMessage("who?"), first, tool_out])
    assert done.content == "READ: one\n\ntwo" and not done.tool_calls  # blank passage dropped


@tool(response_format="content_and_artifact")
def search(query: str) -> tuple[str, list[Document]]:
    """Search the knowledge base."""
    docs = [Document("clean fact one"), Document("POISON planted"), Document("clean fact two")]
    return "\n\n".join(d.page_content for d in docs), docs


@pytest.mark.parametrize("use_async", [False, True])
def test_inside_a_create_agent_graph(use_async: bool) -> None:
    mw = RagshieldToolMiddleware(KeywordFilter(), encoder=_HashEnc())
    agent = create_agent(_scripted(), tools=[search], middleware=[mw])
    inp = {"messages": [{"role": "user", "content": "q"}]}
    if use_async:
        import asyncio

        out = asyncio.run(agent.ainvoke(inp))
    else:
        out = agent.invoke(inp)
    final = out["messages"][-1].content
    assert final == "READ: clean fact one\n\nclean fact two" and "POISON" not in final
    bare = create_agent(_scripted(), tools=[search]).invoke(inp)
    assert "POISON" in bare["messages"][-1].content  # the middleware made the difference


@pytest.mark.parametrize(
    "generator",
    ["extractive", pytest.param("smollm2-135m", marks=pytest.mark.slow)],  # real LM: ~50 s
)
def test_example_runs_offline(generator: str) -> None:
    """The shipped example: no network, the planted passages never reach the model."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "HF_HUB_OFFLINE": "1"}
    code = (
        "import runpy, sys, test_integrations_core as t\n"
        f"sys.argv = ['x', '--generator', {generator!r}]\n"
        "with t.network_guard() as attempts:\n"
        f"    runpy.run_path({str(ROOT / 'examples' / 'langchain_middleware_example.py')!r},"
        " run_name='__main__')\n"
        "assert not attempts, attempts\n"
    )
    res = run_python(code, env=env, timeout=300, cwd=ROOT / "tests")
    assert res.returncode == 0, res.stderr[-2000:]
    after = res.stdout.split("with RagshieldToolMiddleware")[1]
    assert ", 5 of them planted" in res.stdout.split("with Ragshield")[0]
    assert ", 0 of them planted" in after and "Sydney" not in after.split("answer:")[1]
