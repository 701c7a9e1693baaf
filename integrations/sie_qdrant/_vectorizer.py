"""``SIEVectorizer`` for Qdrant: dense, sparse and multivector (ColBERT) named vectors."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_client import models

from sie_integrations_base import SparseDict, VectorizerCore

# Prefetch depth per branch of a hybrid query, as a multiple of the final limit.
PREFETCH_FACTOR = 5


def _sparse(vector: SparseDict) -> models.SparseVector:
    return models.SparseVector(indices=vector["indices"], values=vector["values"])


class SIEVectorizer(VectorizerCore):
    """Embeds texts with SIE for Qdrant.

    ``model`` gives dense vectors (named ``"dense"``), ``sparse_model`` a SPLADE-style model
    (``"sparse"``), ``multivector_model`` a ColBERT-style model (``"colbert"``, compared with
    MAX_SIM); rename them with ``names={"dense": ..., "sparse": ..., "multivector": ...}``.
    Queries are encoded with ``is_query=True`` (the model's query prefix, or ``instruction``).
    """

    # --- the shared vocabulary -----------------------------------------------------------

    def embed_sparse(self, texts: Sequence[str], is_query: bool = False) -> list[models.SparseVector]:
        return [_sparse(vector) for vector in self.sparse_dicts(texts, is_query=is_query)]

    def embed_multivector(self, texts: Sequence[str], is_query: bool = False) -> list[list[list[float]]]:
        return self.multivectors(texts, is_query=is_query)

    def embed_named(self, texts: Sequence[str], is_query: bool = False) -> list[dict[str, Any]]:
        """Per text, ``{name: vector}`` for every configured kind: a point's ``vector=``."""
        return [self._qdrant_named(row) for row in self.named_raw(texts, is_query=is_query)]

    async def aembed_named(self, texts: Sequence[str], is_query: bool = False) -> list[dict[str, Any]]:
        return [self._qdrant_named(row) for row in await self.anamed_raw(texts, is_query=is_query)]

    def _qdrant_named(self, row: Mapping[Any, Any]) -> dict[str, Any]:
        named = self.plain_named(row)
        sparse_name = self.names.get("sparse")
        if sparse_name is not None:
            named[sparse_name] = _sparse(named[sparse_name])
        return named

    # --- collections and points ----------------------------------------------------------

    def vectors_config(self, distance: models.Distance = models.Distance.COSINE) -> dict[str, models.VectorParams]:
        """Dense and multivector parameters for ``create_collection(vectors_config=...)``."""
        config: dict[str, models.VectorParams] = {}
        if "dense" in self.names:
            config[self.names["dense"]] = models.VectorParams(
                size=self.backend.dims("dense", model=self._model_for("dense")), distance=distance
            )
        if "multivector" in self.names:
            config[self.names["multivector"]] = models.VectorParams(
                size=self.backend.dims("multivector", model=self._model_for("multivector")),
                distance=distance,
                multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
            )
        return config

    def sparse_vectors_config(self) -> dict[str, models.SparseVectorParams]:
        """Sparse parameters for ``create_collection(sparse_vectors_config=...)``."""
        if "sparse" not in self.names:
            return {}
        return {self.names["sparse"]: models.SparseVectorParams()}

    def points(
        self,
        texts: Sequence[str],
        *,
        ids: Sequence[int | str] | None = None,
        payloads: Sequence[dict[str, Any]] | None = None,
        text_key: str = "text",
    ) -> list[models.PointStruct]:
        """Points with every named vector; the payload keeps the text under ``text_key``.

        ``ids`` default to UUIDs derived from the text, so re-adding a text overwrites it.
        """
        if ids is not None and len(ids) != len(texts):
            raise ValueError(f"{len(ids)} ids for {len(texts)} texts")
        if payloads is not None and len(payloads) != len(texts):
            raise ValueError(f"{len(payloads)} payloads for {len(texts)} texts")
        vectors = self.embed_named(texts)
        points = []
        for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
            point_id = ids[i] if ids is not None else str(uuid.uuid5(uuid.NAMESPACE_URL, text))
            payload = {text_key: text, **(payloads[i] if payloads is not None else {})}
            points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
        return points

    # --- queries -------------------------------------------------------------------------

    def query(self, text: str, *, using: str | None = None, limit: int = 10) -> dict[str, Any]:
        """``query_points`` arguments for a plain search on one named vector (default: dense)."""
        name = using or self.names.get("dense") or next(iter(self.names.values()))
        kind = next(kind for kind, named in self.names.items() if named == name)
        if kind == "dense":
            vector: Any = self.embed_query(text)
        elif kind == "sparse":
            vector = self.embed_sparse([text], is_query=True)[0]
        else:
            vector = self.embed_multivector([text], is_query=True)[0]
        return {"query": vector, "using": name, "limit": limit}

    def hybrid_query(
        self, text: str, *, limit: int = 10, prefetch_limit: int | None = None, rerank: bool = True
    ) -> dict[str, Any]:
        """``query_points`` arguments for hybrid search.

        Dense and sparse prefetches fused with RRF; when a multivector model is configured and
        ``rerank`` is true, the fused candidates are then reranked by ColBERT MAX_SIM.
        The query text is encoded once per model (all its outputs in one request).
        """
        depth = prefetch_limit or limit * PREFETCH_FACTOR
        row = self.embed_named([text], is_query=True)[0]
        branches = [
            models.Prefetch(query=row[self.names[kind]], using=self.names[kind], limit=depth)
            for kind in ("dense", "sparse")
            if kind in self.names
        ]
        if not branches:
            raise ValueError("a hybrid query needs a dense or a sparse model")
        fusion = models.FusionQuery(fusion=models.Fusion.RRF)
        if rerank and "multivector" in self.names:
            name = self.names["multivector"]
            fused = models.Prefetch(prefetch=branches, query=fusion, limit=depth)
            return {"prefetch": fused, "query": row[name], "using": name, "limit": limit}
        return {"prefetch": branches, "query": fusion, "limit": limit}
