"""Qdrant: SIEVectorizer with a real local Qdrant (":memory:" and on-disk path mode)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from sie_qdrant import SIEVectorizer
from sie_sdk import ModelNotFoundError, SIEClient
from tests.integrations.corpus import CORPUS_TEXTS, EXPECTED_TEXT, QUERY
from tests.integrations.models import MINILM, TINY_BGE_M3, TINY_COLBERT, TINY_SPLADE
from tests.integrations.recording import Recording
from tests.integrations.reopen import run_fresh

TEXTS = CORPUS_TEXTS[:12]  # enough for the random-weight sparse and multivector checks


def _collection(client: QdrantClient, vectorizer: SIEVectorizer, name: str = "docs") -> None:
    client.create_collection(
        name,
        vectors_config=vectorizer.vectors_config(),
        sparse_vectors_config=vectorizer.sparse_vectors_config(),
    )


def _sparse_dot(a: models.SparseVector, b: models.SparseVector) -> float:
    weights = dict(zip(a.indices, a.values, strict=True))
    return sum(weights.get(i, 0.0) * v for i, v in zip(b.indices, b.values, strict=True))


def _maxsim(query: list[list[float]], doc: list[list[float]]) -> float:
    q, d = np.asarray(query), np.asarray(doc)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    return float((q @ d.T).max(axis=1).sum())


def test_dense_search_finds_the_invoice(base_url: str) -> None:
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    assert vectorizer.vectors_config()["dense"].size == 384
    client = QdrantClient(":memory:")
    _collection(client, vectorizer)
    client.upsert("docs", vectorizer.points(CORPUS_TEXTS))
    hits = client.query_points("docs", **vectorizer.query(QUERY, limit=3)).points
    assert hits[0].payload is not None and hits[0].payload["text"] == EXPECTED_TEXT
    # a dense-only "hybrid" query: one prefetch, fused with RRF
    fused = client.query_points("docs", **vectorizer.hybrid_query(QUERY, limit=3)).points
    assert fused[0].payload is not None and fused[0].payload["text"] == EXPECTED_TEXT


def test_points_ids_and_payloads(base_url: str) -> None:
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    points = vectorizer.points(["a", "b"], ids=[1, 2], payloads=[{"n": 1}, {"n": 2}], text_key="body")
    assert [p.id for p in points] == [1, 2]
    assert points[1].payload == {"body": "b", "n": 2}
    assert vectorizer.points(["a"])[0].id == vectorizer.points(["a"])[0].id  # stable ids from the text
    with pytest.raises(ValueError, match="2 ids for 1 texts"):
        vectorizer.points(["a"], ids=[1, 2])


def test_on_disk_collection_reopens_in_a_new_process(base_url: str, tmp_path: Path) -> None:
    path = str(tmp_path / "qdrant")
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    client = QdrantClient(path=path)
    _collection(client, vectorizer)
    client.upsert("docs", vectorizer.points(CORPUS_TEXTS))
    client.close()
    out = run_fresh(
        f"""
        from qdrant_client import QdrantClient
        from sie_qdrant import SIEVectorizer

        vectorizer = SIEVectorizer({MINILM!r})  # base_url from SIE_URL
        client = QdrantClient(path={path!r})
        print(client.query_points("docs", **vectorizer.query({QUERY!r}, limit=1)).points[0].payload["text"])
        """,
        env={"SIE_URL": base_url},
    )
    assert out == EXPECTED_TEXT


def test_sparse_vectors(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_SPLADE)
    vectorizer = SIEVectorizer(MINILM, base_url=base_url, sparse_model=TINY_SPLADE)
    sparse = vectorizer.embed_sparse(TEXTS)
    assert all(isinstance(v, models.SparseVector) for v in sparse)
    assert all(len(set(v.indices)) == len(v.indices) > 0 for v in sparse)
    client = QdrantClient(":memory:")
    _collection(client, vectorizer)
    client.upsert("docs", vectorizer.points(TEXTS))
    query = vectorizer.embed_sparse([TEXTS[2]], is_query=True)[0]
    hits = client.query_points("docs", query=query, using="sparse", limit=len(TEXTS)).points
    # Qdrant's sparse score is the dot product of what SIE gave for the query and each text
    expected = sorted((_sparse_dot(query, doc) for doc in sparse), reverse=True)
    assert [h.score for h in hits if h.score > 0] == pytest.approx([e for e in expected if e > 0], rel=1e-4)


def test_multivector_maxsim(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_COLBERT)
    vectorizer = SIEVectorizer(MINILM, base_url=base_url, multivector_model=TINY_COLBERT)
    config = vectorizer.vectors_config()["colbert"]
    assert config.multivector_config is not None
    assert config.multivector_config.comparator == models.MultiVectorComparator.MAX_SIM
    docs = vectorizer.embed_multivector(TEXTS)
    assert all(len(doc[0]) == config.size for doc in docs)
    client = QdrantClient(":memory:")
    _collection(client, vectorizer)
    client.upsert("docs", vectorizer.points(TEXTS))
    query = vectorizer.embed_multivector([TEXTS[5]], is_query=True)[0]
    hits = client.query_points("docs", query=query, using="colbert", limit=3).points
    expected = sorted((_maxsim(query, doc) for doc in docs), reverse=True)[:3]
    assert [h.score for h in hits] == pytest.approx(expected, rel=1e-4)


def test_named_vectors_and_hybrid_query(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_SPLADE)
    needs_model(TINY_COLBERT)
    vectorizer = SIEVectorizer(MINILM, base_url=base_url, sparse_model=TINY_SPLADE, multivector_model=TINY_COLBERT)
    named = vectorizer.embed_named(TEXTS[:2])
    assert set(named[0]) == {"dense", "sparse", "colbert"}
    assert isinstance(named[0]["sparse"], models.SparseVector) and len(named[0]["dense"]) == 384
    client = QdrantClient(":memory:")
    _collection(client, vectorizer)
    client.upsert("docs", vectorizer.points(CORPUS_TEXTS))

    plain = vectorizer.hybrid_query(QUERY, limit=5, rerank=False)
    assert [p.using for p in plain["prefetch"]] == ["dense", "sparse"]
    assert plain["query"] == models.FusionQuery(fusion=models.Fusion.RRF)
    fused = client.query_points("docs", **plain).points
    assert len(fused) == 5

    reranked = vectorizer.hybrid_query(QUERY, limit=5, prefetch_limit=20)
    assert reranked["using"] == "colbert" and reranked["prefetch"].limit == 20
    hits = client.query_points("docs", **reranked, with_payload=True).points
    assert len(hits) == 5
    # the final order is ColBERT MaxSim over the fused candidates
    query = vectorizer.embed_multivector([QUERY], is_query=True)[0]
    scores = [_maxsim(query, vectorizer.embed_multivector([h.payload["text"]])[0]) for h in hits]  # type: ignore[index]
    assert [h.score for h in hits] == pytest.approx(scores, rel=1e-4)
    assert scores == sorted(scores, reverse=True)


def test_one_model_serving_every_kind_is_asked_once(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_BGE_M3)
    transport = Recording()
    with SIEClient(base_url, transport=transport) as client:
        vectorizer = SIEVectorizer(TINY_BGE_M3, sparse_model=TINY_BGE_M3, multivector_model=TINY_BGE_M3, client=client)
        points = vectorizer.points(TEXTS)
        (body,) = transport.bodies("/v1/encode/")
        assert body["params"]["output_types"] == ["dense", "sparse", "multivector"]
        assert set(points[0].vector) == {"dense", "sparse", "colbert"}  # type: ignore[arg-type]
        qdrant = QdrantClient(":memory:")
        _collection(qdrant, vectorizer)
        qdrant.upsert("docs", points)
        hits = qdrant.query_points("docs", **vectorizer.hybrid_query(TEXTS[0], limit=3)).points
    assert len(hits) == 3


async def test_async_vocabulary(base_url: str) -> None:
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    query = await vectorizer.aembed_query(QUERY)
    np.testing.assert_allclose(query, vectorizer.embed_query(QUERY), atol=1e-6)
    assert [len(v) for v in await vectorizer.aembed_documents(["a", "b"])] == [384, 384]
    assert set((await vectorizer.aembed_named(["a"]))[0]) == {"dense"}


def test_errors(base_url: str) -> None:
    with pytest.raises(ModelNotFoundError):
        SIEVectorizer("no-such/model", base_url=base_url).embed_documents(["x"])
    with pytest.raises(ValueError, match="no multivector model"):
        SIEVectorizer(MINILM, base_url=base_url).embed_multivector(["x"])
