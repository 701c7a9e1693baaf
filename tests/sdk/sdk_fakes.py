"""Test helpers for the SDK: a fake SIE server for ``httpx.MockTransport`` and one
awaitable API over both clients (the fixtures that use them are in conftest.py).

The fake encodes its answers itself (raw msgpack / json, not through ``sie_sdk._wire``)
so the SDK's codec is checked against an independent reading of the wire contract.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgpack
import numpy as np

from sie_sdk import SIEAsyncClient, SIEClient

BASE_URL = "http://sie.test"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DIMS = 384
TOKEN_DIMS = 8
SSE_BODY = (
    b": keep-alive comment\n\n"
    b'data: {"text": "Hel", "model": "m"}\n\n'
    b'data: {"text": "lo", "model": "m"}\n\n'
    b'data: {"text": "", "finish_reason": "stop", "usage": {"total_tokens": 5}}\n\n'
    b"data: [DONE]\n\n"
)


def nd(array: np.ndarray[Any, Any]) -> dict[bytes, Any]:
    """A msgpack-numpy map, written out by hand."""
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return {
        b"nd": True,
        b"type": little.dtype.str,
        b"kind": b"",
        b"shape": list(little.shape),
        b"data": little.tobytes(),
    }


def dense_for(text: str, dtype: str = "float32") -> np.ndarray[Any, Any]:
    """The fake model: a deterministic vector per text."""
    seed = sum(text.encode())
    return (np.arange(DIMS, dtype=np.float64) * 0.001 + seed * 0.01).astype(dtype)


def error_response(status: int, code: str | None, message: str, retry_after: float | None = None) -> httpx.Response:
    headers = {}
    if code is not None:
        headers["X-SIE-Error-Code"] = code
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return httpx.Response(status, json={"detail": {"code": code, "message": message}}, headers=headers)


@dataclass
class Recorded:
    """One request the fake received, with its body decoded by the test side."""

    request: httpx.Request
    body: Any

    @property
    def path(self) -> str:
        return self.request.url.raw_path.decode()

    @property
    def headers(self) -> httpx.Headers:
        return self.request.headers


@dataclass
class FakeServer:
    """Emulates the SIE routes. ``queued`` answers (or exceptions) are served first, in order."""

    queued: list[httpx.Response | Exception] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    supports_extract: bool = False
    stream_body: Any = SSE_BODY  # bytes, or an httpx stream, for streaming generate

    def __call__(self, request: httpx.Request) -> httpx.Response:
        recorded = Recorded(request, self._decode(request))
        self.requests.append(recorded)
        if self.queued:
            answer = self.queued.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        return self._route(recorded)

    @property
    def attempts(self) -> int:
        return len(self.requests)

    # ---------------------------------------------------------------- routing

    def _route(self, rec: Recorded) -> httpx.Response:
        path = rec.path
        if path == "/healthz":
            return httpx.Response(200, text="ok")
        if path == "/v1/models":
            return self._reply(rec, {"models": [self._info(MODEL)]})
        if path.startswith("/v1/models/"):
            model = path.removeprefix("/v1/models/")
            if model != MODEL:
                return error_response(404, "MODEL_NOT_FOUND", f"model {model!r} is not in the catalog")
            return self._reply(rec, self._info(model))
        route, _, model = path.removeprefix("/v1/").partition("/")
        handler: Callable[[Recorded, str], httpx.Response] | None = getattr(self, f"_{route}", None)
        if handler is None or rec.request.method != "POST":
            return error_response(404, None, "Not Found")
        return handler(rec, model)

    def _encode(self, rec: Recorded, model: str) -> httpx.Response:
        params = rec.body.get("params", {})
        output_types = params.get("output_types", ["dense"])
        dtype = params.get("output_dtype", "float32")
        items = []
        for index, item in enumerate(rec.body["items"]):
            text = item.get("text", "")
            out: dict[str, Any] = {"id": item.get("id", f"item-{index}")}
            if "dense" in output_types:
                out["dense"] = {
                    "dims": DIMS,
                    "dtype": dtype,
                    "values": self._array(rec, dense_for(text, dtype)),
                }
            if "sparse" in output_types:
                out["sparse"] = {
                    "dims": 30522,
                    "dtype": "float32",
                    "indices": self._array(rec, np.array([3, 17, 2048], dtype=np.int32)),
                    "values": self._array(rec, np.array([0.5, 1.25, 2.0], dtype=np.float32)),
                }
            if "multivector" in output_types:
                tokens = max(1, len(text.split()))
                matrix = np.arange(tokens * TOKEN_DIMS, dtype=np.float32).reshape(tokens, TOKEN_DIMS)
                out["multivector"] = {
                    "token_dims": TOKEN_DIMS,
                    "num_tokens": tokens,
                    "dtype": "float32",
                    "values": self._array(rec, matrix),
                }
            items.append(out)
        timing = {"total_ms": 3.0, "queue_ms": 0.5, "tokenization_ms": 0.5, "inference_ms": 2.0}
        return self._reply(rec, {"model": model, "items": items, "timing": timing})

    def _score(self, rec: Recorded, model: str) -> httpx.Response:
        query = rec.body["query"]["text"]
        scored = [
            (item.get("id", f"item-{i}"), float(len(set(query.split()) & set(item.get("text", "").split()))))
            for i, item in enumerate(rec.body["items"])
        ]
        scored.sort(key=lambda pair: -pair[1])
        scores = [{"item_id": item_id, "score": score, "rank": rank} for rank, (item_id, score) in enumerate(scored)]
        return self._reply(rec, {"model": model, "query_id": rec.body["query"].get("id"), "scores": scores})

    def _extract(self, rec: Recorded, model: str) -> httpx.Response:
        if not self.supports_extract:
            return error_response(400, "INVALID_INPUT", f"model {model!r} does not support extract")
        labels = rec.body["params"]["labels"]
        items = [
            {
                "id": item.get("id", f"item-{i}"),
                "entities": [
                    {
                        "text": item["text"][:5],
                        "label": labels[0],
                        "score": 0.9,
                        "start": 0,
                        "end": 5,
                        "bbox": None,
                    }
                ],
            }
            for i, item in enumerate(rec.body["items"])
        ]
        return self._reply(rec, {"model": model, "items": items})

    def _generate(self, rec: Recorded, model: str) -> httpx.Response:
        if rec.body.get("stream"):
            headers = {"content-type": "text/event-stream"}
            if isinstance(self.stream_body, bytes):
                return httpx.Response(200, headers=headers, content=self.stream_body)
            return httpx.Response(200, headers=headers, stream=self.stream_body)
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        answer = {"model": model, "text": "hello there", "finish_reason": "stop", "usage": usage}
        return self._reply(rec, answer)

    # ---------------------------------------------------------------- codec

    @staticmethod
    def _wants_msgpack(rec: Recorded) -> bool:
        return "msgpack" in rec.headers.get("accept", "")

    def _array(self, rec: Recorded, array: np.ndarray[Any, Any]) -> Any:
        return nd(array) if self._wants_msgpack(rec) else array.tolist()

    def _reply(self, rec: Recorded, body: Any) -> httpx.Response:
        if self._wants_msgpack(rec):
            content = msgpack.packb(body, use_bin_type=True)
            return httpx.Response(200, content=content, headers={"content-type": "application/msgpack"})
        return httpx.Response(200, json=body)

    @staticmethod
    def _decode(request: httpx.Request) -> Any:
        content = request.read()
        if not content:
            return None
        if request.headers.get("content-type") == "application/msgpack":
            return msgpack.unpackb(content, raw=False)
        return json.loads(content)

    @staticmethod
    def _info(model: str) -> dict[str, Any]:
        return {
            "id": model,
            "name": model,
            "tasks": ["encode"],
            "dims": {"dense": DIMS},
            "state": "loaded",
            "loaded": True,
            "resident_bytes": 90_000_000,
            "weights_source": "hub",
            "last_error": None,
        }


class Api:
    """One awaitable interface over ``SIEClient`` and ``SIEAsyncClient``.

    ``await api.encode(...)`` calls the client's method and awaits it when it is async.
    """

    def __init__(self, client: SIEClient | SIEAsyncClient) -> None:
        self.client = client
        self.is_async = isinstance(client, SIEAsyncClient)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return call

    async def stream(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        """Start a streaming generate and drain it."""
        chunks = await self.generate(*args, stream=True, **kwargs)
        if isinstance(chunks, AsyncIterator):
            return [chunk async for chunk in chunks]
        assert isinstance(chunks, Iterator)
        return list(chunks)

    async def close(self) -> None:
        if isinstance(self.client, SIEAsyncClient):
            await self.client.aclose()
        else:
            self.client.close()
