"""Haystack components for SIE: dense and sparse embedders, a ranker, a document converter and a chat
generator, each a Haystack ``@component`` that serializes with ``to_dict`` / ``from_dict``.

>>> from sie_haystack import SIEDocumentEmbedder, SIETextEmbedder, SIERanker
>>> embedder = SIEDocumentEmbedder(model="sentence-transformers/all-MiniLM-L6-v2")
>>> ranker = SIERanker(model="cross-encoder/ms-marco-MiniLM-L-6-v2", top_k=3)
"""

from ._chat import SIEChatGenerator
from ._converter import SIEDocumentConverter
from ._embedders import SIEDocumentEmbedder, SIESparseDocumentEmbedder, SIESparseTextEmbedder, SIETextEmbedder
from ._ranker import SIERanker

__all__ = [
    "SIEChatGenerator",
    "SIEDocumentConverter",
    "SIEDocumentEmbedder",
    "SIERanker",
    "SIESparseDocumentEmbedder",
    "SIESparseTextEmbedder",
    "SIETextEmbedder",
]
