"""GLiNER2 extraction (adapter gliner2) on a real server with a tiny random GLiNER2.

What a GLiNER2 user relies on: labels give spans as GLiNER's do; ``params.schema`` answers every
entity type, classification, structure and relation it declares, in the declared shape, with
character offsets into the item's text; a long text is read in windows whose findings map back onto
it; a malformed schema is a 400 naming the field. Random weights: shapes, types and offsets, not content.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.helpers.server import ServerProcess
from tests.helpers.tiny_gliner2 import MODEL, SCHEMA, TEXT, gliner2_catalog


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    catalog = gliner2_catalog(tmp_path_factory.mktemp("gliner2"))
    logs = tmp_path_factory.mktemp("gliner2-logs")
    limits = ["--max-text-bytes", "8192"]
    proc = ServerProcess(catalog, "--offline", "--threads", "1", *limits, log=logs / "server.log")
    proc.wait_ready()
    try:
        yield proc.url
    finally:
        proc.stop()


def extract(url: str, body: dict[str, Any], model: str = MODEL) -> httpx.Response:
    return httpx.post(f"{url}/v1/extract/{model}", json=body, timeout=120)


def schema_answer(url: str, text: str, schema: dict[str, Any]) -> dict[str, Any]:
    r = extract(url, {"items": [{"id": "doc", "text": text}], "params": {"schema": schema, "threshold": 0.0}})
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    assert item["id"] == "doc"
    return dict(item)


def assert_span(value: dict[str, Any], text: str) -> None:
    assert text[value["start"] : value["end"]] == value["text"]
    assert 0.0 <= value["score"] <= 1.0


def test_labels_give_spans_at_offsets_of_the_text(url: str) -> None:
    body = {"items": [{"text": TEXT}], "params": {"labels": ["company", "amount"], "threshold": 0.0}}
    r = extract(url, body)
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    assert item["entities"] and "schema_result" not in item
    for entity in item["entities"]:
        assert TEXT[entity["start"] : entity["end"]] == entity["text"]
        assert entity["label"] in ("company", "amount") and entity["bbox"] is None
        assert 0.0 <= entity["score"] <= 1.0


def test_schema_answers_every_declared_name_in_its_shape(url: str) -> None:
    item = schema_answer(url, TEXT, SCHEMA)
    result = item["schema_result"]
    assert set(result["entities"]) == {"company", "date"}
    assert any(result["entities"].values())  # at threshold 0 a random model proposes spans
    for spans in result["entities"].values():
        for span in spans:
            assert_span(span, TEXT)
    # the flat entities are the schema's entity spans, labelled with their type
    flat = {(e["label"], e["start"], e["end"]) for e in item["entities"]}
    assert flat == {(label, s["start"], s["end"]) for label, spans in result["entities"].items() for s in spans}

    assert set(result["classifications"]) == {"kind", "topics"}
    [kind] = result["classifications"]["kind"]  # single-label: exactly one
    assert kind["label"] in ("invoice", "receipt", "letter") and 0.0 <= kind["score"] <= 1.0
    assert {t["label"] for t in result["classifications"]["topics"]} <= {"money", "time", "food"}

    assert set(result["structures"]) == {"bill"} and result["structures"]["bill"]
    for instance in result["structures"]["bill"]:
        assert set(instance) == {"total", "parties", "currency"}
        assert len(instance["total"]) <= 1 and len(instance["currency"]) <= 1  # dtype str: the best value
        for value in instance["total"] + instance["parties"]:
            assert_span(value, TEXT)
        for value in instance["currency"]:  # a choice, not a span
            assert value["text"] in ("EUR", "USD") and value["start"] is None and value["end"] is None

    assert set(result["relations"]) == {"billed_by"}
    for pair in result["relations"]["billed_by"]:
        assert_span(pair["head"], TEXT)
        assert_span(pair["tail"], TEXT)

    # the same answer in the item's own fields, as SIE 0.10.1 gives it (schema_result is the alias)
    assert item["relations"] == [
        {"head": r["head"]["text"], "tail": r["tail"]["text"], "relation": "billed_by",
         "score": min(r["head"]["score"], r["tail"]["score"])}
        for r in result["relations"]["billed_by"]
    ]  # fmt: skip
    labels = [c for name in ("kind", "topics") for c in result["classifications"][name]]
    assert item["classifications"] == labels
    assert item["data"]["classifications"] == result["classifications"]
    assert item["data"]["structures"] == result["structures"]
    assert item["objects"] == []


def test_long_text_is_windowed_and_offsets_map_back(url: str) -> None:
    long_text = " ".join(f"word{i} Acme" for i in range(150))  # 300 words; the tiny model reads 64 at a time
    schema = {"entities": ["company"], "classifications": {"kind": {"labels": ["invoice", "letter"]}}}
    result = schema_answer(url, long_text, schema)["schema_result"]
    spans = result["entities"]["company"]
    assert max(s["end"] for s in spans) > len(long_text) // 2  # found in later windows
    for span in spans:
        assert_span(span, long_text)
    keys = [(s["start"], s["end"]) for s in spans]
    assert len(keys) == len(set(keys))  # overlapping windows do not duplicate spans
    assert len(result["classifications"]["kind"]) == 1  # one answer for the text, not one per window


def test_requests_with_different_schemas_each_get_their_own_shape(url: str) -> None:
    """Items with different schemas never share a batch: each answer has its own request's names."""
    schemas = [{"entities": [f"type{k}"], "structures": {f"record{k}": {f"field{k}": {}}}} for k in range(4)]
    with ThreadPoolExecutor(4) as pool:
        items = list(pool.map(lambda s: schema_answer(url, TEXT, s), schemas))
    for k, item in enumerate(items):
        result = item["schema_result"]
        assert set(result["entities"]) == {f"type{k}"} and set(result["structures"]) == {f"record{k}"}
        assert all(set(i) == {f"field{k}"} for i in result["structures"][f"record{k}"])


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"schema": {}}, "params.schema: Value error, set at least one of"),
        (
            {"schema": {"structures": {"bill": {"total": {"dtype": "int"}}}}},
            "params.schema.structures.bill.total.dtype",
        ),
        ({"schema": {"classifications": {"kind": {"labels": ["only"]}}}}, "params.schema.classifications.kind.labels"),
        ({"schema": {"entities": ["a"], "colour": "red"}}, "params.schema.colour"),
        ({"schema": {"classifications": {"entities": {"labels": ["a", "b"]}}}}, "'entities' is reserved"),
        (
            {"schema": {"entities": list("abcdef")}},
            "params.schema.entities: 6 names; model test/tiny-gliner2 takes at most 5",
        ),
        ({"schema": {"entities": ["a"]}, "labels": ["b"]}, "params.labels or params.schema"),
    ],
)
def test_bad_schema_is_a_400_naming_the_field(url: str, params: dict[str, Any], fragment: str) -> None:
    r = extract(url, {"items": [{"text": TEXT}], "params": params})
    assert r.status_code == 400 and r.headers["x-sie-error-code"] == "INVALID_INPUT", r.text
    assert fragment in r.json()["detail"]["message"]


def test_text_over_the_byte_limit_is_refused_as_for_gliner(url: str) -> None:
    r = extract(url, {"items": [{"text": "Acme " * 2000}], "params": {"schema": {"entities": ["company"]}}})
    assert r.status_code == 413 and r.headers["x-sie-error-code"] == "INVALID_INPUT", r.text
    assert "items[0]" in r.json()["detail"]["message"] and "the limit is 8192" in r.json()["detail"]["message"]
