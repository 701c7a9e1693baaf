"""The shared base every adapter uses: URL resolution, batching, roles, scores, errors, clients."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import numpy as np
import pytest

from sie_integrations_base import SIEBackend, VectorizerCore, chunked, model_served, resolve_base_url
from sie_sdk import InvalidInputError, ModelNotFoundError, SIEAsyncClient, SIEClient, SIEConnectionError
from tests.helpers.server import free_port
from tests.integrations.models import MINILM, TINY_COLBERT, TINY_EMBEDDER, TINY_LLM, TINY_RERANKER, TINY_SPLADE
from tests.integrations.recording import AsyncRecording, Recording

TINY_CLS = "test/tiny-cls"  # query prefix "query: ", document prefix "passage: "
TEXTS = [f"text number {i} about topic {i % 7}" for i in range(150)]


def test_base_url_from_argument_env_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIE_URL", raising=False)
    assert resolve_base_url() == "http://127.0.0.1:8080"
    monkeypatch.setenv("SIE_URL", "http://127.0.0.1:9999/")
    assert resolve_base_url() == "http://127.0.0.1:9999"
    assert resolve_base_url("http://127.0.0.1:7/") == "http://127.0.0.1:7"
    backend = SIEBackend("m")
    assert backend.base_url == "http://127.0.0.1:9999"  # read at call time
    monkeypatch.setenv("SIE_URL", "http://127.0.0.1:1")
    assert backend.base_url == "http://127.0.0.1:1"


def test_settings_are_checked() -> None:
    assert [len(c) for c in chunked(list(range(10)), 4)] == [4, 4, 2]
    with pytest.raises(ValueError, match="model"):
        SIEBackend("")
    with pytest.raises(ValueError, match="batch_size"):
        SIEBackend("m", batch_size=0)
    with pytest.raises(ValueError, match="priority"):
        SIEBackend("m", priority="urgent")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of texts"):
        SIEBackend("m").encode("one string")


def test_encode_batches_in_order_with_priority(base_url: str) -> None:
    transport = Recording()
    with SIEClient(base_url, transport=transport, priority="batch") as client:
        backend = SIEBackend(TINY_EMBEDDER, batch_size=64, client=client)
        vectors = backend.embed(TEXTS)
    bodies = transport.bodies("/v1/encode/")
    assert [len(b["items"]) for b in bodies] == [64, 64, 22]
    assert all(r.headers["X-SIE-Priority"] == "batch" for r in transport.requests)
    assert len(vectors) == 150 and all(isinstance(x, float) for x in vectors[0])
    # order survives batching: the last text alone gives the same vector
    alone = SIEBackend(TINY_EMBEDDER, base_url=base_url).embed([TEXTS[-1]])[0]
    np.testing.assert_allclose(vectors[-1], alone, atol=1e-6)


async def test_async_encode_batches_in_order(base_url: str) -> None:
    transport = AsyncRecording()
    async with SIEAsyncClient(base_url, transport=transport) as client:
        backend = SIEBackend(TINY_EMBEDDER, batch_size=50, async_client=client)
        vectors = await backend.aembed(TEXTS)
    assert sorted(len(b["items"]) for b in transport.bodies("/v1/encode/")) == [50, 50, 50]
    sync = SIEBackend(TINY_EMBEDDER, base_url=base_url).embed(TEXTS)
    np.testing.assert_allclose(np.array(vectors), np.array(sync), atol=1e-6)


def test_query_and_document_roles_and_instruction(base_url: str) -> None:
    plain = SIEBackend(TINY_CLS, base_url=base_url)
    instructed = SIEBackend(TINY_CLS, base_url=base_url, instruction="Find the invoice")
    doc = plain.embed(["hello"])[0]
    query = plain.embed(["hello"], is_query=True)[0]
    assert not np.allclose(doc, query)  # "passage: hello" vs "query: hello"
    # the instruction goes with queries only
    np.testing.assert_allclose(instructed.embed(["hello"])[0], doc, atol=1e-6)
    assert not np.allclose(instructed.embed(["hello"], is_query=True)[0], query)


def test_instruction_is_sent_with_queries_only(base_url: str) -> None:
    transport = Recording()
    with SIEClient(base_url, transport=transport) as client:
        backend = SIEBackend(MINILM, instruction="Find the invoice", client=client)
        backend.embed(["doc"])
        backend.embed(["query"], is_query=True)
    docs, queries = transport.bodies("/v1/encode/")
    assert "instruction" not in docs["params"] and docs["params"]["options"]["is_query"] is False
    assert queries["params"]["instruction"] == "Find the invoice" and queries["params"]["options"]["is_query"] is True


def test_score_batches_and_maps_back_to_input_order(base_url: str) -> None:
    transport = Recording()
    with SIEClient(base_url, transport=transport) as client:
        scores = SIEBackend(TINY_RERANKER, batch_size=64, client=client).score("topic 3", TEXTS)
    assert [len(b["items"]) for b in transport.bodies("/v1/score/")] == [64, 64, 22]
    assert len(scores) == 150
    few = SIEBackend(TINY_RERANKER, base_url=base_url).score("topic 3", [TEXTS[149], TEXTS[0]])
    assert few == pytest.approx([scores[149], scores[0]], abs=1e-5)
    assert SIEBackend(TINY_RERANKER, base_url=base_url).score("q", []) == []


async def test_async_score_matches_sync(base_url: str) -> None:
    backend = SIEBackend(TINY_RERANKER, base_url=base_url, batch_size=40)
    assert await backend.ascore("topic 3", TEXTS) == pytest.approx(backend.score("topic 3", TEXTS), abs=1e-5)


def test_errors_pass_through_typed(base_url: str) -> None:
    with pytest.raises(ModelNotFoundError):
        SIEBackend("no-such/model", base_url=base_url).embed(["x"])
    with pytest.raises(InvalidInputError):  # a cross-encoder has no encode task
        SIEBackend(TINY_RERANKER, base_url=base_url).embed(["x"])
    with pytest.raises(SIEConnectionError):
        SIEBackend(MINILM, base_url=f"http://127.0.0.1:{free_port()}", timeout=5).embed(["x"])


async def test_async_errors_pass_through_typed(base_url: str) -> None:
    with pytest.raises(ModelNotFoundError):
        await SIEBackend("no-such/model", base_url=base_url).aembed(["x"])
    with pytest.raises(ModelNotFoundError):
        await SIEBackend("no-such/model", base_url=base_url).ascore("q", ["x"])


def test_dims_copies_and_pickles(base_url: str) -> None:
    backend = SIEBackend(MINILM, base_url=base_url, priority="batch", instruction="i")
    assert backend.dims() == 384
    for clone in (copy.deepcopy(backend), pickle.loads(pickle.dumps(backend))):
        assert clone.settings() == backend.settings()
        assert clone.dims() == 384
    backend.close()
    backend.close()  # closing twice is harmless; the next call opens a new client
    assert len(backend.embed(["x"])[0]) == 384


def test_model_served_reads_the_catalog(base_url: str) -> None:
    assert model_served(MINILM, base_url=base_url, output="dense", task="encode")
    assert not model_served(MINILM, base_url=base_url, output="sparse")
    assert not model_served("no-such/model", base_url=base_url)


def test_named_vectors_ask_each_model_once_per_batch(base_url: str, needs_model: Callable[[str], None]) -> None:
    # One model serving every kind is asked once, for all three outputs.
    plan = VectorizerCore("m", sparse_model="m", multivector_model="m")._plan()
    assert plan == {"m": ["dense", "sparse", "multivector"]}
    needs_model(TINY_SPLADE)
    needs_model(TINY_COLBERT)
    transport = Recording()
    with SIEClient(base_url, transport=transport) as client:
        core = VectorizerCore(
            MINILM, sparse_model=TINY_SPLADE, multivector_model=TINY_COLBERT, client=client, batch_size=64
        )
        rows = core.named_raw(TEXTS[:70])
    assert [r.url.path.split("/v1/encode/")[1] for r in transport.requests] == [
        MINILM,
        MINILM,
        TINY_SPLADE,
        TINY_SPLADE,
        TINY_COLBERT,
        TINY_COLBERT,
    ]
    assert set(rows[0]) == {"dense", "sparse", "multivector"}


def test_generate_parameters_are_checked(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_LLM)
    backend = SIEBackend(TINY_LLM, base_url=base_url)
    with pytest.raises(TypeError, match="unknown generate parameters"):
        backend.generate("hi", max_tokens=3)
    answer = backend.generate("hi", max_new_tokens=4, temperature=0.0)
    assert answer["usage"]["completion_tokens"] <= 4
