"""GLiNER2 schema extraction through both clients and both wires, against a real server.

What an SDK user relies on: ``extract(schema=...)`` answers each item's ``schema_result`` under the
schema's own names and in its shapes, with offsets into the item's text; ``labels=`` answers keep
``schema_result`` None; neither or both of labels and schema is a ValueError before anything is sent;
a schema the server refuses is an ``InvalidInputError`` naming the field. Random weights: shapes, not content.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from types import MappingProxyType
from typing import Any

import httpx
import pytest
from sdk_fakes import Api

from sie_sdk import InvalidInputError, SIEAsyncClient, SIEClient
from sie_sdk.types import ExtractSchema, SchemaSpan, Wire
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_gliner2 import MODEL, SCHEMA, TEXT, gliner2_catalog


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    catalog = gliner2_catalog(tmp_path_factory.mktemp("sdk-gliner2"))
    log = tmp_path_factory.mktemp("sdk-gliner2-logs") / "server.log"
    proc = ServerProcess(catalog, "--offline", "--threads", "1", log=log)
    proc.wait_ready()
    try:
        yield proc.url
    finally:
        proc.stop()


@pytest.fixture(params=["msgpack", "json"])
def wire(request: pytest.FixtureRequest) -> Wire:
    return "json" if request.param == "json" else "msgpack"


@pytest.fixture
async def live(mode: str, wire: Wire, server_url: str) -> AsyncIterator[Api]:
    client = SIEClient if mode == "sync" else SIEAsyncClient
    api = Api(client(server_url, wire=wire, timeout=120))
    yield api
    await api.close()


def assert_span(span: SchemaSpan, text: str) -> None:
    assert span["start"] is not None and span["end"] is not None
    assert text[span["start"] : span["end"]] == span["text"]
    assert isinstance(span["score"], float) and 0.0 <= span["score"] <= 1.0


async def test_schema_result_has_the_requested_shape(live: Api) -> None:
    result = await live.extract(MODEL, {"id": "doc", "text": TEXT}, schema=SCHEMA, threshold=0.0)
    assert result["id"] == "doc" and result["model"] == MODEL
    answer = result["schema_result"]
    assert answer is not None

    assert set(answer["entities"]) == {"company", "date"}
    assert any(answer["entities"].values())  # at threshold 0 a random model proposes spans
    for spans in answer["entities"].values():
        for span in spans:
            assert_span(span, TEXT)
    flat = {(e["label"], e["start"], e["end"]) for e in result["entities"]}
    assert flat == {(label, s["start"], s["end"]) for label, spans in answer["entities"].items() for s in spans}

    assert set(answer["classifications"]) == {"kind", "topics"}
    [kind] = answer["classifications"]["kind"]  # single-label: exactly one
    assert kind["label"] in ("invoice", "receipt", "letter") and isinstance(kind["score"], float)
    assert {t["label"] for t in answer["classifications"]["topics"]} <= {"money", "time", "food"}

    assert set(answer["structures"]) == {"bill"} and answer["structures"]["bill"]
    for instance in answer["structures"]["bill"]:
        assert set(instance) == {"total", "parties", "currency"}
        assert len(instance["total"]) <= 1 and len(instance["currency"]) <= 1  # dtype str: the best value
        for span in instance["total"] + instance["parties"]:
            assert_span(span, TEXT)
        for choice in instance["currency"]:  # a choice, not a span
            assert choice["text"] in ("EUR", "USD") and choice["start"] is None and choice["end"] is None

    assert set(answer["relations"]) == {"billed_by"}
    for pair in answer["relations"]["billed_by"]:
        assert_span(pair["head"], TEXT)
        assert_span(pair["tail"], TEXT)


async def test_a_list_of_items_gets_one_schema_result_each(live: Api) -> None:
    texts = ["Acme Corp billed Globex on 3 May.", "A letter from Initech."]
    # any Mapping and tuples are accepted, and sent as objects and arrays
    schema = MappingProxyType({"entities": ("company",), "classifications": {"kind": {"labels": ("bill", "note")}}})
    results = await live.extract(MODEL, texts, schema=schema, threshold=0.0)
    assert [r["id"] for r in results] == ["item-0", "item-1"]
    for result, text in zip(results, texts, strict=True):
        answer = result["schema_result"]
        assert answer is not None
        assert set(answer["entities"]) == {"company"} and set(answer["classifications"]) == {"kind"}
        assert answer["structures"] == {} and answer["relations"] == {}
        for span in answer["entities"]["company"]:
            assert_span(span, text)
        assert len(answer["classifications"]["kind"]) == 1


async def test_labels_answer_has_no_schema_result(live: Api) -> None:
    result = await live.extract(MODEL, TEXT, labels=["company"], threshold=0.0)
    assert result["schema_result"] is None
    assert result["entities"] and all(e["label"] == "company" for e in result["entities"])


async def test_a_text_extractor_asked_without_labels_says_it_needs_them(live: Api) -> None:
    with pytest.raises(InvalidInputError, match=r"params\.labels is required"):
        await live.extract(MODEL, TEXT)  # neither labels nor schema


async def test_a_schema_the_server_refuses_names_the_field(live: Api) -> None:
    bad: ExtractSchema = {"classifications": {"kind": {"labels": ["only"]}}}
    with pytest.raises(InvalidInputError, match=re.escape("params.schema.classifications.kind.labels")):
        await live.extract(MODEL, TEXT, schema=bad)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"labels": ["company"], "schema": {"entities": ["company"]}}, ValueError, "not both"),
        ({"schema": {}}, ValueError, "at least one of entities"),
        ({"schema": ["company"]}, TypeError, "schema must be a mapping"),
        ({"labels": "company"}, TypeError, "not one string"),
    ],
)
async def test_labels_and_schema_together_or_malformed_are_refused_before_any_request(
    mode: str, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    if mode == "sync":
        api = Api(SIEClient("http://sie.test", transport=httpx.MockTransport(record)))
    else:
        api = Api(SIEAsyncClient("http://sie.test", transport=httpx.MockTransport(record)))
    try:
        with pytest.raises(error, match=message):
            await api.extract(MODEL, TEXT, **kwargs)
    finally:
        await api.close()
    assert sent == []
