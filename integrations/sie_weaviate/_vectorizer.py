"""``SIEVectorizer`` for Weaviate: vectors for ``self_provided`` named vectors and multivectors."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from weaviate.classes.config import Configure
from weaviate.classes.data import DataObject
from weaviate.classes.query import MetadataQuery
from weaviate.collections import Collection
from weaviate.collections.classes.internal import QueryReturn

from sie_integrations_base import SparseDict, VectorizerCore, chunked


class SIEVectorizer(VectorizerCore):
    """Embeds texts with SIE for Weaviate collections whose vectors are self-provided.

    ``model`` fills the dense named vector ``"dense"``; ``multivector_model`` (a ColBERT-style
    model) fills the multivector ``"colbert"``; rename them with
    ``names={"dense": ..., "multivector": ...}``. ``sparse_model`` serves ``embed_sparse``
    only: Weaviate stores no user-provided sparse vectors (its keyword search is BM25).
    """

    @property
    def stored(self) -> dict[str, str]:
        """The kinds Weaviate stores (dense, multivector) and their vector names."""
        return {kind: name for kind, name in self.names.items() if kind != "sparse"}

    # --- the shared vocabulary -----------------------------------------------------------

    def embed_sparse(self, texts: Sequence[str], is_query: bool = False) -> list[SparseDict]:
        return self.sparse_dicts(texts, is_query=is_query)

    def embed_multivector(self, texts: Sequence[str], is_query: bool = False) -> list[list[list[float]]]:
        return self.multivectors(texts, is_query=is_query)

    def embed_named(self, texts: Sequence[str], is_query: bool = False) -> list[dict[str, Any]]:
        """Per text, ``{name: vector}`` for the dense and multivector kinds: a ``DataObject``'s ``vector=``."""
        return [self._stored(row) for row in self.named_raw(texts, is_query=is_query)]

    async def aembed_named(self, texts: Sequence[str], is_query: bool = False) -> list[dict[str, Any]]:
        return [self._stored(row) for row in await self.anamed_raw(texts, is_query=is_query)]

    def _stored(self, row: Mapping[Any, Any]) -> dict[str, Any]:
        return self.plain_named({kind: result for kind, result in row.items() if kind in self.stored})

    # --- collections and objects ---------------------------------------------------------

    def vector_config(self) -> list[Any]:
        """``vector_config=`` for ``collections.create``: one self-provided vector per kind.

        (The items are weaviate's ``VectorConfigCreate``, a name that older clients do not export.)
        """
        config: list[Any] = []
        if "dense" in self.stored:
            config.append(Configure.Vectors.self_provided(name=self.stored["dense"]))
        if "multivector" in self.stored:
            config.append(Configure.MultiVectors.self_provided(name=self.stored["multivector"]))
        return config

    def insert(
        self,
        collection: Collection[Any, Any],
        texts: Sequence[str],
        *,
        properties: Sequence[dict[str, Any]] | None = None,
        uuids: Sequence[str] | None = None,
        text_property: str = "text",
        batch_size: int | None = None,
    ) -> list[str]:
        """Embed and insert ``texts`` (under ``text_property``), ``batch_size`` objects per call.

        UUIDs default to ones derived from the text, so re-inserting a text replaces it.
        Raises ``RuntimeError`` naming the failed objects if the server refuses any.
        """
        if properties is not None and len(properties) != len(texts):
            raise ValueError(f"{len(properties)} property dicts for {len(texts)} texts")
        if uuids is not None and len(uuids) != len(texts):
            raise ValueError(f"{len(uuids)} uuids for {len(texts)} texts")
        ids = [str(u) for u in uuids] if uuids is not None else [str(uuid.uuid5(uuid.NAMESPACE_URL, t)) for t in texts]
        rows = list(range(len(texts)))
        for batch in chunked(rows, batch_size or self.backend.batch_size):
            vectors = self.embed_named([texts[i] for i in batch])
            objects = [
                DataObject(
                    properties={text_property: texts[i], **(properties[i] if properties is not None else {})},
                    uuid=ids[i],
                    vector=vector,
                )
                for i, vector in zip(batch, vectors, strict=True)
            ]
            result = collection.data.insert_many(objects)
            if result.has_errors:
                failed = {batch[i]: error.message for i, error in result.errors.items()}
                raise RuntimeError(f"Weaviate refused {len(failed)} of {len(batch)} objects: {failed}")
        return ids

    # --- queries -------------------------------------------------------------------------

    def query_vector(self, text: str, *, target: str | None = None) -> tuple[Any, str]:
        """(vector, target vector name) for a query text: dense by default."""
        name = target or self.stored.get("dense") or next(iter(self.stored.values()))
        kind = next((kind for kind, stored in self.stored.items() if stored == name), None)
        if kind == "dense":
            return self.embed_query(text), name
        if kind == "multivector":
            return self.embed_multivector([text], is_query=True)[0], name
        raise ValueError(f"{name!r} is not one of this vectorizer's vectors: {sorted(self.stored.values())}")

    def near_vector(
        self,
        collection: Collection[Any, Any],
        text: str,
        *,
        target: str | None = None,
        limit: int = 10,
        **kwargs: Any,
    ) -> QueryReturn[Any, Any]:
        """``collection.query.near_vector`` with the query text's vector (distances returned)."""
        vector, name = self.query_vector(text, target=target)
        kwargs.setdefault("return_metadata", MetadataQuery(distance=True))
        hits = collection.query.near_vector(near_vector=vector, target_vector=name, limit=limit, **kwargs)
        return cast(QueryReturn[Any, Any], hits)
