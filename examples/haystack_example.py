"""ragshield in a Haystack pipeline, offline: which passages are removed before the LLM, why.
Run: python examples/haystack_example.py   (needs: pip install "ragshield[haystack]")"""

import json

from haystack import Document, Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.integrations.haystack import (
    RagshieldDocumentEmbedder,
    RagshieldDocumentFilter,
    RagshieldTextEmbedder,
)

corpus_file, attack_file = demo_files()  # 30 Wikipedia-style passages + a planted attack
attack = json.loads(attack_file.read_text(encoding="utf-8"))
q = attack["question"]
docs = [Document(content=p.text, id=p.id) for p in read_corpus(corpus_file)]
docs += [Document(content=t, id=f"attack-{i}") for i, t in enumerate(attack["adv_texts"])]
store = InMemoryDocumentStore()
store.write_documents(RagshieldDocumentEmbedder().run(docs)["documents"])  # packaged MiniLM
pipe = Pipeline()
pipe.add_component("embed", RagshieldTextEmbedder())
pipe.add_component("retrieve", InMemoryEmbeddingRetriever(store, top_k=10, return_embedding=True))
shield = RagshieldDocumentFilter("ragdefender", embeddings_model_name="all-MiniLM-L6-v2")
pipe.add_component("shield", shield)
template = [ChatMessage.from_user("{% for d in documents %}{{ d.content }}\n{% endfor %}{{ q }}")]
pipe.add_component("prompt", ChatPromptBuilder(template, required_variables="*"))
pipe.add_component("llm", MockChatGenerator())  # stand-in that echoes its prompt: use your LLM
pipe.connect("embed.embedding", "retrieve.query_embedding")
pipe.connect("retrieve.documents", "shield.documents")
pipe.connect("shield.documents", "prompt.documents")
pipe.connect("prompt.prompt", "llm.messages")
out = pipe.run({"embed": {"text": q}, "shield": {"query": q}, "prompt": {"q": q}})
for d in out["shield"]["removed_documents"]:
    print(f"  removed {d.id:<10} {d.meta['ragshield']['reason']}")
sent = out["llm"]["replies"][0].text
print("attack passages in the prompt:", sum(t in sent for t in attack["adv_texts"]), "of 5")
