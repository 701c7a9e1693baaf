"""Weaviate (v4 client) adapter for SIE: bring-your-own vectors for self-provided named vectors.

>>> import weaviate
>>> from sie_weaviate import SIEVectorizer
>>> vectorizer = SIEVectorizer("sentence-transformers/all-MiniLM-L6-v2")
>>> with weaviate.connect_to_local() as client:
...     docs = client.collections.create("Docs", vector_config=vectorizer.vector_config())
...     vectorizer.insert(docs, ["Invoice INV-2024-0117 ..."])
...     hits = vectorizer.near_vector(docs, "what do we owe?", limit=3)
"""

from ._vectorizer import SIEVectorizer

__all__ = ["SIEVectorizer"]
