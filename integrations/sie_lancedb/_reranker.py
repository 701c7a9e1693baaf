"""``SIEReranker``: a LanceDB ``Reranker`` on an SIE score model."""

from __future__ import annotations

import pyarrow as pa
from lancedb.rerankers import Reranker

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend
from sie_sdk.types import Priority

SCORE_COLUMN = "_relevance_score"


class SIEReranker(Reranker):
    """Reranks vector, full-text and hybrid results by an SIE score model.

    Scores the text in ``column`` against the query, adds ``_relevance_score`` and sorts by it,
    best first. With ``return_score="relevance"`` (default) the search's own ``_distance`` /
    ``_score`` columns are dropped; ``"all"`` keeps them.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        *,
        column: str = "text",
        priority: Priority | None = None,
        instruction: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        return_score: str = "relevance",
        api_key: str | None = None,
    ) -> None:
        super().__init__(return_score)
        self.column = column
        self.backend = SIEBackend(
            model,
            base_url=base_url,
            priority=priority,
            instruction=instruction,
            batch_size=batch_size,
            timeout=timeout,
            api_key=api_key,
        )

    def __str__(self) -> str:
        return f"SIEReranker(model={self.backend.model})"

    def _rerank(self, results: pa.Table, query: str) -> pa.Table:
        results = self._handle_empty_results(results)
        if len(results) == 0:
            return results
        texts = [str(text) for text in results[self.column].to_pylist()]
        scores = self.backend.score(query, texts)
        return results.append_column(SCORE_COLUMN, pa.array(scores, type=pa.float32()))

    @staticmethod
    def _sorted(results: pa.Table) -> pa.Table:
        return results.sort_by([(SCORE_COLUMN, "descending")])

    def rerank_vector(self, query: str, vector_results: pa.Table) -> pa.Table:
        results = self._rerank(vector_results, query)
        if self.score == "relevance" and "_distance" in results.column_names:
            results = results.drop_columns(["_distance"])
        return self._sorted(results)

    def rerank_fts(self, query: str, fts_results: pa.Table) -> pa.Table:
        results = self._rerank(fts_results, query)
        if self.score == "relevance" and "_score" in results.column_names:
            results = results.drop_columns(["_score"])
        return self._sorted(results)

    def rerank_hybrid(self, query: str, vector_results: pa.Table, fts_results: pa.Table) -> pa.Table:
        if self.score == "all":
            combined = self._merge_and_keep_scores(vector_results, fts_results)
        else:
            combined = self.merge_results(vector_results, fts_results)
        combined = self._rerank(combined, query)
        if self.score == "relevance":
            combined = self._keep_relevance_score(combined)
        return self._sorted(combined)
