"""``SIENodePostprocessor``: a LlamaIndex reranker on an SIE score model."""

from __future__ import annotations

from llama_index.core.bridge.pydantic import Field
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from ._common import SIEFields


class SIENodePostprocessor(SIEFields, BaseNodePostprocessor):
    """Reranks retrieved nodes by relevance to the query with an SIE score model.

    Each node's score becomes the model's relevance score; the ``top_n`` best (all when
    ``None``) come back best first. Use it as ``node_postprocessors=[...]`` in a query engine.
    """

    top_n: int | None = Field(default=3, ge=1, description="How many nodes to keep.")
    metadata_mode: MetadataMode = Field(default=MetadataMode.EMBED, description="What of a node is scored.")

    @classmethod
    def class_name(cls) -> str:
        return "SIENodePostprocessor"

    def _texts(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> tuple[str, list[str]]:
        if query_bundle is None:
            raise ValueError("SIENodePostprocessor needs the query (query_bundle or query_str)")
        return query_bundle.query_str, [node.node.get_content(metadata_mode=self.metadata_mode) for node in nodes]

    @staticmethod
    def _ranked(nodes: list[NodeWithScore], ranked: list[tuple[int, float]]) -> list[NodeWithScore]:
        return [NodeWithScore(node=nodes[i].node, score=score) for i, score in ranked]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        query, texts = self._texts(nodes, query_bundle)
        return self._ranked(nodes, self.backend.rank(query, texts, top_k=self.top_n))

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        query, texts = self._texts(nodes, query_bundle)
        return self._ranked(nodes, await self.backend.arank(query, texts, top_k=self.top_n))
