"""Qdrant adapter: vectors from an SIE server for Qdrant points and queries.

>>> from qdrant_client import QdrantClient
>>> from sie_qdrant import SIEVectorizer
>>> vectorizer = SIEVectorizer("sentence-transformers/all-MiniLM-L6-v2")
>>> client = QdrantClient(":memory:")
>>> client.create_collection("docs", vectors_config=vectorizer.vectors_config())
>>> client.upsert("docs", vectorizer.points(["Invoice INV-2024-0117 ..."]))
>>> client.query_points("docs", **vectorizer.query("what do we owe?"))
"""

from ._vectorizer import SIEVectorizer

__all__ = ["SIEVectorizer"]
