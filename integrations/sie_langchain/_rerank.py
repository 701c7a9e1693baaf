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

    def _ranked(self, documents: Sequence[Document], scores: list[float]) -> list[Document]:
        order = sorted(range(len(documents)), key=lambda i: scores[i], reverse=True)
        if self.top_n is not None:
            order = order[: self.top_n]
        ranked = []
        for i in order:
            doc = documents[i]
            metadata = {**doc.metadata, self.score_key: scores[i]}
            ranked.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
        return ranked

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        scores = self.backend.score(query, [doc.page_content for doc in documents])
        return self._ranked(documents, scores)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        if not documents:
            return []
        scores = await self.backend.ascore(query, [doc.page_content for doc in documents])
        return self._ranked(documents, scores)

    def rerank(self, query: str, documents: Sequence[str]) -> list[tuple[int, float]]:
        """(index, score) of the ``top_n`` best of plain texts, best first."""
        scores = self.backend.score(query, list(documents))
        order = sorted(range(len(scores)), key=lambda i: scores[i], reverse=True)
        return [(i, scores[i]) for i in order[: self.top_n]]
