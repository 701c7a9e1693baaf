"""Weaviate: the real weaviate-client v4 against a loopback fake of Weaviate's REST + gRPC API.

A live test against a real Weaviate runs only when ``WEAVIATE_URL`` is set (e.g.
``WEAVIATE_URL=http://127.0.0.1:8080 WEAVIATE_GRPC_PORT=50051``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from urllib.parse import urlparse

import numpy as np
import pytest
import weaviate
from weaviate.classes.config import DataType, Property
from weaviate.classes.query import MetadataQuery
from weaviate.exceptions import WeaviateInsertManyAllFailedError

from sie_sdk import ModelNotFoundError
from sie_weaviate import SIEVectorizer
from tests.integrations.corpus import CORPUS_TEXTS, EXPECTED_TEXT, QUERY
from tests.integrations.models import MINILM, TINY_COLBERT, TINY_EMBEDDER
from tests.integrations.weaviate_fake import FakeWeaviateServer


@pytest.fixture
def fake() -> Iterator[FakeWeaviateServer]:
    with FakeWeaviateServer() as server:
        yield server


@pytest.fixture
def client(fake: FakeWeaviateServer) -> Iterator[weaviate.WeaviateClient]:
    # skip_init_checks: the client's start-up check would otherwise ask pypi.org for its latest version.
    with weaviate.connect_to_local(
        host="127.0.0.1", port=fake.http_port, grpc_port=fake.grpc_port, skip_init_checks=True
    ) as connected:
        yield connected


def _create(client: weaviate.WeaviateClient, vectorizer: SIEVectorizer, name: str = "Docs"):
    return client.collections.create(
        name,
        properties=[Property(name="text", data_type=DataType.TEXT)],
        vector_config=vectorizer.vector_config(),
    )


def test_schema_names_self_provided_vectors(
    client: weaviate.WeaviateClient, fake: FakeWeaviateServer, base_url: str
) -> None:
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    _create(client, vectorizer)
    schema = fake.state.collections["Docs"].schema
    assert schema["vectorConfig"]["dense"]["vectorizer"] == {"none": {}}
    assert fake.state.collections["Docs"].multivector == {"dense": False}


def test_insert_and_near_vector_find_the_invoice(
    client: weaviate.WeaviateClient, fake: FakeWeaviateServer, base_url: str
) -> None:
    vectorizer = SIEVectorizer(MINILM, base_url=base_url, batch_size=16)
    docs = _create(client, vectorizer)
    ids = vectorizer.insert(docs, CORPUS_TEXTS)
    assert len(ids) == len(CORPUS_TEXTS)
    stored = fake.state.collections["Docs"]
    assert len(stored.objects) == len(CORPUS_TEXTS)
    assert stored.dims == {"dense": 384}
    # 55 texts in batches of 16: four gRPC batch calls
    assert fake.state.calls.count("grpc BatchObjects") == 4

    hits = vectorizer.near_vector(docs, QUERY, limit=3)
    assert hits.objects[0].properties["text"] == EXPECTED_TEXT
    distances = [hit.metadata.distance for hit in hits.objects]
    assert distances == sorted(distances)

    # the stored vector is the document embedding the server gives
    row = stored.objects[ids[0]]["vectors"]["dense"]
    np.testing.assert_allclose(row, vectorizer.embed_documents([CORPUS_TEXTS[0]])[0], atol=1e-5)


def test_reinserting_a_text_replaces_it(
    client: weaviate.WeaviateClient, fake: FakeWeaviateServer, base_url: str
) -> None:
    vectorizer = SIEVectorizer(TINY_EMBEDDER, base_url=base_url)
    docs = _create(client, vectorizer)
    first = vectorizer.insert(docs, ["alpha", "beta"], properties=[{"n": 1}, {"n": 2}])
    second = vectorizer.insert(docs, ["alpha"])
    assert first[0] == second[0] == str(uuid.uuid5(uuid.NAMESPACE_URL, "alpha"))
    assert len(fake.state.collections["Docs"].objects) == 2


def test_refused_objects_raise(client: weaviate.WeaviateClient, fake: FakeWeaviateServer, base_url: str) -> None:
    vectorizer = SIEVectorizer(TINY_EMBEDDER, base_url=base_url)
    docs = _create(client, vectorizer)
    fake.state.refuse.add(str(uuid.uuid5(uuid.NAMESPACE_URL, "beta")))
    with pytest.raises(RuntimeError, match=r"refused 1 of 3 objects: \{1: "):
        vectorizer.insert(docs, ["alpha", "beta", "gamma"])
    # a vector name the collection lacks: every object fails, and Weaviate's own error says so
    wrong_name = SIEVectorizer(TINY_EMBEDDER, base_url=base_url, names={"dense": "other"})
    with pytest.raises(WeaviateInsertManyAllFailedError, match="'other' is not configured"):
        wrong_name.insert(docs, ["delta"])


def test_vocabulary_and_errors(base_url: str) -> None:
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    assert len(vectorizer.embed_query("hello")) == 384
    assert [len(v) for v in vectorizer.embed_documents(["a", "b"])] == [384, 384]
    assert list(vectorizer.embed_named(["a"])[0]) == ["dense"]
    with pytest.raises(ValueError, match="no sparse model"):
        vectorizer.embed_sparse(["a"])
    with pytest.raises(ModelNotFoundError):
        SIEVectorizer("no-such/model", base_url=base_url).embed_query("hello")


def test_multivector_colbert(
    client: weaviate.WeaviateClient, fake: FakeWeaviateServer, base_url: str, needs_model: Callable[[str], None]
) -> None:
    needs_model(TINY_COLBERT)
    vectorizer = SIEVectorizer(MINILM, base_url=base_url, multivector_model=TINY_COLBERT)
    docs = _create(client, vectorizer)
    assert fake.state.collections["Docs"].multivector == {"dense": False, "colbert": True}
    texts = CORPUS_TEXTS[:8]
    vectorizer.insert(docs, texts)
    stored = next(iter(fake.state.collections["Docs"].objects.values()))["vectors"]
    assert stored["colbert"].ndim == 2
    hits = vectorizer.near_vector(docs, texts[3], target="colbert", limit=2)
    assert hits.objects[0].properties["text"] == texts[3]


@pytest.mark.enable_socket
def test_live_weaviate(base_url: str) -> None:
    """The same flow against a real Weaviate, when ``WEAVIATE_URL`` names one."""
    url = os.environ.get("WEAVIATE_URL")
    if not url:
        pytest.skip("set WEAVIATE_URL (and WEAVIATE_GRPC_PORT, default 50051) to run against a real Weaviate")
    parsed = urlparse(url)
    vectorizer = SIEVectorizer(MINILM, base_url=base_url)
    name = f"SieTest{uuid.uuid4().hex[:8]}"
    with weaviate.connect_to_custom(
        http_host=parsed.hostname or "127.0.0.1",
        http_port=parsed.port or 8080,
        http_secure=parsed.scheme == "https",
        grpc_host=parsed.hostname or "127.0.0.1",
        grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
        grpc_secure=parsed.scheme == "https",
        skip_init_checks=True,
    ) as client:
        docs = _create(client, vectorizer, name)
        try:
            vectorizer.insert(docs, CORPUS_TEXTS)
            hits = vectorizer.near_vector(docs, QUERY, limit=1, return_metadata=MetadataQuery(distance=True))
            assert hits.objects[0].properties["text"] == EXPECTED_TEXT
        finally:
            client.collections.delete(name)
