"""LanceDB: the "sie" and "sie-multivector" embedding functions and SIEReranker, in a temp folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
import pytest
from lancedb.embeddings import get_registry
from lancedb.pydantic import LanceModel, MultiVector, Vector

from sie_lancedb import SIEEmbeddingFunction, SIEMultivectorEmbeddingFunction, SIEReranker
from sie_sdk import ModelNotFoundError
from tests.integrations.corpus import CORPUS, EXPECTED_ID, EXPECTED_TEXT, QUERY
from tests.integrations.models import MINILM, TINY_COLBERT, TINY_EMBEDDER, TINY_RERANKER
from tests.integrations.reopen import run_fresh

ROWS = [{"key": key, "text": text} for key, text in CORPUS.items()]


def _table(db: Any, function: Any, name: str = "docs") -> Any:
    class Doc(LanceModel):
        key: str
        text: str = function.SourceField()
        vector: Vector(function.ndims()) = function.VectorField()  # type: ignore[valid-type]

    table = db.create_table(name, schema=Doc)
    table.add(ROWS)
    return table


def test_registered_function_finds_the_invoice(base_url: str, tmp_path: Path) -> None:
    function = get_registry().get("sie").create(model=MINILM, base_url=base_url)
    assert isinstance(function, SIEEmbeddingFunction) and function.ndims() == 384
    table = _table(lancedb.connect(tmp_path), function)
    hits = table.search(QUERY).limit(3).to_list()
    assert hits[0]["key"] == EXPECTED_ID
    assert len(hits[0]["vector"]) == 384


def test_query_embeddings_use_the_query_role(base_url: str) -> None:
    function = get_registry().get("sie").create(model="test/tiny-cls", base_url=base_url)
    query = function.compute_query_embeddings("hello")[0]
    source = function.compute_source_embeddings(["hello"])[0]
    assert not np.allclose(query, source)  # "query: hello" vs "passage: hello"
    np.testing.assert_allclose(function.compute_source_embeddings(pa.array(["hello"]))[0], source, atol=1e-6)


def test_errors_are_not_wrapped_by_lancedb_retries(base_url: str, tmp_path: Path) -> None:
    function = get_registry().get("sie").create(model="no-such/model", base_url=base_url)
    with pytest.raises(ModelNotFoundError):
        function.compute_source_embeddings_with_retry(["x"])
    with pytest.raises(ModelNotFoundError):
        function.compute_query_embeddings_with_retry("x")


def test_table_reopens_in_a_new_process(base_url: str, tmp_path: Path) -> None:
    function = get_registry().get("sie").create(model=MINILM, base_url=base_url)
    _table(lancedb.connect(tmp_path), function)
    out = run_fresh(
        f"""
        import lancedb
        import sie_lancedb  # registers "sie"; no function is passed below

        table = lancedb.connect({str(tmp_path)!r}).open_table("docs")
        table.add([{{"key": "late", "text": "Acme Corp charges a late fee of 2% per month."}}])
        print(table.search({QUERY!r}).limit(1).to_list()[0]["key"])
        print(table.count_rows())
        """
    )
    assert out.splitlines() == [EXPECTED_ID, str(len(ROWS) + 1)]


def test_reranker_on_vector_fts_and_hybrid_results(base_url: str, tmp_path: Path) -> None:
    function = get_registry().get("sie").create(model=MINILM, base_url=base_url)
    table = _table(lancedb.connect(tmp_path), function)
    reranker = SIEReranker(MINILM, base_url=base_url)  # MiniLM scores as a bi-encoder

    vector = table.search(QUERY).rerank(reranker=reranker).limit(5).to_arrow()
    assert "_relevance_score" in vector.column_names and "_distance" not in vector.column_names
    scores = vector["_relevance_score"].to_pylist()
    assert scores == sorted(scores, reverse=True)
    assert vector["key"][0].as_py() == EXPECTED_ID

    table.create_fts_index("text")
    fts = table.search(QUERY, query_type="fts").rerank(reranker=reranker).limit(5).to_list()
    assert fts[0]["key"] == EXPECTED_ID and "_score" not in fts[0]

    hybrid = table.search(QUERY, query_type="hybrid").rerank(reranker=reranker).limit(5).to_list()
    assert hybrid[0]["key"] == EXPECTED_ID
    assert [row["_relevance_score"] for row in hybrid] == sorted(
        (row["_relevance_score"] for row in hybrid), reverse=True
    )

    keep_all = SIEReranker(TINY_RERANKER, base_url=base_url, return_score="all")
    kept = table.search(QUERY).rerank(reranker=keep_all).limit(5).to_arrow()
    assert {"_distance", "_relevance_score"} <= set(kept.column_names)
    empty = reranker.rerank_vector(
        QUERY, pa.table({"text": pa.array([], pa.string()), "_distance": pa.array([], pa.float32())})
    )
    assert len(empty) == 0


def test_many_rows_are_batched(base_url: str, tmp_path: Path) -> None:
    function = get_registry().get("sie").create(model=TINY_EMBEDDER, base_url=base_url, batch_size=50)

    class Doc(LanceModel):
        text: str = function.SourceField()
        vector: Vector(function.ndims()) = function.VectorField()  # type: ignore[valid-type]

    table = lancedb.connect(tmp_path).create_table("many", schema=Doc)
    table.add([{"text": f"text {i}"} for i in range(150)])
    assert table.count_rows() == 150


def test_multivector_function(base_url: str, tmp_path: Path, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_COLBERT)
    function = get_registry().get("sie-multivector").create(model=TINY_COLBERT, base_url=base_url)
    assert isinstance(function, SIEMultivectorEmbeddingFunction)
    dim = function.ndims()

    class Doc(LanceModel):
        key: str
        text: str = function.SourceField()
        vector: MultiVector(dim) = function.VectorField()  # type: ignore[valid-type]

    db = lancedb.connect(tmp_path)
    table = db.create_table("colbert", schema=Doc)
    # LanceDB's ingestion checks len(vector) == ndims, which a multivector never meets, so
    # rows are added with their vectors; searching by text goes through the function.
    table.add(function.with_vectors(ROWS[:10]))
    stored = table.to_arrow()["vector"][0].as_py()
    assert len(stored[0]) == dim and len(stored) > 1
    query = function.compute_query_embeddings(ROWS[4]["text"])[0]
    assert query.ndim == 2 and query.shape[1] == dim
    hits = table.search(ROWS[4]["text"]).metric("cosine").limit(3).to_list()
    assert len(hits) == 3
    out = run_fresh(
        f"""
        import lancedb
        import sie_lancedb

        table = lancedb.connect({str(tmp_path)!r}).open_table("colbert")
        print(len(table.search({ROWS[4]["text"]!r}).metric("cosine").limit(2).to_list()))
        """
    )
    assert out == "2"


def test_invoice_text_is_in_the_corpus() -> None:
    assert CORPUS[EXPECTED_ID] == EXPECTED_TEXT
