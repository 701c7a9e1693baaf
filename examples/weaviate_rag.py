"""Retrieval with Weaviate on SIE: self-provided named vectors, batch insert, near_vector.

    .venv/bin/pip install -e ".[weaviate]"
    docker run -p 8081:8080 -p 50051:50051 cr.weaviate.io/semitechnologies/weaviate:1.32.0
    make serve                              # another terminal (SIE on 8080)
    WEAVIATE_URL=http://127.0.0.1:8081 .venv/bin/python examples/weaviate_rag.py

SIE_MULTIVECTOR (a ColBERT model) adds a multivector named "colbert" to the collection.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

import weaviate
from rag_data import EMBEDDER, PASSAGES, QUESTION, rerank_best
from weaviate.classes.config import DataType, Property

from sie_weaviate import SIEVectorizer


def main() -> None:
    url = urlparse(os.environ.get("WEAVIATE_URL", "http://127.0.0.1:8081"))
    vectorizer = SIEVectorizer(EMBEDDER, multivector_model=os.environ.get("SIE_MULTIVECTOR") or None)
    # skip_init_checks: no version lookup on pypi.org at connect time
    with weaviate.connect_to_local(
        host=url.hostname or "127.0.0.1",
        port=url.port or 8080,
        grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
        skip_init_checks=True,
    ) as client:
        if client.collections.exists("Notes"):
            client.collections.delete("Notes")
        notes = client.collections.create(
            "Notes",
            properties=[Property(name="text", data_type=DataType.TEXT)],
            vector_config=vectorizer.vector_config(),
        )
        vectorizer.insert(notes, PASSAGES)

        # 1. retrieve by the dense vector (target="colbert" searches the multivector)
        hits = vectorizer.near_vector(notes, QUESTION, limit=5)
        candidates = [str(hit.properties["text"]) for hit in hits.objects]
        print("retrieved:", [(str(hit.properties["text"])[:40], hit.metadata.distance) for hit in hits.objects])

    # 2. rerank with the SDK's score call (rag_data.rerank_best)
    print("best     :", rerank_best(candidates))


if __name__ == "__main__":
    main()
