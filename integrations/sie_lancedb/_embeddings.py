"""LanceDB text embedding functions on SIE: dense (``"sie"``) and multivector (``"sie-multivector"``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar, cast

import numpy as np
from lancedb.embeddings import TextEmbeddingFunction
from lancedb.embeddings import register as _lancedb_register
from pydantic import Field, PrivateAttr

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend

F = TypeVar("F", bound=type)
register = cast(Callable[[str], Callable[[F], F]], _lancedb_register)


class _SIETextFunction(TextEmbeddingFunction):
    """Settings and calls shared by both functions.

    ``model``, ``base_url`` (``None``: ``$SIE_URL`` at call time, else
    http://127.0.0.1:8080), ``priority``, ``instruction`` (queries only), ``batch_size``,
    ``timeout``, ``api_key`` (``None``: ``$SIE_API_KEY``; LanceDB keeps it out of the table's
    config: through ``create()`` it takes ``"$var:NAME"`` only). LanceDB's own retry loop is
    bypassed: the SDK already retries what can be retried, and other errors reach the caller
    as the SDK's typed exceptions.
    """

    output: ClassVar[Literal["dense", "multivector"]] = "dense"

    model: str
    base_url: str | None = None
    priority: Literal["interactive", "batch"] | None = None
    instruction: str | None = None
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    timeout: float | None = DEFAULT_TIMEOUT_S
    api_key: str | None = Field(default=None, repr=False)

    _backend: SIEBackend | None = PrivateAttr(default=None)

    @staticmethod
    def sensitive_keys() -> list[str]:
        return ["api_key"]

    @property
    def backend(self) -> SIEBackend:
        if self._backend is None:
            self._backend = SIEBackend.from_settings(self)
        return self._backend

    def ndims(self) -> int:
        """The vector size (per token, for multivectors), asked from the server once."""
        return self.backend.dims(self.output)

    def _embed(self, texts: Any, *, is_query: bool) -> list[np.ndarray]:
        return self.backend.arrays(list(self.sanitize_input(texts)), output=self.output, is_query=is_query)

    def generate_embeddings(self, texts: Any, *args: Any, **kwargs: Any) -> list[Any]:
        """Document embeddings (the model's document prefix)."""
        return self._embed(texts, is_query=False)

    def compute_query_embeddings(self, query: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Query embeddings (the model's query prefix, or ``instruction``)."""
        return self._embed([query], is_query=True)

    def compute_query_embeddings_with_retry(self, *args: Any, **kwargs: Any) -> list[Any]:
        return self.compute_query_embeddings(*args, **kwargs)

    def compute_source_embeddings_with_retry(self, *args: Any, **kwargs: Any) -> list[Any]:
        return self.compute_source_embeddings(*args, **kwargs)


@register("sie")
class SIEEmbeddingFunction(_SIETextFunction):
    """Dense text embeddings from an SIE server; declare the column as ``Vector(fn.ndims())``."""

    output: ClassVar[Literal["dense", "multivector"]] = "dense"


@register("sie-multivector")
class SIEMultivectorEmbeddingFunction(_SIETextFunction):
    """Per-token (ColBERT-style) embeddings; declare the column as ``MultiVector(fn.ndims())``.

    LanceDB (0.40) fills a vector column on ``add`` only with vectors of ``ndims()`` numbers,
    which a multivector is not: add rows through ``with_vectors(rows)``. Searching by text
    (``table.search("...")``) embeds the query through this function; LanceDB scores
    multivectors by MaxSim, with ``metric("cosine")``.
    """

    output: ClassVar[Literal["dense", "multivector"]] = "multivector"

    def with_vectors(
        self, rows: Sequence[Mapping[str, Any]], *, source_column: str = "text", vector_column: str = "vector"
    ) -> list[dict[str, Any]]:
        """Copies of ``rows`` with ``vector_column`` set to each ``source_column`` text's multivector."""
        vectors = self.compute_source_embeddings([str(row[source_column]) for row in rows])
        return [{**row, vector_column: np.asarray(vector).tolist()} for row, vector in zip(rows, vectors, strict=True)]
