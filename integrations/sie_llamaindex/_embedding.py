"""``SIEEmbedding``: a LlamaIndex ``BaseEmbedding`` on an SIE encode model."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field

from sie_integrations_base import DEFAULT_BATCH_SIZE

from ._common import SIEFields


class SIEEmbedding(SIEFields, BaseEmbedding):
    """Dense embeddings from an SIE server.

    Queries are encoded with ``is_query=True`` (the model's query prefix, or ``instruction``),
    texts as documents. ``get_text_embedding_batch`` hands ``embed_batch_size`` texts at a time
    to ``_get_text_embeddings``, which sends them in one request (split at ``batch_size``).

    >>> from llama_index.core import Settings
    >>> Settings.embed_model = SIEEmbedding(model="sentence-transformers/all-MiniLM-L6-v2")
    """

    embed_batch_size: int = Field(default=DEFAULT_BATCH_SIZE, gt=0, le=2048)

    def __init__(self, **data: Any) -> None:
        data.setdefault("model_name", data.get("model"))
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "SIEEmbedding"

    def _get_query_embedding(self, query: str) -> Embedding:
        return self.backend.embed([query], is_query=True)[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await self.backend.aembed([query], is_query=True))[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self.backend.embed([text])[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self.backend.aembed([text]))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self.backend.embed(texts)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await self.backend.aembed(texts)
