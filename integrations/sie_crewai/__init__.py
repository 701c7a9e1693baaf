"""CrewAI adapter for SIE: an embedder provider (and its embedding function), a sparse
embedder, and two tools for agents (rerank, extract).

>>> from crewai import Crew
>>> from sie_crewai import SIEEmbeddingProvider, SIERerankerTool
>>> embedder = SIEEmbeddingProvider(model="sentence-transformers/all-MiniLM-L6-v2")  # Crew(..., embedder=embedder)
>>> reranker = SIERerankerTool(model="cross-encoder/ms-marco-MiniLM-L-6-v2")
"""

import warnings

with warnings.catch_warnings():  # crewai.rag refuses the attribute Python sets on it for each child module
    warnings.simplefilter("ignore", ImportWarning)
    from ._embedder import SIEEmbeddingFunction, SIEEmbeddingProvider, SIESparseEmbedder
    from ._tools import SIEExtractorTool, SIERerankerTool

__all__ = ["SIEEmbeddingFunction", "SIEEmbeddingProvider", "SIEExtractorTool", "SIERerankerTool", "SIESparseEmbedder"]
