"""Retrieval with Chroma on SIE: a collection embedded by the server, then a rerank.

    .venv/bin/pip install -e ".[chroma]"
    make serve                              # another terminal
    .venv/bin/python examples/chroma_rag.py [DB_FOLDER]

With a DB_FOLDER the collection persists; run the script again and it reopens the collection
with no embedding function passed (``import sie_chroma`` is enough).
"""

from __future__ import annotations

import sys

import chromadb
from chromadb.config import Settings
from rag_data import EMBEDDER, PASSAGES, QUESTION, rerank_best

import sie_chroma  # registers the "sie" embedding function


def main() -> None:
    settings = Settings(anonymized_telemetry=False)
    if len(sys.argv) > 1:
        client = chromadb.PersistentClient(path=sys.argv[1], settings=settings)
    else:
        client = chromadb.EphemeralClient(settings=settings)
    names = [c.name for c in client.list_collections()]
    if "notes" in names:
        notes = client.get_collection("notes")  # the stored config rebuilds SIEEmbeddingFunction
        print("reopened 'notes' with", type(notes.configuration["embedding_function"]).__name__)
    else:
        function = sie_chroma.SIEEmbeddingFunction(model=EMBEDDER)
        notes = client.create_collection("notes", embedding_function=function)
        notes.add(ids=[f"note-{i}" for i in range(len(PASSAGES))], documents=PASSAGES)

    # 1. retrieve (Chroma embeds the query with embed_query: the model's query prefix)
    found = notes.query(query_texts=[QUESTION], n_results=5)
    candidates = found["documents"][0] if found["documents"] else []
    print("retrieved:", [text[:40] for text in candidates])

    # 2. rerank with the SDK's score call (rag_data.rerank_best)
    print("best     :", rerank_best(candidates))


if __name__ == "__main__":
    main()
