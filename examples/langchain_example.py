"""ragshield in a LangChain RAG chain, offline: which passages reach the LLM, and why.

Run: python examples/langchain_example.py   (needs: pip install "ragshield[langchain]")
"""

import json

from langchain_core.documents import Document
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from ragshield.corpus import read_corpus
from ragshield.demo import demo_files
from ragshield.integrations.langchain import RagshieldEmbeddings, RagshieldRunnable

corpus_file, attack_file = demo_files()  # 30 Wikipedia-style passages + a planted attack
attack = json.loads(attack_file.read_text(encoding="utf-8"))
docs = [Document(p.text, id=p.id) for p in read_corpus(corpus_file)]
docs += [Document(t, id=f"attack-{i}") for i, t in enumerate(attack["adv_texts"])]

embeddings = RagshieldEmbeddings()  # packaged all-MiniLM-L6-v2: nothing is downloaded
store = InMemoryVectorStore.from_documents(docs, embeddings)
retriever = store.as_retriever(search_kwargs={"k": 10})
shield = RagshieldRunnable("ragdefender", embeddings_model_name=embeddings.model_name)
prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
llm = RunnableLambda(lambda p: p.to_string())  # stand-in that echoes its prompt: use your LLM


def show(x: dict) -> dict:
    for d in x["context"]:
        print(f"  kept {d.id:<12} {d.metadata['ragshield']['reason']}")
    return {**x, "context": "\n".join(d.page_content for d in x["context"])}


chain = {"context": retriever, "question": RunnablePassthrough()} | shield | show | prompt | llm
sent = chain.invoke(attack["question"])
print("attack passages in the prompt:", sum(t in sent for t in attack["adv_texts"]), "of 5")
