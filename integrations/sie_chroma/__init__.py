"""Chroma adapter for SIE: ``SIEEmbeddingFunction``, registered under the name ``"sie"``.

>>> import chromadb
>>> from sie_chroma import SIEEmbeddingFunction
>>> client = chromadb.PersistentClient(path="db")
>>> sie = SIEEmbeddingFunction(model="sentence-transformers/all-MiniLM-L6-v2")
>>> docs = client.create_collection("docs", embedding_function=sie)

Importing ``sie_chroma`` registers the function, so a collection made with it reopens in
another process with ``client.get_collection("docs")`` and no function passed.
"""

from ._embedding_function import SIEEmbeddingFunction

__all__ = ["SIEEmbeddingFunction"]
