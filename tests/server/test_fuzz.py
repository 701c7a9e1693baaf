"""Schema fuzz: schemathesis generates requests for every operation of the live server's own
OpenAPI spec (GET /openapi.json) and checks each answer. Runs against the server and, shorter,
against the gateway in front of a worker (SIE_TEST_TARGET=gateway).

Checks on every answer (schemathesis' own):
- ``not_a_server_error``: no 5xx, ever;
- ``status_code_conformance``: the status is one the spec documents for that operation;
- ``content_type_conformance``: the Content-Type is one the spec documents for that status;
- ``response_schema_conformance``: a JSON answer (2xx or error envelope) matches its schema;
- ``negative_data_rejection``: a body that breaks the schema gets a 4xx.

Generation: for each operation, bodies that follow the schema (positive) and bodies that break
it (negative; operations with a body only: a GET without parameters has nothing to break).
Path and body model ids are mostly catalog ids that serve that route, sometimes a tiny model of
another kind or an unknown id; three positive bodies in four are made servable (``servable``:
what the schema cannot say, e.g. an item needs a text), so the fuzz reaches the model code, and
every operation that takes a model must get some 2xx. Derandomized (a fixed seed per operation),
no example database, no shrinking: the same run every time.

Bounds: at most ``EXAMPLES`` examples per operation and mode (100 against the server, 25 against
the gateway), and a time budget for the whole file (150 s / 50 s of fuzzing, an equal share per
operation); past its share, and once it has sent ``MIN_SENT`` requests, an operation sends nothing
more. On this 2-core machine the server pass sends about
2,400 requests in 1½ to 2¼ minutes (the whole file), the gateway pass about 600 in under a minute.

What the spec cannot express is fuzzed as JSON only: the work routes also take msgpack bodies,
which schemathesis cannot serialize (msgpack bodies are covered by test_http_api.py and
test_hostile_inputs.py). Headers the routes read (X-SIE-*) are not in the spec and not fuzzed
(test_hostile_inputs.py covers them). Requests go to 127.0.0.1 only.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from sie_server.tasks.registry import TASKS
from tests.conftest import TARGET

Operation = APIOperation[Any, Any, Any, Any]
FuzzCase = Case[Any]
GATEWAY = TARGET == "gateway"
# a longer run by hand: SIE_FUZZ_EXAMPLES=1000 SIE_FUZZ_BUDGET_S=1800 pytest --timeout 0 tests/server/test_fuzz.py
EXAMPLES = int(os.environ.get("SIE_FUZZ_EXAMPLES", 25 if GATEWAY else 100))
BUDGET_S = float(os.environ.get("SIE_FUZZ_BUDGET_S", 50.0 if GATEWAY else 150.0))
MIN_SENT = 10
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]

ENCODERS = ("test/tiny-embedder", "test/tiny-cls", "test/tiny-splade", "test/tiny-colbert", "test/tiny-bge-m3")
SCORERS = ("test/tiny-reranker", "test/tiny-embedder", "test/tiny-colbert", "test/tiny-splade", "test/tiny-bge-m3")
LLMS = ("test/tiny-llm", "test/tiny-llm-b")
# not test/tiny-cold: test_errors.py needs it never loaded; not test/missing-weights: a catalog entry
# whose weights are gone is the operator's fault, rightly a 502 (test_errors.py); no real catalog
# model: each would load for seconds and hold memory
WRONG = ("test/tiny-gliner", "test/tiny-llm", "test/tiny-embedder", "no/such-model", "test/../test/tiny-llm")
# every operation of the spec, with the model ids that serve it (the test below fails when the spec
# has an operation this table lacks, so a new route is fuzzed or the table says why not)
OPERATIONS: dict[str, tuple[str, ...]] = {
    "GET /healthz": (),
    "GET /metrics": (),
    "GET /readyz": (),
    "GET /v1/models": (),
    "GET /v1/memory": (),
    "GET /v1/models/{model}": (*ENCODERS, *LLMS, "test/tiny-gliner", "test/tiny-clip", "sentence-transformers/x"),
    "POST /v1/models/{model}/reload": ("test/tiny-embedder", "test/tiny-reranker", "test/tiny-llm-b"),
    "POST /v1/models/{model}/load": ("test/tiny-embedder", "test/tiny-reranker", "test/tiny-llm-b"),
    # only a model no other test relies on staying loaded (reload and load above bring it back)
    "POST /v1/models/{model}/evict": ("test/tiny-llm-b",),
    "GET /v1/status": (),
    "POST /v1/encode/{model}": (*ENCODERS, "test/tiny-clip"),
    "POST /v1/score/{model}": SCORERS,
    "POST /v1/extract/{model}": ("test/tiny-gliner",),
    "POST /v1/generate/{model}": LLMS,
    "POST /v1/tokenize/{model}": ("test/tiny-embedder", "test/tiny-reranker", "test/tiny-llm"),
    "POST /v1/detokenize/{model}": ("test/tiny-embedder", "test/tiny-llm"),
    "POST /v1/embeddings": ("test/tiny-embedder", "test/tiny-bge-m3", "test/tiny-clip"),
    "POST /v1/rerank": ("test/tiny-reranker", "test/tiny-embedder"),
    "POST /v2/rerank": ("test/tiny-reranker", "test/tiny-embedder"),
    "POST /v1/chat/completions": LLMS,
    "POST /v1/completions": LLMS,
    "POST /v1/responses": LLMS,
    "POST /v1/moderations": ("unitary/toxic-bert", "test/tiny-sentiment"),
    "POST /v1/classify": ("test/tiny-sentiment", "unitary/toxic-bert"),
    "POST /v1/audio/transcriptions": ("Systran/faster-whisper-tiny.en",),
    "POST /api/embed": ("test/tiny-embedder", "test/tiny-bge-m3", "test/tiny-clip"),
    "POST /api/embeddings": ("test/tiny-embedder", "test/tiny-bge-m3"),
    "POST /api/chat": LLMS,
    "POST /api/generate": LLMS,
    "POST /api/show": (*ENCODERS, *LLMS),
    "GET /api/tags": (),
    "GET /api/ps": (),
    "GET /api/version": (),
    # TEI's routes: the model in the body's optional field (none: a 400 saying how to choose one)
    "POST /embed": ("test/tiny-embedder", "test/tiny-bge-m3", "test/tiny-clip"),
    "POST /embed_sparse": ("test/tiny-splade", "test/tiny-bge-m3"),
    "POST /embed_all": ("test/tiny-colbert", "test/tiny-bge-m3"),
    "POST /rerank": ("test/tiny-reranker", "test/tiny-embedder"),
    "POST /predict": ("test/tiny-sentiment",),
    "POST /similarity": ("test/tiny-embedder", "test/tiny-cls"),
    "POST /": ("test/tiny-embedder", "test/tiny-sentiment", "test/tiny-reranker", "test/tiny-splade"),
    "POST /tokenize": ("test/tiny-embedder", "test/tiny-cls"),
    "POST /decode": ("test/tiny-embedder",),
    "GET /info": (),
    "GET /health": (),
    # the Batch API: ids that do not exist (404), bodies and uploads that break the schema (400)
    "POST /v1/files": (),
    "GET /v1/files": (),
    "GET /v1/files/{file_id}": (),
    "GET /v1/files/{file_id}/content": (),
    "DELETE /v1/files/{file_id}": (),
    "POST /v1/batches": (),
    "GET /v1/batches": (),
    "GET /v1/batches/{batch_id}": (),
    "POST /v1/batches/{batch_id}/cancel": (),
}
# operations of the spec not fuzzed yet (so a route added later still fails the test below): the tasks
# of sie_server/tasks/registry.py (each call runs several real models for seconds); their refusals are
# tested in tests/tasks
NOT_FUZZED_YET = frozenset(f"POST /v1/tasks/{name}" for name in TASKS)
TEI_PATHS = ("/embed", "/embed_sparse", "/embed_all", "/rerank", "/predict", "/similarity", "/", "/tokenize", "/decode")
SMALL_ID = 64  # token ids below the tiny models' vocabulary (tests/helpers/tiny_models.py)
_started: dict[str, float] = {}
#: operations whose generated bodies can never be served: random bytes are not audio (tests/server/test_speech.py
#: transcribes real speech); they must still answer every body with a documented 4xx, never a 5xx
NEVER_SERVABLE = frozenset({"POST /v1/audio/transcriptions"})


@pytest.fixture(scope="module")
def schema(base_url: str) -> schemathesis.BaseSchema:
    spec = httpx.get(f"{base_url}/openapi.json", timeout=30).json()
    return schemathesis.openapi.from_dict(spec)


def over_budget(label: str, sent: int) -> bool:
    """Past this operation's share of the file's budget, once it has sent ``MIN_SENT`` requests (each
    operation gets an equal slice, and a slow one still its minimum: a loaded machine cuts every
    operation short, not the last ones to nothing)."""
    started = _started.setdefault(label, time.monotonic())
    return sent >= MIN_SENT and time.monotonic() - started > BUDGET_S / len(OPERATIONS)


def model_ids(served: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Mostly ids that serve the route; one draw in five a wrong kind or an unknown id."""
    return st.one_of(*[st.sampled_from(served)] * 4, st.sampled_from(WRONG))


def servable(body: dict[str, Any], label: str) -> None:
    """Turn a schema-valid body into one a model can serve, so the fuzz reaches the model code: the
    schema cannot say that an item needs a text (or an image), that extract needs labels, or that
    generate takes one of prompt and messages within the model's context."""
    items = body.get("items")
    for item in [*(items if isinstance(items, list) else []), body.get("query")]:
        if isinstance(item, dict):
            item.pop("images", None)
            if not isinstance(item.get("text"), str) or not item["text"].strip():
                item["text"] = "Invoice INV-7 from Acme Corp"
    if "/extract/" in label:
        body["params"] = {**(body.get("params") or {}), "labels": ["company", "amount"]}
    if "/generate/" in label and (("prompt" in body) == ("messages" in body) or body.get("prompt") is None):
        body.pop("messages", None)
        body["prompt"] = body.get("prompt") or "hello"
    for key in ("max_new_tokens", "max_tokens", "max_completion_tokens"):
        if isinstance(body.get(key), int | float):
            body[key] = min(body[key], 32)
    if label.split()[-1] in TEI_PATHS:  # TEI's: the model in an optional field, options a model may refuse
        body.setdefault("model", "")  # (replaced by the drawn model)
        for key in ("prompt_name", "dimensions", "truncation_direction", "raw_scores", "normalize"):
            body.pop(key, None)
        if label in ("POST /predict", "POST /") and not isinstance(body.get("inputs"), str | dict):
            body["inputs"] = "Invoice INV-7 from Acme Corp"
        if label == "POST /":  # what the root does depends on the model: a reranker there reads these
            body.setdefault("query", "who billed us")
            body.setdefault("texts", ["Acme Corp", "a receipt"])
    if label in ("POST /v1/detokenize/{model}", "POST /decode"):  # ids the tiny vocabulary holds
        holders = [i for i in items if isinstance(i, dict)] if isinstance(items, list) else [body]
        for holder in holders:
            holder.pop("text", None)  # (given above to every item)
            holder["ids"] = _small_ids(holder.get("ids"))
    options = body.get("options")  # Ollama's routes take num_predict there
    if isinstance(options, dict) and isinstance(options.get("num_predict"), int | float):
        options["num_predict"] = min(options["num_predict"], 32)


def _small_ids(ids: Any) -> Any:
    """Token ids (a list, or TEI's list of lists) brought below ``SMALL_ID``; an empty list gets one id."""
    if not isinstance(ids, list) or not ids:
        return [5]
    return [_small_ids(i) if isinstance(i, list) else i % SMALL_ID if isinstance(i, int) else i for i in ids]


def operations(schema: schemathesis.BaseSchema) -> dict[str, Operation]:
    found: dict[str, Operation] = {}
    for result in schema.get_all_operations():
        if isinstance(result, Err):  # an operation schemathesis cannot read fails the test
            raise result.err()
        found[result.ok().label] = result.ok()
    return found


def cases(operation: Operation, mode: GenerationMode, models: st.SearchStrategy[str]) -> st.SearchStrategy[FuzzCase]:
    """Requests for one operation; JSON bodies only (schemathesis has no msgpack serializer: see the
    module docstring). A model in the path is chosen before generation, so a negative case stays
    negative (the path is not what breaks the schema)."""
    media = "application/json" if operation.body else None
    if "{model}" not in operation.path:
        return operation.as_strategy(generation_mode=mode, media_type=media)
    return models.flatmap(
        lambda m: operation.as_strategy(generation_mode=mode, media_type=media, path_parameters={"model": m})
    )


def test_every_operation_is_fuzzed(schema: schemathesis.BaseSchema) -> None:
    assert set(operations(schema)) == set(OPERATIONS) | NOT_FUZZED_YET


@pytest.mark.parametrize("label", list(OPERATIONS))
def test_fuzz_operation(schema: schemathesis.BaseSchema, base_url: str, label: str) -> None:
    operation = operations(schema)[label]
    served = OPERATIONS[label]
    models = model_ids(served) if served else st.just("")
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if operation.body else [GenerationMode.POSITIVE]
    sent: list[int] = []
    for mode in modes:
        # three positive bodies in four are made servable (see servable); negative ones go as generated
        completed = st.sampled_from((True, True, True, False)) if mode == GenerationMode.POSITIVE else st.just(False)

        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],  # no shrinking: bounded time, the failure is printed as is
            suppress_health_check=list(HealthCheck),
        )
        @given(case=cases(operation, mode, models), model=models, complete=completed)
        def fuzz(case: FuzzCase, model: str, complete: bool) -> None:
            if over_budget(label, len(sent)):
                return
            if complete and isinstance(case.body, dict):
                servable(case.body, label)
            if served and isinstance(case.body, dict) and isinstance(case.body.get("model"), str):
                case.body["model"] = model
            if "model" in (case.path_parameters or {}):  # as clients send it: the slash unescaped
                case.path_parameters["model"] = unquote(case.path_parameters["model"])
            response = case.call_and_validate(base_url=base_url, checks=CHECKS, timeout=60)
            sent.append(response.status_code)

        fuzz()
    print(f"{label}: {len(sent)} requests, statuses {dict(sorted(Counter(sent).items()))}")
    least = MIN_SENT if operation.body or served else 1  # nothing to vary in a GET without parameters
    assert len(sent) >= least, f"{label}: only {len(sent)} requests sent within the {BUDGET_S} s budget"
    if served and label not in NEVER_SERVABLE:  # the fuzz reached the model: some request was answered
        assert any(200 <= status < 300 for status in sent), f"{label}: no request was served: {Counter(sent)}"


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [  # what the fuzz found: numbers the spec's types refuse were accepted, and one that broke sampling
        ("/v1/completions", {"model": "test/tiny-llm", "prompt": "hi", "max_tokens": 2, "seed": False}, 400),
        ("/v1/rerank", {"model": "test/tiny-reranker", "query": "q", "documents": ["a", "b"], "top_n": "1"}, 400),
        ("/v1/generate/test/tiny-llm", {"prompt": "hi", "max_new_tokens": True}, 400),
        ("/v1/generate/test/tiny-llm", {"prompt": "hi", "max_new_tokens": 2.0}, 200),  # JSON Schema's integer
        ("/v1/completions", {"model": "test/tiny-llm", "prompt": "hi", "max_tokens": 2, "top_p": 5e-324}, 200),
    ],
)
def test_found_by_the_fuzz(base_url: str, path: str, body: dict[str, Any], status: int) -> None:
    r = httpx.post(f"{base_url}{path}", json=body, timeout=60)
    assert r.status_code == status, r.text
    if status == 400:
        assert r.headers["x-sie-error-code"] == "INVALID_INPUT"
