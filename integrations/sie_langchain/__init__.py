"""LangChain adapter for SIE: embeddings, a reranker, a chat model, a completion LLM and a document loader.

>>> from sie_langchain import SIEEmbeddings, SIEReranker, SIEChatModel
>>> embeddings = SIEEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2")
>>> reranker = SIEReranker(model="cross-encoder/ms-marco-MiniLM-L-6-v2", top_n=3)

langchain-core has no sparse-embeddings interface, so there is no sparse class here; use
``sie_qdrant.SIEVectorizer.embed_sparse`` for SPLADE vectors.
"""

from ._chat import SIELLM, SIEChatModel, to_sie_messages
from ._embeddings import SIEEmbeddings
from ._loader import SIEDocumentLoader
from ._rerank import SIEReranker

__all__ = ["SIELLM", "SIEChatModel", "SIEDocumentLoader", "SIEEmbeddings", "SIEReranker", "to_sie_messages"]
