"""``SparseEmbedder``: the sparse (SPLADE) embedder that adapters without a sparse type of their own hand out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from ._backend import SIEBackend
from ._results import SparseDict
from ._settings import BackendOptions


class SparseEmbedder:
    """Sparse vectors ``{"indices": [...], "values": [...]}``: ``embed_documents(texts)``, ``embed_query(text)``
    (the model's query prefix, or ``instruction``). ``options``: ``BackendOptions``."""

    def __init__(self, model: str, **options: Unpack[BackendOptions]) -> None:
        self.backend = SIEBackend(model, **options)

    @property
    def model(self) -> str:
        return self.backend.model

    def embed_documents(self, texts: Sequence[str]) -> list[SparseDict]:
        return self.backend.sparse(texts)

    def embed_query(self, text: str) -> SparseDict:
        return self.backend.sparse([text], is_query=True)[0]

    def close(self) -> None:
        self.backend.close()
