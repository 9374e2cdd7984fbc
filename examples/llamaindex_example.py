"""ragshield in a LlamaIndex query engine, offline: which passages reach the LLM, and why.

Run: python examples/llamaindex_example.py   (needs: pip install "ragshield[llamaindex]")
"""

import json

from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.llms import MockLLM

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.integrations.llamaindex import RagshieldEmbedding, RagshieldNodePostprocessor

corpus_file, attack_file = demo_files()  # 30 Wikipedia-style passages + a planted attack
attack = json.loads(attack_file.read_text(encoding="utf-8"))
docs = [Document(text=p.text, id_=p.id) for p in read_corpus(corpus_file)]
docs += [Document(text=t, id_=f"attack-{i}") for i, t in enumerate(attack["adv_texts"])]

# Offline: never fall back to LlamaIndex's OpenAI defaults. Its tokenizer and NLTK data
# load from files bundled in llama-index-core (leave TIKTOKEN_CACHE_DIR / NLTK_DATA unset).
Settings.embed_model = RagshieldEmbedding()  # packaged all-MiniLM-L6-v2
Settings.llm = MockLLM()  # stand-in that echoes its prompt: use your LLM here

index = VectorStoreIndex.from_documents(docs)
shield = RagshieldNodePostprocessor(
    "ragdefender", embeddings_model_name=Settings.embed_model.model_name
)
engine = index.as_query_engine(similarity_top_k=10, node_postprocessors=[shield])
response = engine.query(attack["question"])
for n in response.source_nodes:
    print(f"  kept {n.node.ref_doc_id:<12} {n.node.metadata['ragshield']['reason']}")
sent = str(response)  # the echoed prompt
print("attack passages in the prompt:", sum(t in sent for t in attack["adv_texts"]), "of 5")
