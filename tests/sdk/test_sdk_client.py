"""Both clients against the fake server: paths, headers, bodies and result shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np
import pytest
from sdk_fakes import DIMS, MODEL, TOKEN_DIMS, Api, FakeServer, dense_for

from sie_sdk import InvalidInputError, ModelNotFoundError, SIEClient


async def test_encode_single_item_sends_msgpack_and_returns_one_result(api: Api, fake_server: FakeServer) -> None:
    result = await api.encode(MODEL, {"id": "a", "text": "hello world"}, is_query=True)

    rec = fake_server.requests[-1]
    assert rec.request.method == "POST"
    assert rec.path == "/v1/encode/sentence-transformers/all-MiniLM-L6-v2"
    assert rec.headers["content-type"] == "application/msgpack"
    assert rec.headers["accept"] == "application/msgpack"
    assert "x-sie-priority" not in rec.headers
    assert rec.body == {
        "items": [{"id": "a", "text": "hello world"}],
        "params": {"options": {"is_query": True}},
    }

    assert isinstance(result, dict)
    assert result["id"] == "a"
    assert result["model"] == MODEL
    assert result["timing"]["inference_ms"] == 2.0
    dense = result["dense"]
    assert isinstance(dense, np.ndarray)
    assert dense.dtype == np.float32
    assert dense.shape == (DIMS,)
    np.testing.assert_array_equal(dense, dense_for("hello world"))
    assert dense.flags.writeable
    assert "sparse" not in result and "multivector" not in result


async def test_encode_list_and_plain_strings(api: Api, fake_server: FakeServer) -> None:
    results = await api.encode(MODEL, ["one", {"text": "two"}])

    assert fake_server.requests[-1].body["items"] == [{"text": "one"}, {"text": "two"}]
    assert isinstance(results, list) and len(results) == 2
    np.testing.assert_array_equal(results[1]["dense"], dense_for("two"))


async def test_encode_plain_string_is_a_single_item(api: Api) -> None:
    result = await api.encode(MODEL, "just me")
    assert isinstance(result, dict)
    assert result["dense"].shape == (DIMS,)


async def test_encode_params_carry_only_what_was_set(api: Api, fake_server: FakeServer) -> None:
    await api.encode(
        MODEL,
        ["q"],
        output_types=["dense", "sparse", "multivector"],
        instruction="Represent this",
        output_dtype="float16",
        options={"truncate": True},
    )
    assert fake_server.requests[-1].body["params"] == {
        "output_types": ["dense", "sparse", "multivector"],
        "output_dtype": "float16",
        "instruction": "Represent this",
        "options": {"truncate": True},
    }
    await api.encode(MODEL, ["q"])
    assert fake_server.requests[-1].body["params"] == {}


@pytest.mark.parametrize("wire", ["msgpack", "json"])
async def test_all_outputs_have_the_same_arrays_in_both_wires(
    make_api: Callable[..., Api], fake_server: FakeServer, wire: str
) -> None:
    api = make_api(wire=wire)
    result = await api.encode(MODEL, "a b c", output_types=["dense", "sparse", "multivector"])

    expected_type = "application/msgpack" if wire == "msgpack" else "application/json"
    assert fake_server.requests[-1].headers["content-type"] == expected_type
    assert fake_server.requests[-1].headers["accept"] == expected_type
    assert result["dense"].dtype == np.float32
    np.testing.assert_array_equal(result["dense"], dense_for("a b c"))
    sparse = result["sparse"]
    assert sparse["indices"].dtype == np.int64
    np.testing.assert_array_equal(sparse["indices"], [3, 17, 2048])
    assert sparse["values"].dtype == np.float32
    np.testing.assert_array_equal(sparse["values"], [0.5, 1.25, 2.0])
    multivector = result["multivector"]
    assert multivector.dtype == np.float32
    assert multivector.shape == (3, TOKEN_DIMS)
    np.testing.assert_array_equal(multivector[2], np.arange(16, 24, dtype=np.float32))


@pytest.mark.parametrize("wire", ["msgpack", "json"])
async def test_output_dtype_float16_is_kept_in_both_wires(make_api: Callable[..., Api], wire: str) -> None:
    result = await make_api(wire=wire).encode(MODEL, "x", output_dtype="float16")
    assert result["dense"].dtype == np.float16
    np.testing.assert_array_equal(result["dense"], dense_for("x", "float16"))


async def test_model_ids_are_quoted_but_keep_their_slash(api: Api, fake_server: FakeServer) -> None:
    await api.encode("org/model name?v=1", "x")
    assert fake_server.requests[-1].path == "/v1/encode/org/model%20name%3Fv%3D1"


async def test_priority_header_client_default_and_per_call(
    make_api: Callable[..., Api], fake_server: FakeServer
) -> None:
    api = make_api(priority="batch")
    await api.encode(MODEL, "x")
    assert fake_server.requests[-1].headers["x-sie-priority"] == "batch"
    await api.encode(MODEL, "x", priority="interactive")
    assert fake_server.requests[-1].headers["x-sie-priority"] == "interactive"


async def test_custom_headers_are_sent(make_api: Callable[..., Api], fake_server: FakeServer) -> None:
    await make_api(headers={"Authorization": "Bearer t"}).list_models()
    assert fake_server.requests[-1].headers["authorization"] == "Bearer t"
    assert fake_server.requests[-1].headers["user-agent"].startswith("sie-sdk-python/")


async def test_score_body_and_result(api: Api, fake_server: FakeServer) -> None:
    result = await api.score(
        MODEL,
        {"id": "q", "text": "red apple"},
        [{"id": "d1", "text": "green pear"}, {"id": "d2", "text": "red apple pie"}],
        instruction="rank",
    )
    assert fake_server.requests[-1].path == f"/v1/score/{MODEL}"
    assert fake_server.requests[-1].body == {
        "query": {"id": "q", "text": "red apple"},
        "items": [{"id": "d1", "text": "green pear"}, {"id": "d2", "text": "red apple pie"}],
        "instruction": "rank",
    }
    assert result["model"] == MODEL
    assert result["query_id"] == "q"
    assert [entry["item_id"] for entry in result["scores"]] == ["d2", "d1"]
    assert [entry["rank"] for entry in result["scores"]] == [0, 1]


async def test_score_accepts_strings(api: Api, fake_server: FakeServer) -> None:
    result = await api.score(MODEL, "red", ["red", "blue"], options={"normalize": True})
    assert fake_server.requests[-1].body["query"] == {"text": "red"}
    assert fake_server.requests[-1].body["options"] == {"normalize": True}
    assert result["scores"][0]["item_id"] == "item-0"


async def test_extract_unsupported_surfaces_invalid_input(api: Api) -> None:
    with pytest.raises(InvalidInputError, match="does not support extract") as caught:
        await api.extract(MODEL, "Ada Lovelace wrote code", labels=["person"])
    assert caught.value.status_code == 400
    assert caught.value.code == "INVALID_INPUT"


async def test_extract_single_and_list(api: Api, fake_server: FakeServer) -> None:
    fake_server.supports_extract = True
    one = await api.extract("urchade/gliner", "Ada Lovelace", labels=["person"], threshold=0.4)
    assert fake_server.requests[-1].body == {
        "items": [{"text": "Ada Lovelace"}],
        "params": {"labels": ["person"], "threshold": 0.4},
    }
    assert isinstance(one, dict)
    assert one["entities"][0]["label"] == "person"
    assert one["model"] == "urchade/gliner"
    many = await api.extract("urchade/gliner", ["a text", "b text"], labels=["person", "place"])
    assert isinstance(many, list) and len(many) == 2


async def test_extract_refuses_a_bare_string_of_labels(api: Api) -> None:
    with pytest.raises(TypeError):
        await api.extract(MODEL, "x", labels="person")


async def test_generate_prompt(api: Api, fake_server: FakeServer) -> None:
    result = await api.generate("Qwen/Qwen2.5-0.5B", "Say hi", max_new_tokens=8, temperature=0.0, stop="\n")
    assert fake_server.requests[-1].path == "/v1/generate/Qwen/Qwen2.5-0.5B"
    assert fake_server.requests[-1].body == {
        "prompt": "Say hi",
        "max_new_tokens": 8,
        "temperature": 0.0,
        "stop": ["\n"],
        "stream": False,
    }
    assert result["text"] == "hello there"
    assert result["usage"]["total_tokens"] == 5


async def test_generate_messages(api: Api, fake_server: FakeServer) -> None:
    messages = [{"role": "user", "content": "hi"}]
    await api.generate("m/m", messages=messages, top_p=0.9, seed=7)
    assert fake_server.requests[-1].body == {"messages": messages, "top_p": 0.9, "seed": 7, "stream": False}


async def test_generate_needs_exactly_one_of_prompt_and_messages(api: Api, fake_server: FakeServer) -> None:
    with pytest.raises(ValueError):
        await api.generate("m/m")
    with pytest.raises(ValueError):
        await api.generate("m/m", "p", messages=[{"role": "user", "content": "hi"}])
    assert fake_server.attempts == 0


async def test_list_and_get_models(api: Api, fake_server: FakeServer) -> None:
    models = await api.list_models()
    assert fake_server.requests[-1].request.method == "GET"
    assert fake_server.requests[-1].path == "/v1/models"
    assert [model["id"] for model in models] == [MODEL]
    info = await api.get_model(MODEL)
    assert fake_server.requests[-1].path == f"/v1/models/{MODEL}"
    assert info["state"] == "loaded" and info["dims"] == {"dense": DIMS}
    with pytest.raises(ModelNotFoundError) as caught:
        await api.get_model("nope/nope")
    assert caught.value.status_code == 404


async def test_health(api: Api, fake_server: FakeServer) -> None:
    assert await api.health() is True
    assert fake_server.requests[-1].path == "/healthz"
    from sdk_fakes import error_response

    fake_server.queued.append(error_response(503, "MODEL_LOADING", "starting", retry_after=0.01))
    assert await api.health() is False
    assert fake_server.attempts == 2  # health is never retried


async def test_timeout_budget_is_the_per_attempt_httpx_timeout(
    make_api: Callable[..., Api], fake_server: FakeServer
) -> None:
    api = make_api(timeout=30.0)
    await api.list_models()
    default = fake_server.requests[-1].request.extensions["timeout"]
    assert 29.0 < default["read"] <= 30.0
    await api.list_models(timeout=5.0)
    override = fake_server.requests[-1].request.extensions["timeout"]
    assert 4.0 < override["read"] <= 5.0 and 4.0 < override["connect"] <= 5.0
    await api.list_models(timeout=None)
    assert fake_server.requests[-1].request.extensions["timeout"]["read"] is None


def test_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIE_URL", "http://elsewhere:9000/")
    with SIEClient() as client:
        assert client.base_url == "http://elsewhere:9000"
    monkeypatch.delenv("SIE_URL")
    with SIEClient() as client:
        assert client.base_url == "http://127.0.0.1:8080"
    with SIEClient("http://given") as client:
        assert client.base_url == "http://given"


@pytest.mark.parametrize("kwargs", [{"wire": "xml"}, {"priority": "urgent"}])
def test_bad_settings_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SIEClient(**kwargs)


async def test_context_managers_close(fake_server: FakeServer) -> None:
    import httpx

    from sie_sdk import SIEAsyncClient

    with SIEClient("http://x", transport=httpx.MockTransport(fake_server)) as client:
        assert client.health()
    assert client._http.is_closed
    async with SIEAsyncClient("http://x", transport=httpx.MockTransport(fake_server)) as aclient:
        assert await aclient.health()
    assert aclient._http.is_closed


def test_request_body_is_plain_msgpack(fake_server: FakeServer) -> None:
    """The request body a server sees: str keys, no numpy, bytes for images."""
    import httpx

    with SIEClient("http://x", transport=httpx.MockTransport(fake_server)) as client:
        client.encode(MODEL, {"text": "t", "images": [b"\x89PNG\r\n\x1a\nrest"], "metadata": {"k": 1}})
    raw = msgpack.unpackb(fake_server.requests[-1].request.content, raw=False)
    assert raw["items"][0]["images"] == [{"data": b"\x89PNG\r\n\x1a\nrest", "format": "png"}]
    assert raw["items"][0]["metadata"] == {"k": 1}
