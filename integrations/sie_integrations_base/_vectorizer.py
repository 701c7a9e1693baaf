"""The method vocabulary the vector-store vectorizers (Qdrant, Weaviate) share.

``embed_documents(texts)`` and ``embed_query(text)`` give dense vectors; ``embed_sparse`` and
``embed_multivector`` take ``is_query``; ``embed_named(texts)`` gives every configured named
vector of each text, asking each model once per batch for all the outputs it serves (one
request for dense + sparse + multivector when one model serves all three). Each store's
vectorizer subclasses this and converts to its own types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from sie_sdk import DEFAULT_RETRY, RetryPolicy, SIEAsyncClient, SIEClient
from sie_sdk.types import EncodeResult, Priority

from ._backend import SIEBackend
from ._results import SparseDict, as_floats, multivector_lists, sparse_dict
from ._settings import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S

Output: TypeAlias = Literal["dense", "sparse", "multivector"]


class VectorizerCore:
    """Dense, sparse and multivector embeddings from up to three SIE models.

    ``model`` gives dense vectors; ``sparse_model`` and ``multivector_model`` (default: none)
    give the other kinds. ``names`` maps each kind to its named vector in the store; a kind
    whose model is not set (or whose name is ``None``) is left out of ``embed_named``.
    """

    default_names: Mapping[Output, str] = {"dense": "dense", "sparse": "sparse", "multivector": "colbert"}

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        priority: Priority | None = None,
        instruction: str | None = None,
        sparse_model: str | None = None,
        multivector_model: str | None = None,
        names: Mapping[Output, str | None] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | None = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = DEFAULT_RETRY,
        client: SIEClient | None = None,
        async_client: SIEAsyncClient | None = None,
        api_key: str | None = None,
    ) -> None:
        self.backend = SIEBackend(
            model,
            base_url=base_url,
            priority=priority,
            instruction=instruction,
            batch_size=batch_size,
            timeout=timeout,
            retry=retry,
            client=client,
            async_client=async_client,
            api_key=api_key,
        )
        self.models: dict[Output, str | None] = {
            "dense": model,
            "sparse": sparse_model,
            "multivector": multivector_model,
        }
        chosen = {**self.default_names, **(names or {})}
        self.names: dict[Output, str] = {
            kind: name for kind, name in chosen.items() if name is not None and self.models[kind] is not None
        }

    @property
    def model(self) -> str:
        return self.backend.model

    @property
    def base_url(self) -> str:
        return self.backend.base_url

    def close(self) -> None:
        self.backend.close()

    def _model_for(self, kind: Output) -> str:
        model = self.models[kind]
        if model is None:
            raise ValueError(f"no {kind} model configured: pass {kind}_model= to the vectorizer")
        return model

    # --- dense ---------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self.backend.embed(texts, is_query=False)

    def embed_query(self, text: str) -> list[float]:
        return self.backend.embed([text], is_query=True)[0]

    async def aembed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.backend.aembed(texts, is_query=False)

    async def aembed_query(self, text: str) -> list[float]:
        return (await self.backend.aembed([text], is_query=True))[0]

    # --- sparse and multivector ----------------------------------------------------------

    def sparse_dicts(self, texts: Sequence[str], *, is_query: bool = False) -> list[SparseDict]:
        return self.backend.sparse(texts, is_query=is_query, model=self._model_for("sparse"))

    def multivectors(self, texts: Sequence[str], *, is_query: bool = False) -> list[list[list[float]]]:
        model = self._model_for("multivector")
        results = self.backend.encode(texts, output_types=["multivector"], is_query=is_query, model=model)
        return [multivector_lists(result) for result in results]

    # --- named ---------------------------------------------------------------------------

    def _plan(self) -> dict[str, list[Output]]:
        """Each model and the configured outputs it serves, so each model is asked once."""
        plan: dict[str, list[Output]] = {}
        for kind in self.names:
            plan.setdefault(self._model_for(kind), []).append(kind)
        return plan

    def named_raw(self, texts: Sequence[str], *, is_query: bool = False) -> list[dict[Output, EncodeResult]]:
        """Per text, each configured kind's raw SDK result."""
        rows: list[dict[Output, EncodeResult]] = [{} for _ in texts]
        for model, kinds in self._plan().items():
            results = self.backend.encode(texts, output_types=kinds, is_query=is_query, model=model)
            for row, result in zip(rows, results, strict=True):
                for kind in kinds:
                    row[kind] = result
        return rows

    async def anamed_raw(self, texts: Sequence[str], *, is_query: bool = False) -> list[dict[Output, EncodeResult]]:
        rows: list[dict[Output, EncodeResult]] = [{} for _ in texts]
        for model, kinds in self._plan().items():
            results = await self.backend.aencode(texts, output_types=kinds, is_query=is_query, model=model)
            for row, result in zip(rows, results, strict=True):
                for kind in kinds:
                    row[kind] = result
        return rows

    def plain_named(self, row: Mapping[Output, EncodeResult]) -> dict[str, Any]:
        """One text's named vectors as plain lists (sparse as ``SparseDict``)."""
        named: dict[str, Any] = {}
        for kind, result in row.items():
            if kind == "dense":
                named[self.names[kind]] = as_floats(result["dense"])
            elif kind == "sparse":
                named[self.names[kind]] = sparse_dict(result)
            else:
                named[self.names[kind]] = multivector_lists(result)
        return named
