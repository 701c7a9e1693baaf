"""``SIEEmbedder``: an SIE embed model as the callable ``dspy.Embedder`` and ``dspy.retrievers.Embeddings``
take (texts in, one float32 row per text out), and ``SIESparseEmbedder`` for sparse (SPLADE) vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

import numpy as np
import numpy.typing as npt

from sie_integrations_base import BackendOptions, SIEBackend, SparseEmbedder


class SIEEmbedder:
    """``embedder(texts)`` is an ``(n, dims)`` float32 array (one text: ``(dims,)``).

    ``is_query=True`` embeds with the model's query prefix and ``instruction`` (for a model with separate
    query and document roles, keep one embedder per role). ``options``: ``base_url`` (``None``: ``$SIE_URL``,
    else http://127.0.0.1:8080), ``priority``, ``instruction``, ``batch_size``, ``timeout``, ``api_key``
    (``None``: ``$SIE_API_KEY``), as ``sie_integrations_base.BackendOptions`` describes them.

    >>> import dspy
    >>> embedder = dspy.Embedder(SIEEmbedder("sentence-transformers/all-MiniLM-L6-v2"), caching=False)
    >>> retriever = dspy.retrievers.Embeddings(corpus=passages, embedder=embedder, k=3)
    """

    def __init__(self, model: str, *, is_query: bool = False, **options: Unpack[BackendOptions]) -> None:
        self.backend = SIEBackend(model, **options)
        self.is_query = is_query

    @property
    def model(self) -> str:
        return self.backend.model

    def __call__(self, texts: str | Sequence[str]) -> npt.NDArray[np.float32]:
        single = isinstance(texts, str)
        batch = [texts] if isinstance(texts, str) else list(texts)
        if not batch:
            return np.zeros((0, self.backend.dims()), dtype=np.float32)
        matrix = np.stack([vector.reshape(-1) for vector in self.backend.arrays(batch, is_query=self.is_query)])
        return matrix[0] if single else matrix

    def close(self) -> None:
        self.backend.close()


class SIESparseEmbedder(SparseEmbedder):
    """Sparse vectors ``{"indices": [...], "values": [...]}``: ``embed_documents(texts)``, ``embed_query(text)``;
    ``SIESparseEmbedder(model, **options)`` with ``SIEEmbedder``'s options."""
