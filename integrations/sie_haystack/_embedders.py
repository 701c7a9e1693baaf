"""Haystack embedders: dense (``SIETextEmbedder``, ``SIEDocumentEmbedder``) and sparse
(``SIESparseTextEmbedder``, ``SIESparseDocumentEmbedder``, Haystack ``SparseEmbedding``s, for SPLADE-style
models). Text embedders embed a query (with the model's query prefix and ``instruction``); document
embedders embed each document's content, after the ``meta_fields_to_embed`` values, and return copies
with ``embedding`` / ``sparse_embedding`` set."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from haystack import Document, component
from haystack.dataclasses import SparseEmbedding
from haystack.utils import Secret

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SparseDict

from ._common import SIEComponent, document_text


def _sparse(found: SparseDict) -> SparseEmbedding:
    return SparseEmbedding(indices=found["indices"], values=found["values"])


def _check_text(text: Any, what: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} takes one string; for a list of documents use its document embedder")
    return text


class _DocumentTexts(SIEComponent):
    """The text each document is embedded from: the chosen meta values, then the content."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        priority: Literal["interactive", "batch"] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: Secret | None = None,
        meta_fields_to_embed: list[str] | None = None,
        embedding_separator: str = "\n",
    ) -> None:
        SIEComponent.__init__(
            self, model, base_url=base_url, priority=priority, batch_size=batch_size, timeout=timeout, api_key=api_key
        )
        self.meta_fields_to_embed = list(meta_fields_to_embed or [])
        self.embedding_separator = embedding_separator

    def _init_parameters(self) -> dict[str, Any]:
        return {"meta_fields_to_embed": self.meta_fields_to_embed, "embedding_separator": self.embedding_separator}

    def _texts(self, documents: list[Document]) -> list[str]:
        if not isinstance(documents, list) or not all(isinstance(d, Document) for d in documents):
            raise TypeError("a document embedder takes a list of Documents; for one string use its text embedder")
        return [document_text(doc, self.meta_fields_to_embed, self.embedding_separator) for doc in documents]


@component
class SIETextEmbedder(SIEComponent):
    """A query's dense vector: ``run(text=...)`` gives ``{"embedding": [float, ...]}``."""

    @component.output_types(embedding=list[float])
    def run(self, text: str) -> dict[str, Any]:
        return {"embedding": self.backend.embed([_check_text(text, "SIETextEmbedder")], is_query=True)[0]}

    @component.output_types(embedding=list[float])
    async def run_async(self, text: str) -> dict[str, Any]:
        vectors = await self.backend.aembed([_check_text(text, "SIETextEmbedder")], is_query=True)
        return {"embedding": vectors[0]}


@component
class SIEDocumentEmbedder(_DocumentTexts):
    """Documents with their dense ``embedding`` set: ``run(documents=[...])`` gives ``{"documents": [...]}``."""

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, Any]:
        vectors = self.backend.embed(self._texts(documents))
        return {"documents": [replace(doc, embedding=vec) for doc, vec in zip(documents, vectors, strict=True)]}

    @component.output_types(documents=list[Document])
    async def run_async(self, documents: list[Document]) -> dict[str, Any]:
        vectors = await self.backend.aembed(self._texts(documents))
        return {"documents": [replace(doc, embedding=vec) for doc, vec in zip(documents, vectors, strict=True)]}


@component
class SIESparseTextEmbedder(SIEComponent):
    """A query's sparse vector: ``run(text=...)`` gives ``{"sparse_embedding": SparseEmbedding}``."""

    @component.output_types(sparse_embedding=SparseEmbedding)
    def run(self, text: str) -> dict[str, Any]:
        texts = [_check_text(text, "SIESparseTextEmbedder")]
        (found,) = self.backend.sparse(texts, is_query=True)
        return {"sparse_embedding": _sparse(found)}


@component
class SIESparseDocumentEmbedder(_DocumentTexts):
    """Documents with their ``sparse_embedding`` set: ``run(documents=[...])`` gives ``{"documents": [...]}``."""

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, Any]:
        found = self.backend.sparse(self._texts(documents))
        return {
            "documents": [replace(doc, sparse_embedding=_sparse(f)) for doc, f in zip(documents, found, strict=True)]
        }
