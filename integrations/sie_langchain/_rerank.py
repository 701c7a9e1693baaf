"""``SIEReranker``: a LangChain ``BaseDocumentCompressor`` on an SIE score model."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field

from ._common import SIEFields


class SIEReranker(SIEFields, BaseDocumentCompressor):
    """Reranks documents by relevance to the query with an SIE score model.

    A cross-encoder scores each (query, document) pair; an embedding model scores as a
    bi-encoder. Returns the ``top_n`` best documents (all of them when ``None``), best first,
    each with ``metadata["relevance_score"]``. Use it in ``ContextualCompressionRetriever``.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    top_n: int | None = Field(default=3, ge=1)
    score_key: str = "relevance_score"

    def _ranked(self, documents: Sequence[Document], ranked: list[tuple[int, float]]) -> list[Document]:
        copies = []
        for i, score in ranked:
            doc = documents[i]
            metadata = {**doc.metadata, self.score_key: score}
            copies.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
        return copies

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        return self._ranked(documents, self.backend.rank(query, [d.page_content for d in documents], top_k=self.top_n))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        ranked = await self.backend.arank(query, [d.page_content for d in documents], top_k=self.top_n)
        return self._ranked(documents, ranked)

    def rerank(self, query: str, documents: Sequence[str]) -> list[tuple[int, float]]:
        """(index, score) of the ``top_n`` best of plain texts, best first."""
        return self.backend.rank(query, list(documents), top_k=self.top_n)
