"""Hybrid retrieval with Qdrant on SIE: dense (+ sparse, + ColBERT rerank) named vectors.

    .venv/bin/pip install -e ".[qdrant]"
    make serve                              # another terminal
    .venv/bin/python examples/qdrant_rag.py

SIE_SPARSE (a SPLADE model) adds a sparse prefetch fused with RRF; SIE_MULTIVECTOR (a
ColBERT model) reranks the fused candidates by MAX_SIM. Then a cross-encoder reranks.
"""

from __future__ import annotations

import os

from qdrant_client import QdrantClient
from rag_data import EMBEDDER, PASSAGES, QUESTION, rerank_best

from sie_qdrant import SIEVectorizer


def main() -> None:
    vectorizer = SIEVectorizer(
        EMBEDDER,
        sparse_model=os.environ.get("SIE_SPARSE") or None,
        multivector_model=os.environ.get("SIE_MULTIVECTOR") or None,
    )
    print("vectors  :", sorted(vectorizer.names.values()))
    client = QdrantClient(":memory:")  # or QdrantClient(path="db") / QdrantClient(url=...)
    client.create_collection(
        "notes",
        vectors_config=vectorizer.vectors_config(),
        sparse_vectors_config=vectorizer.sparse_vectors_config(),
    )
    client.upsert("notes", vectorizer.points(PASSAGES))  # every named vector, one request per model

    # 1. retrieve: prefetch per vector kind, RRF, optional ColBERT rerank
    hits = client.query_points("notes", **vectorizer.hybrid_query(QUESTION, limit=5)).points
    candidates = [str((hit.payload or {})["text"]) for hit in hits]
    print("retrieved:", [text[:40] for text in candidates])

    # 2. rerank with the SDK's score call (rag_data.rerank_best)
    print("best     :", rerank_best(candidates))


if __name__ == "__main__":
    main()
