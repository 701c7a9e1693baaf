"""A task on the gateway answers as on the server: the gateway runs the task's steps as queue work for its
worker (the same route and the same task code over the gateway's service), on HTTP and on its ``/mcp``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.catalog import MINILM, SMOLLM, copy_real, tiny_gliner, write_config
from tests.helpers.cluster import Gateway, Nats, worker
from tests.helpers.invoice import INVOICE_PASSAGES
from tests.helpers.server import ServerProcess
from tests.server.test_mcp import answer, mcp_post, over_http
from tests.tasks.helpers import MODELS, QUESTION
from tests.tasks.test_task_tools import REDACT, TASKS, http_task

QA = {
    "documents": [{"text": INVOICE_PASSAGES[name]} for name in ("travel", "invoice", "cafeteria")],
    "questions": [QUESTION],
    "models": MODELS,
    "max_new_tokens": 24,  # a short answer: the tests check the passages, not the prose
}


def without_scores(found: dict[str, Any]) -> dict[str, Any]:
    answers = [{**a, "passages": [{**p, "score": None} for p in a["passages"]]} for a in found["answers"]]
    return {**found, "answers": answers}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("tasks-cluster")
    catalog = folder / "catalog"
    catalog.mkdir()
    copy_real(catalog, MINILM)
    copy_real(catalog, SMOLLM)
    write_config(catalog, tiny_gliner("test/tiny-gliner", tiny_models["gliner"]))
    nats = Nats(folder / "jetstream")
    procs: list[ServerProcess] = []
    try:
        # fp32 as the shared server runs (tests/conftest.py), so both answer from the same numbers
        procs.append(worker(catalog, nats.url, folder / "worker.log", "--cpu-precision", "fp32"))
        procs.append(Gateway(catalog, nats.url, log=folder / "gateway.log"))
        for proc in procs:
            proc.wait_ready()
        yield procs[-1]
    finally:
        for proc in reversed(procs):
            proc.stop()
        nats.stop()


async def test_a_task_on_the_gateway_answers_as_on_the_server(gateway: ServerProcess, base_url: str) -> None:
    on_gateway = http_task(gateway.url, "answer_questions", QA)
    on_server = http_task(base_url, "answer_questions", QA)
    assert without_scores(on_gateway) == without_scores(on_server)
    for a, b in zip(on_gateway["answers"][0]["passages"], on_server["answers"][0]["passages"], strict=True):
        assert a["score"] == pytest.approx(b["score"], abs=1e-4)
    best = on_gateway["answers"][0]["passages"][0]
    assert best["document"] == 1 and best["start"] == 0 and "4,250.00 EUR" in best["text"]
    async with over_http(gateway.url) as session:
        redacted = answer(await session.call_tool("redact_pii", REDACT))
    assert redacted == http_task(base_url, "redact_pii", REDACT)


async def test_entities_on_the_gateway_are_the_server_s(gateway: ServerProcess, base_url: str) -> None:
    text = " ".join(INVOICE_PASSAGES.values())  # several windows of the tiny GLiNER
    body = {"text": text, "labels": ["company", "date"], "threshold": 0.0, "models": {"ner": "test/tiny-gliner"}}
    on_gateway = http_task(gateway.url, "extract_entities", body)
    on_server = http_task(base_url, "extract_entities", body)
    assert on_gateway["windows"] == on_server["windows"] > 1 and on_gateway["counts"] == on_server["counts"]
    spans = [(e["start"], e["end"], e["label"], e["text"]) for e in on_gateway["entities"]]
    assert spans == [(e["start"], e["end"], e["label"], e["text"]) for e in on_server["entities"]] and spans
    async with over_http(gateway.url) as session:
        over_mcp = answer(await session.call_tool("extract_entities", body))
    assert [(e["start"], e["end"]) for e in over_mcp["entities"]] == [s[:2] for s in spans]


def test_the_gateway_s_spec_has_the_tasks_and_its_mcp_refuses_a_foreign_host(gateway: ServerProcess) -> None:
    paths = httpx.get(f"{gateway.url}/openapi.json", timeout=30).json()["paths"]
    for name in TASKS:
        post = paths[f"/v1/tasks/{name}"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("Request")
        assert "$ref" in post["responses"]["200"]["content"]["application/json"]["schema"]
    # DNS rebinding, as on the server (tests/server/test_mcp.py): another name re-pointed at the gateway
    port = gateway.url.rsplit(":", 1)[1]
    rebound = mcp_post(gateway.url, {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"})
    cross_origin = mcp_post(gateway.url, {"Origin": "http://attacker.example"})
    assert rebound.status_code == 421 and "Host" in rebound.text
    assert cross_origin.status_code == 403 and "Origin" in cross_origin.text
    listed = mcp_post(gateway.url, {"Origin": f"http://127.0.0.1:{port}"})
    assert listed.status_code == 200 and {t["name"] for t in listed.json()["result"]["tools"]} >= TASKS
