"""A loopback fake of the slice of Weaviate's REST + gRPC API that ``SIEVectorizer`` uses.

No Weaviate server runs here, so the real ``weaviate-client`` v4 talks to this instead:

- REST: ``GET /v1/meta``, ``/v1/.well-known/{ready,live,openid-configuration}``,
  ``POST /v1/schema`` (collections with self-provided named vectors and multivectors),
  ``GET|DELETE /v1/schema/{name}``, ``GET /v1/schema``.
- gRPC: ``weaviate.v1.Weaviate/BatchObjects`` (``insert_many``), ``Search`` with ``near_vector``
  on one named vector, and ``grpc.health.v1.Health/Check``.

It checks what a real server would refuse: unknown collections or vector names, vectorizers
other than ``none``, a single vector sent to a multivector slot (or the reverse), and vectors
whose size differs from the first one stored under that name. Distances: cosine distance for
single vectors; for multivectors ``-MaxSim`` (the sum over query tokens of the best dot
product), which orders results as Weaviate's late interaction does.
"""

from __future__ import annotations

import json
import struct
import threading
import uuid
from concurrent import futures
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import numpy as np
from google.protobuf.json_format import MessageToDict
from weaviate.proto.v1 import (
    base_pb2,
    batch_pb2,
    health_weaviate_pb2,
    properties_pb2,
    search_get_pb2,
    weaviate_pb2_grpc,
)

VERSION = "1.32.0"
SINGLE = base_pb2.Vectors.VECTOR_TYPE_SINGLE_FP32
MULTI = base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32


@dataclass
class StoredCollection:
    schema: dict[str, Any]
    multivector: dict[str, bool]  # vector name -> is a multivector
    dims: dict[str, int] = field(default_factory=dict)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # uuid -> {"properties", "vectors"}


class FakeWeaviate:
    """The state both servers share, plus the request log the tests read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.collections: dict[str, StoredCollection] = {}
        self.calls: list[str] = []
        self.refuse: set[str] = set()  # object uuids to refuse, for partial-failure tests

    # --- schema ---------------------------------------------------------------------------

    def create(self, schema: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = schema.get("class")
        if not isinstance(name, str) or not name:
            return 422, {"error": [{"message": "class name is required"}]}
        name = name[0].upper() + name[1:]
        vector_config = schema.get("vectorConfig") or {}
        if not isinstance(vector_config, dict) or not vector_config:
            return 422, {"error": [{"message": "this fake serves named vectors only (vectorConfig)"}]}
        multivector: dict[str, bool] = {}
        for vector_name, config in vector_config.items():
            vectorizer = config.get("vectorizer") or {}
            if list(vectorizer) != ["none"]:
                return 422, {"error": [{"message": f"vector {vector_name}: only self-provided vectors"}]}
            index = config.get("vectorIndexConfig") or {}
            multivector[vector_name] = bool((index.get("multivector") or {}).get("enabled"))
        with self.lock:
            if name in self.collections:
                return 422, {"error": [{"message": f"class name {name!r} already exists"}]}
            stored = {**schema, "class": name}
            self.collections[name] = StoredCollection(schema=stored, multivector=multivector)
        return 200, stored

    # --- objects --------------------------------------------------------------------------

    def batch(self, request: batch_pb2.BatchObjectsRequest) -> batch_pb2.BatchObjectsReply:
        errors = []
        with self.lock:
            for index, obj in enumerate(request.objects):
                problem = self._store(obj)
                if problem is not None:
                    errors.append(batch_pb2.BatchObjectsReply.BatchError(index=index, error=problem))
        return batch_pb2.BatchObjectsReply(took=0.001, errors=errors)

    def _store(self, obj: batch_pb2.BatchObject) -> str | None:
        collection = self.collections.get(obj.collection)
        if collection is None:
            return f"class {obj.collection!r} not found in schema"
        if obj.uuid in self.refuse:
            return f"object {obj.uuid} refused"
        vectors: dict[str, np.ndarray] = {}
        for vector in obj.vectors:
            if vector.name not in collection.multivector:
                return f"vector {vector.name!r} is not configured on {obj.collection}"
            is_multi = vector.type == MULTI
            if is_multi != collection.multivector[vector.name]:
                kind = "multi-vector" if collection.multivector[vector.name] else "single vector"
                return f"vector {vector.name!r} expects a {kind}"
            array = unpack(vector.vector_bytes, is_multi)
            size = int(array.shape[-1])
            if collection.dims.setdefault(vector.name, size) != size:
                return f"vector {vector.name!r}: size {size}, expected {collection.dims[vector.name]}"
            vectors[vector.name] = array
        properties = MessageToDict(obj.properties.non_ref_properties)
        for text_array in obj.properties.text_array_properties:
            properties[text_array.prop_name] = list(text_array.values)
        collection.objects[obj.uuid or str(uuid.uuid4())] = {"properties": properties, "vectors": vectors}
        return None

    # --- search ---------------------------------------------------------------------------

    def search(self, request: search_get_pb2.SearchRequest, context: grpc.ServicerContext) -> Any:
        collection = self.collections.get(request.collection)
        if collection is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"class {request.collection!r} not found")
        if not request.HasField("near_vector"):
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this fake serves near_vector searches only")
        near = request.near_vector
        targets = list(near.targets.target_vectors) or list(near.target_vectors)
        if len(targets) != 1:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"need exactly one target vector, got {targets}")
        target = targets[0]
        if target not in collection.multivector:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"target vector {target!r} does not exist")
        query = self._query_vector(near, target)
        if query.ndim == 2 and not collection.multivector[target]:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{target!r} is not a multi-vector")
        with self.lock:
            scored = [
                (distance(query, stored["vectors"][target]), object_id, stored)
                for object_id, stored in collection.objects.items()
                if target in stored["vectors"]
            ]
        scored.sort(key=lambda row: row[0])
        limit = request.limit or 10
        results = [self._result(request, d, object_id, stored) for d, object_id, stored in scored[:limit]]
        return search_get_pb2.SearchReply(took=0.001, results=results)

    @staticmethod
    def _query_vector(near: Any, target: str) -> np.ndarray:
        if len(near.vectors) > 0:
            return unpack(near.vectors[0].vector_bytes, near.vectors[0].type == MULTI)
        for for_target in near.vector_for_targets:
            if for_target.name == target and for_target.vectors:
                first = for_target.vectors[0]
                return unpack(first.vector_bytes, first.type == MULTI)
        if near.vector_bytes:
            return unpack(near.vector_bytes, False)
        return np.asarray(list(near.vector), dtype=np.float32)

    @staticmethod
    def _result(request: Any, dist: float, object_id: str, stored: dict[str, Any]) -> Any:
        wanted = set(request.properties.non_ref_properties)
        everything = request.properties.return_all_nonref_properties or not wanted
        fields = {key: to_value(value) for key, value in stored["properties"].items() if everything or key in wanted}
        metadata = search_get_pb2.MetadataResult(
            id=object_id,
            id_as_bytes=uuid.UUID(object_id).bytes,
            distance=dist,
            distance_present=True,
        )
        names = list(request.metadata.vectors) or (list(stored["vectors"]) if request.metadata.vector else [])
        for name in names:
            array = stored["vectors"][name]
            metadata.vectors.append(
                base_pb2.Vectors(name=name, vector_bytes=pack(array), type=MULTI if array.ndim == 2 else SINGLE)
            )
        properties = search_get_pb2.PropertiesResult(non_ref_props=properties_pb2.Properties(fields=fields))
        return search_get_pb2.SearchResult(properties=properties, metadata=metadata)


def unpack(data: bytes, multi: bool) -> np.ndarray:
    """Weaviate's vector bytes: float32s; a multivector starts with its token size (uint16)."""
    if not multi:
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
    (dim,) = struct.unpack("<H", data[:2])
    return np.frombuffer(data[2:], dtype="<f4").astype(np.float32).reshape(-1, dim)


def pack(array: np.ndarray) -> bytes:
    if array.ndim == 2:
        return struct.pack("<H", array.shape[1]) + array.astype("<f4").tobytes()
    return array.astype("<f4").tobytes()


def distance(query: np.ndarray, stored: np.ndarray) -> float:
    if query.ndim == 2:
        return -float((query @ stored.T).max(axis=1).sum())
    norm = float(np.linalg.norm(query) * np.linalg.norm(stored)) or 1.0
    return 1.0 - float(query @ stored) / norm


def to_value(value: Any) -> properties_pb2.Value:
    if isinstance(value, bool):
        return properties_pb2.Value(bool_value=value)
    if isinstance(value, int):
        return properties_pb2.Value(int_value=value)
    if isinstance(value, float):
        return properties_pb2.Value(number_value=value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        texts = properties_pb2.TextValues(values=value)
        return properties_pb2.Value(list_value=properties_pb2.ListValue(text_values=texts))
    return properties_pb2.Value(text_value=str(value))


class _Servicer(weaviate_pb2_grpc.WeaviateServicer):  # type: ignore[misc]
    def __init__(self, fake: FakeWeaviate) -> None:
        self.fake = fake

    def BatchObjects(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.fake.calls.append("grpc BatchObjects")
        return self.fake.batch(request)

    def Search(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.fake.calls.append("grpc Search")
        return self.fake.search(request, context)


def _health(request: Any, context: grpc.ServicerContext) -> Any:
    return health_weaviate_pb2.WeaviateHealthCheckResponse(
        status=health_weaviate_pb2.WeaviateHealthCheckResponse.SERVING
    )


def _rest_handler(fake: FakeWeaviate) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any | None = None) -> None:
            payload = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _route(self, method: str) -> None:
            path = self.path.split("?")[0].rstrip("/")
            fake.calls.append(f"{method} {path}")
            if method == "GET" and path == "/v1/meta":
                return self._send(200, {"version": VERSION, "hostname": "http://[::]:8080", "modules": {}})
            if method == "GET" and path in ("/v1/.well-known/ready", "/v1/.well-known/live"):
                return self._send(200)
            if method == "GET" and path == "/v1/.well-known/openid-configuration":
                return self._send(404)
            if path == "/v1/schema" and method == "POST":
                length = int(self.headers.get("Content-Length") or 0)
                status, body = fake.create(json.loads(self.rfile.read(length) or b"{}"))
                return self._send(status, body)
            if path == "/v1/schema" and method == "GET":
                return self._send(200, {"classes": [c.schema for c in fake.collections.values()]})
            if path.startswith("/v1/schema/"):
                name = path.removeprefix("/v1/schema/")
                name = name[:1].upper() + name[1:]
                if method == "GET":
                    stored = fake.collections.get(name)
                    return self._send(200, stored.schema) if stored else self._send(404)
                if method == "DELETE":
                    with fake.lock:
                        fake.collections.pop(name, None)
                    return self._send(200)
            return self._send(HTTPStatus.NOT_FOUND, {"error": [{"message": f"no route {method} {path}"}]})

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_DELETE(self) -> None:
            self._route("DELETE")

    return Handler


class FakeWeaviateServer:
    """Both servers on 127.0.0.1 ephemeral ports; ``with FakeWeaviateServer() as fake: ...``."""

    def __init__(self) -> None:
        self.state = FakeWeaviate()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _rest_handler(self.state))
        self.http_port = int(self._http.server_address[1])
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        weaviate_pb2_grpc.add_WeaviateServicer_to_server(_Servicer(self.state), self._grpc)
        health = grpc.unary_unary_rpc_method_handler(
            _health,
            request_deserializer=health_weaviate_pb2.WeaviateHealthCheckRequest.FromString,
            response_serializer=health_weaviate_pb2.WeaviateHealthCheckResponse.SerializeToString,
        )
        self._grpc.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("grpc.health.v1.Health", {"Check": health}),)
        )
        self.grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> FakeWeaviateServer:
        self._grpc.start()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None).wait()
        self._thread.join(timeout=5)
