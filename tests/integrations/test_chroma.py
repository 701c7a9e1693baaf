"""Chroma: SIEEmbeddingFunction in real local clients, and a collection reopened in a new process."""

from __future__ import annotations

from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from sie_chroma import SIEEmbeddingFunction
from sie_sdk import ModelNotFoundError
from tests.integrations.corpus import CORPUS_IDS, CORPUS_TEXTS, EXPECTED_ID, QUERY
from tests.integrations.models import MINILM, TINY_EMBEDDER
from tests.integrations.reopen import run_fresh

NO_TELEMETRY = Settings(anonymized_telemetry=False)


def _fill(collection: chromadb.Collection) -> None:
    collection.add(ids=CORPUS_IDS, documents=CORPUS_TEXTS)


def test_ephemeral_collection_finds_the_invoice(base_url: str) -> None:
    client = chromadb.EphemeralClient(settings=NO_TELEMETRY)
    function = SIEEmbeddingFunction(model=MINILM, base_url=base_url)
    collection = client.create_collection("invoices-ephemeral", embedding_function=function)
    _fill(collection)
    hits = collection.query(query_texts=[QUERY], n_results=3)
    assert hits["ids"][0][0] == EXPECTED_ID
    assert collection.configuration["hnsw"]["space"] == "cosine"  # the function's default space


def test_function_contract(base_url: str) -> None:
    function = SIEEmbeddingFunction(model="test/tiny-cls", base_url=base_url, instruction="Find")
    assert function.name() == "sie" and function.default_space() == "cosine"
    assert not function.is_legacy()
    config = function.get_config()
    assert config["model"] == "test/tiny-cls" and config["instruction"] == "Find"
    rebuilt = SIEEmbeddingFunction.build_from_config(config)
    assert rebuilt.get_config() == config
    documents = function(["hello", "world"])
    assert len(documents) == 2 and np.asarray(documents[0]).dtype == np.float32
    query = function.embed_query(["hello"])
    assert not np.allclose(documents[0], query[0])  # query prefix and instruction differ
    with pytest.raises(ValueError, match="cannot change"):
        function.validate_config_update(config, {**config, "model": "other"})
    with pytest.raises(ValueError, match="model id"):
        SIEEmbeddingFunction.build_from_config({"base_url": base_url})


def test_many_documents_are_batched(base_url: str) -> None:
    client = chromadb.EphemeralClient(settings=NO_TELEMETRY)
    collection = client.create_collection(
        "many", embedding_function=SIEEmbeddingFunction(model=TINY_EMBEDDER, base_url=base_url, batch_size=32)
    )
    collection.add(ids=[str(i) for i in range(150)], documents=[f"text {i}" for i in range(150)])
    assert collection.count() == 150


def test_errors_pass_through_typed(base_url: str) -> None:
    function = SIEEmbeddingFunction(model="no-such/model", base_url=base_url)
    with pytest.raises(ModelNotFoundError):
        function(["hello"])


def test_persistent_collection_reopens_in_a_new_process(base_url: str, tmp_path: Path) -> None:
    path = str(tmp_path / "chroma")
    client = chromadb.PersistentClient(path=path, settings=NO_TELEMETRY)
    collection = client.create_collection(
        "invoices", embedding_function=SIEEmbeddingFunction(model=MINILM, base_url=base_url)
    )
    _fill(collection)
    del collection, client

    out = run_fresh(
        f"""
        import chromadb
        from chromadb.config import Settings
        import sie_chroma  # registers "sie"; no function is passed below

        client = chromadb.PersistentClient(path={path!r}, settings=Settings(anonymized_telemetry=False))
        collection = client.get_collection("invoices")
        function = collection.configuration["embedding_function"]
        print(type(function).__name__, function.get_config()["model"])
        collection.add(ids=["late"], documents=["Acme Corp's late fee is 2% per month on unpaid invoices."])
        print(collection.query(query_texts=[{QUERY!r}], n_results=1)["ids"][0][0])
        print(collection.count())
        """
    )
    assert out.splitlines() == [f"SIEEmbeddingFunction {MINILM}", EXPECTED_ID, str(len(CORPUS_IDS) + 1)]
