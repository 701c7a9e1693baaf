"""Constrained generation (``grammar`` on /v1/generate, OpenAI's ``response_format``): on the packaged
SmolLM2 (llama.cpp) and a tiny random byte-level model (torch), every answer that says it stopped is
valid by construction, sampled or greedy; a bad grammar is a 400 for its own request only."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jsonschema
import pytest
from openai import OpenAI

from tests.conftest import TARGET
from tests.helpers.catalog import SMOLLM

TINY = "test/tiny-bpe-llm"  # torch, byte-level BPE: random weights, so only the grammar shapes its output
INVOICE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "issuer": {"type": "string", "maxLength": 12},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "total": {"type": "integer", "minimum": 0, "maximum": 9999},
        "paid": {"type": "boolean"},
        "lines": {
            "type": "array",
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    "item": {"type": "string", "maxLength": 8},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                },
                "required": ["item", "qty"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["issuer", "currency", "total", "paid", "lines"],
    "additionalProperties": False,
}
# small but not trivial (nested object, array, enums, bounded integers): about 25 tokens an answer
COMPACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"enum": ["invoice", "receipt", "quote"]},
        "total": {"type": "integer", "minimum": 0, "maximum": 999},
        "paid": {"type": "boolean"},
        "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["urgent", "tax", "eu"]}},
        "due": {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1, "maximum": 90}},
                "required": ["days"], "additionalProperties": False},
    },
    "required": ["kind", "total", "paid", "tags", "due"],
    "additionalProperties": False,
}  # fmt: skip
ASK = [{"role": "user", "content": "Extract the invoice: ACME Corp billed 420 EUR for 2 chairs, unpaid."}]


def generate(base_url: str, model: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/generate/{model}", json=body, timeout=600)


def schema_body(seed: int, schema: dict[str, Any] = INVOICE, **extra: Any) -> dict[str, Any]:
    return {"messages": ASK, "max_new_tokens": 160, "temperature": 1.0, "seed": seed,
            "grammar": {"json_schema": schema}, **extra}  # fmt: skip


# 200 seeds on each model, in four tests of 50 on SmolLM2 (each well inside the per-test timeout); the
# gateway pass runs one group of 24 on each: the same decode loop behind one more hop
GROUPS = [(SMOLLM, range(k, k + 50)) for k in range(0, 200, 50)] if TARGET != "gateway" else [(SMOLLM, range(24))]
TINY_SEEDS = range(200) if TARGET != "gateway" else range(24)


@pytest.mark.parametrize(("model", "seeds"), [*GROUPS, (TINY, TINY_SEEDS)])
def test_200_sampled_answers_under_a_nested_schema_all_validate(base_url: str, model: str, seeds: range) -> None:
    count = len(seeds)
    with ThreadPoolExecutor(32) as pool:  # concurrent: constrained rows decode in one batch
        answers = list(pool.map(lambda k: generate(base_url, model, schema_body(k, COMPACT)), seeds))
    reasons = []
    for r in answers:
        assert r.status_code == 200, r.text
        answer = r.json()
        reasons.append(answer["finish_reason"])
        if answer["finish_reason"] == "stop":
            found = json.loads(answer["text"])
            jsonschema.validate(found, COMPACT)
            assert list(found) == list(COMPACT["properties"])  # in the schema's order
    assert reasons.count("stop") == count, f"some answers ran out of tokens: {reasons}"


@pytest.mark.parametrize("model", [SMOLLM, TINY])
def test_a_regex_and_an_ebnf_grammar_shape_the_whole_answer(base_url: str, model: str) -> None:
    pattern = r"INV-[0-9]{4}-[A-Z]{2}"
    grammars = [({"regex": pattern}, pattern), ({"ebnf": 'start: "safe" | "unsafe" | "unsure"'}, r"safe|unsafe|unsure"),
                ({"ebnf": 'root ::= "yes" | "no"'}, r"yes|no")]  # fmt: skip
    for grammar, whole in grammars:
        for seed in range(3):
            body = {"prompt": "Answer:", "max_new_tokens": 40, "temperature": 1.0, "seed": seed, "grammar": grammar}
            r = generate(base_url, model, body)
            assert r.status_code == 200, r.text
            assert re.fullmatch(whole, r.json()["text"]), (grammar, r.json())
            assert r.json()["finish_reason"] == "stop"


def test_a_batch_mixing_constrained_free_and_invalid_requests_answers_each(base_url: str) -> None:
    bodies = [
        schema_body(1),
        {"prompt": "Once upon a time", "max_new_tokens": 12, "temperature": 0},
        {"prompt": "x", "grammar": {"json_schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}},
        {"prompt": "x", "grammar": {"regex": "[a-z"}},
        {"prompt": "x", "grammar": {"ebnf": "start: undefined_rule"}},
        schema_body(2, temperature=0.0),
    ]
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda b: generate(base_url, SMOLLM, b), bodies))
    ok1, free, bad_schema, bad_regex, bad_ebnf, ok2 = answers
    for ok in (ok1, ok2):
        assert ok.status_code == 200, ok.text
        jsonschema.validate(json.loads(ok.json()["text"]), INVOICE)
    assert free.status_code == 200 and free.json()["text"] and free.json()["finish_reason"] == "length"
    for bad in (bad_schema, bad_regex, bad_ebnf):
        assert bad.status_code == 400, bad.text
        assert bad.json()["detail"]["code"] == "INVALID_INPUT"
    assert "strin" in bad_schema.json()["detail"]["message"]
    assert "regex" in bad_regex.json()["detail"]["message"]
    assert "undefined_rule" in bad_ebnf.json()["detail"]["message"]


def test_an_answer_cut_by_max_new_tokens_says_length_and_is_not_passed_off_as_valid(base_url: str) -> None:
    r = generate(base_url, SMOLLM, schema_body(0, max_new_tokens=5))
    assert r.status_code == 200, r.text
    assert r.json()["finish_reason"] == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.json()["text"])


@pytest.mark.parametrize(
    ("grammar", "fragment"),
    [
        ({}, "exactly one of json_schema, regex or ebnf"),
        ({"regex": "a", "ebnf": "start: a"}, "exactly one of json_schema, regex or ebnf"),
        ({"json_schema": "not a schema"}, "json_schema"),
        ({"regex": "a", "flavour": "pcre"}, "flavour"),
    ],
)
def test_a_malformed_grammar_field_is_a_400_naming_it(base_url: str, grammar: dict[str, Any], fragment: str) -> None:
    r = generate(base_url, SMOLLM, {"prompt": "x", "grammar": grammar})
    assert r.status_code == 400 and fragment in r.text, r.text


def test_the_official_openai_client_gets_json_from_response_format(base_url: str) -> None:
    client = OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    schema_format = {"type": "json_schema", "json_schema": {"name": "invoice", "schema": INVOICE, "strict": True}}
    chat = client.chat.completions.create(
        model=SMOLLM,
        messages=ASK,
        max_tokens=160,
        temperature=0,
        response_format=schema_format,  # type: ignore[arg-type]
    )
    assert chat.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(chat.choices[0].message.content or ""), INVOICE)
    anything = client.chat.completions.create(
        model=SMOLLM, messages=ASK, max_tokens=80, temperature=0, response_format={"type": "json_object"}
    )
    if anything.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(anything.choices[0].message.content or ""), dict)
    streamed = client.chat.completions.create(
        model=SMOLLM,
        messages=ASK,
        max_tokens=160,
        temperature=0,
        response_format=schema_format,
        stream=True,  # type: ignore[arg-type]
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in streamed if chunk.choices)
    assert json.loads(text) == json.loads(chat.choices[0].message.content or "")  # greedy: the same answer
