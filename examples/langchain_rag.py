"""RAG with LangChain on SIE: embed, store, retrieve, rerank, answer.

    .venv/bin/pip install -e ".[langchain]"
    make serve                              # another terminal
    .venv/bin/python examples/langchain_rag.py

Steps whose model this server does not serve (the reranker or the LLM, offline) print a
skip message and the script goes on.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.vectorstores import InMemoryVectorStore
from rag_data import EMBEDDER, GENERATOR, PASSAGES, QUESTION, RERANKER, prompt, skipped

from sie_langchain import SIEChatModel, SIEEmbeddings, SIEReranker
from sie_sdk import APIError


def main() -> None:
    # 1. embed the notes into a vector store (documents and the query get their own prefixes)
    store = InMemoryVectorStore(SIEEmbeddings(model=EMBEDDER))
    store.add_texts(PASSAGES)
    candidates = store.similarity_search(QUESTION, k=5)
    print("retrieved:", [doc.page_content[:40] for doc in candidates])

    # 2. rerank the candidates
    try:
        best = SIEReranker(model=RERANKER, top_n=2).compress_documents(candidates, QUESTION)
        print("reranked :", [(doc.page_content[:40], round(doc.metadata["relevance_score"], 3)) for doc in best])
    except APIError as error:
        skipped("rerank", RERANKER, error)
        best = candidates[:2]
    print("best     :", best[0].page_content)

    # 3. answer with the server's LLM
    chat = SIEChatModel(model=GENERATOR, max_tokens=64, temperature=0.0)
    messages = [
        SystemMessage("You answer questions about company notes."),
        HumanMessage(prompt([d.page_content for d in best])),
    ]
    try:
        answer = chat.invoke(messages)
    except APIError as error:
        skipped("answer", GENERATOR, error)
        return
    print("answer   :", answer.content)
    print("usage    :", answer.usage_metadata)


if __name__ == "__main__":
    main()
