"""CrewAI embedders. Dense: ``SIEEmbeddingProvider``, an embedder provider to give as ``embedder=`` to a
``Crew``, an ``Agent`` or ``Knowledge``; it builds ``SIEEmbeddingFunction``, which is ``sie_chroma``'s
Chroma embedding function with CrewAI's ``CustomEmbeddingFunction`` base added (CrewAI's memory,
knowledge and RAG storage are Chroma collections). Sparse: ``SIESparseEmbedder`` for SPLADE vectors in
hybrid search."""

from __future__ import annotations

from typing import Literal, Unpack

from crewai.rag.core.base_embeddings_provider import BaseEmbeddingsProvider
from crewai.rag.embeddings.providers.custom.embedding_callable import CustomEmbeddingFunction
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sie_chroma import SIEEmbeddingFunction as ChromaEmbeddingFunction
from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, CallOptions, SparseEmbedder


class SIEEmbeddingFunction(ChromaEmbeddingFunction, CustomEmbeddingFunction):
    """Dense vectors from an SIE embed model: ``fn(texts)`` embeds documents, ``fn.embed_query(texts)``
    queries (the model's query prefix, or ``instruction``), one float32 array per text."""


class SIEEmbeddingProvider(BaseEmbeddingsProvider[SIEEmbeddingFunction]):
    """``embedder=SIEEmbeddingProvider(model="...", base_url="http://127.0.0.1:8080")``.

    A provider instance, because CrewAI's ``{"provider": "custom", "config": {...}}`` dict keeps only the
    class of its config. Unset fields are read from ``$SIE_<FIELD>`` (``$SIE_MODEL``, ``$SIE_API_KEY``...);
    ``base_url`` ``None``: ``$SIE_URL``, else http://127.0.0.1:8080.
    """

    model_config = SettingsConfigDict(env_prefix="SIE_", extra="forbid", populate_by_name=True)

    embedding_callable: type[SIEEmbeddingFunction] = Field(default=SIEEmbeddingFunction)
    model: str
    base_url: str | None = None
    priority: Literal["interactive", "batch"] | None = None
    instruction: str | None = None
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    timeout: float | None = DEFAULT_TIMEOUT_S
    api_key: str | None = Field(default=None, repr=False)


class SIESparseEmbedder(SparseEmbedder):
    """Sparse vectors ``{"indices": [...], "values": [...]}``: ``embed_documents(texts)``, ``embed_query(text)``
    (the same class and calls as the published ``sie-crewai``, whose first two arguments are ``base_url`` and
    ``model``). ``options``: ``priority``, ``instruction``, ``batch_size``, ``timeout``, ``api_key``."""

    def __init__(self, base_url: str | None = None, model: str = "BAAI/bge-m3", **options: Unpack[CallOptions]) -> None:
        super().__init__(model, base_url=base_url, **options)
