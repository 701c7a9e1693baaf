"""CrewAI embedders. Dense: ``SIEEmbeddingProvider``, an embedder provider to give as ``embedder=`` to a
``Crew``, an ``Agent`` or ``Knowledge``; it builds ``SIEEmbeddingFunction``, which is ``sie_chroma``'s
Chroma embedding function with CrewAI's ``CustomEmbeddingFunction`` base added (CrewAI's memory,
knowledge and RAG storage are Chroma collections). Sparse: ``SIESparseEmbedder`` for SPLADE vectors in
hybrid search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from crewai.rag.core.base_embeddings_provider import BaseEmbeddingsProvider
from crewai.rag.embeddings.providers.custom.embedding_callable import CustomEmbeddingFunction
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from sie_chroma import SIEEmbeddingFunction as ChromaEmbeddingFunction
from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend, SparseDict
from sie_integrations_base._vectorizer import sparse_dict


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


class SIESparseEmbedder:
    """Sparse vectors ``{"indices": [...], "values": [...]}``: ``embed_documents(texts)``, ``embed_query(text)``
    (the same class and calls as the published ``sie-crewai``)."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str = "BAAI/bge-m3",
        *,
        priority: Literal["interactive", "batch"] | None = None,
        instruction: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: str | None = None,
    ) -> None:
        self.backend = SIEBackend(
            model, base_url=base_url, priority=priority, instruction=instruction, batch_size=batch_size,
            timeout=timeout, api_key=api_key,
        )  # fmt: skip

    def embed_documents(self, texts: Sequence[str]) -> list[SparseDict]:
        return [sparse_dict(r) for r in self.backend.encode(texts, output_types=["sparse"])] if texts else []

    def embed_query(self, text: str) -> SparseDict:
        return sparse_dict(self.backend.encode([text], output_types=["sparse"], is_query=True)[0])

    def close(self) -> None:
        self.backend.close()
