"""``SIEEmbedder``: an SIE embed model as the callable ``dspy.Embedder`` and ``dspy.retrievers.Embeddings``
take (texts in, one float32 row per text out), and ``SIESparseEmbedder`` for sparse (SPLADE) vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend, SparseDict
from sie_integrations_base._vectorizer import sparse_dict


class SIEEmbedder:
    """``embedder(texts)`` is an ``(n, dims)`` float32 array (one text: ``(dims,)``).

    ``is_query=True`` embeds with the model's query prefix and ``instruction`` (for a model with separate
    query and document roles, keep one embedder per role); ``base_url`` ``None``: ``$SIE_URL``, else
    http://127.0.0.1:8080; ``api_key`` ``None``: ``$SIE_API_KEY``.

    >>> import dspy
    >>> embedder = dspy.Embedder(SIEEmbedder("sentence-transformers/all-MiniLM-L6-v2"), caching=False)
    >>> retriever = dspy.retrievers.Embeddings(corpus=passages, embedder=embedder, k=3)
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        is_query: bool = False,
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
        self.is_query = is_query

    @property
    def model(self) -> str:
        return self.backend.model

    def __call__(self, texts: str | Sequence[str]) -> npt.NDArray[np.float32]:
        single = isinstance(texts, str)
        batch = [texts] if isinstance(texts, str) else list(texts)
        if not batch:
            return np.zeros((0, self.backend.dims()), dtype=np.float32)
        results = self.backend.encode(batch, is_query=self.is_query)
        matrix = np.stack([np.asarray(result["dense"], dtype=np.float32).reshape(-1) for result in results])
        return matrix[0] if single else matrix

    def close(self) -> None:
        self.backend.close()


class SIESparseEmbedder:
    """Sparse vectors ``{"indices": [...], "values": [...]}``: ``embed_documents(texts)``, ``embed_query(text)``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
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
        return [sparse_dict(r) for r in self.backend.encode(texts, output_types=["sparse"])]

    def embed_query(self, text: str) -> SparseDict:
        return sparse_dict(self.backend.encode([text], output_types=["sparse"], is_query=True)[0])

    def close(self) -> None:
        self.backend.close()
