"""``SIEEmbeddings``: LangChain ``Embeddings`` on an SIE encode model."""

from __future__ import annotations

from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict

from ._common import SIEFields


class SIEEmbeddings(SIEFields, Embeddings):
    """Dense embeddings from an SIE server.

    Documents are encoded as documents (the model's document prefix), queries with
    ``is_query=True`` (its query prefix, or ``instruction``), ``batch_size`` texts per request.

    >>> embeddings = SIEEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2")
    >>> len(embeddings.embed_query("hello"))
    384
    """

    model_config = ConfigDict(extra="forbid")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.backend.embed(texts, is_query=False)

    def embed_query(self, text: str) -> list[float]:
        return self.backend.embed([text], is_query=True)[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self.backend.aembed(texts, is_query=False)

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.backend.aembed([text], is_query=True))[0]
