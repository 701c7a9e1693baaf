"""``SIERanker``: Haystack documents reordered by an SIE score model (a cross-encoder, or an embedder
scoring as a bi-encoder), each copy's ``score`` set to the model's relevance score."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from haystack import Document, component
from haystack.utils import Secret

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, check_top_k, rank_order

from ._common import SIEComponent, document_text


@component
class SIERanker(SIEComponent):
    """``run(query=..., documents=[...], top_k=None, score_threshold=None)`` gives ``{"documents": [...]}``,
    best first: at most ``top_k`` (the constructor's unless given), none scoring below ``score_threshold``."""

    def __init__(
        self,
        model: str,
        *,
        top_k: int | None = 10,
        score_threshold: float | None = None,
        meta_fields_to_embed: list[str] | None = None,
        embedding_separator: str = "\n",
        base_url: str | None = None,
        priority: Literal["interactive", "batch"] | None = None,
        instruction: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        api_key: Secret | None = None,
    ) -> None:
        check_top_k(top_k)
        SIEComponent.__init__(  # the @component class is a copy: no zero-argument super()
            self,
            model,
            base_url=base_url,
            priority=priority,
            instruction=instruction,
            batch_size=batch_size,
            timeout=timeout,
            api_key=api_key,
        )
        self.top_k = top_k
        self.score_threshold = score_threshold
        self.meta_fields_to_embed = list(meta_fields_to_embed or [])
        self.embedding_separator = embedding_separator

    def _init_parameters(self) -> dict[str, Any]:
        return {
            "top_k": self.top_k,
            "score_threshold": self.score_threshold,
            "meta_fields_to_embed": self.meta_fields_to_embed,
            "embedding_separator": self.embedding_separator,
        }

    def _text(self, doc: Document) -> str:
        return document_text(doc, self.meta_fields_to_embed, self.embedding_separator)

    def _ranked(
        self, documents: list[Document], scores: list[float], top_k: int | None, score_threshold: float | None
    ) -> dict[str, Any]:
        top_k = self.top_k if top_k is None else top_k
        threshold = self.score_threshold if score_threshold is None else score_threshold
        check_top_k(top_k)
        order = [i for i in rank_order(scores) if threshold is None or scores[i] >= threshold][:top_k]
        return {"documents": [replace(documents[i], score=scores[i]) for i in order]}

    @component.output_types(documents=list[Document])
    def run(
        self,
        query: str,
        documents: list[Document],
        top_k: int | None = None,
        score_threshold: float | None = None,
    ) -> dict[str, Any]:
        if not documents:
            return {"documents": []}
        scores = self.backend.score(query, [self._text(doc) for doc in documents])
        return self._ranked(documents, scores, top_k, score_threshold)

    @component.output_types(documents=list[Document])
    async def run_async(
        self,
        query: str,
        documents: list[Document],
        top_k: int | None = None,
        score_threshold: float | None = None,
    ) -> dict[str, Any]:
        if not documents:
            return {"documents": []}
        scores = await self.backend.ascore(query, [self._text(doc) for doc in documents])
        return self._ranked(documents, scores, top_k, score_threshold)
