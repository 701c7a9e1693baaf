"""The tasks as MCP tools beside the primitives, through the official ``mcp`` client: on streamable HTTP
at ``/mcp`` (the task runs in the server's process) and on stdio (``sie-server mcp --url``: one
``POST /v1/tasks/{task}`` through the SDK); the same answers as the HTTP route."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.test_mcp import answer, over_http, over_stdio
from tests.tasks.helpers import MODELS, QUESTION, three_documents

TASKS = {
    "docs_to_markdown",
    "answer_questions",
    "redact_pii",
    "extract_structured",
    "summarize_document",
    "extract_entities",
    "describe_image",
}
REDACT = {
    "text": "Write to Dana Scott at dana@example.org or +44 20 7946 0958; Dana Scott answers.",
    "known": {"person": ["Dana Scott"]},
    "labels": ["person"],
    "threshold": 1.0,
    "models": {"ner": "test/tiny-gliner"},
}
QA = {"documents": three_documents(), "questions": [QUESTION], "models": MODELS, "max_new_tokens": 24}
REDACTED = "Write to [PERSON_1] at [EMAIL_1] or [PHONE_NUMBER_1]; [PERSON_1] answers."


def http_task(base_url: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{base_url}/v1/tasks/{name}", json=body, timeout=300)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


async def test_task_tools_are_listed_with_schemas_and_answer_as_the_route(base_url: str) -> None:
    async with over_http(base_url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        redacted = answer(await session.call_tool("redact_pii", REDACT))
        qa = answer(await session.call_tool("answer_questions", QA))
        refused = await session.call_tool("answer_questions", {"documents": [{"text": "x"}], "questions": ["q"] * 9})
    assert set(tools) >= TASKS
    qa_schema = tools["answer_questions"].input_schema
    assert set(qa_schema["required"]) == {"documents", "questions"} and qa_schema["additionalProperties"] is False
    assert "answers" in tools["answer_questions"].output_schema["properties"]
    assert redacted["redacted_text"] == REDACTED and redacted["counts"] == {"PERSON": 1, "EMAIL": 1, "PHONE_NUMBER": 1}
    assert qa == http_task(base_url, "answer_questions", QA)
    assert qa["answers"][0]["passages"][0]["document"] == 0
    assert refused.is_error and refused.structured_content is not None
    assert (
        refused.structured_content["code"] == "INVALID_INPUT" and "9 questions" in refused.structured_content["message"]
    )


async def test_task_tools_on_stdio_reach_the_running_server(base_url: str) -> None:
    async with over_stdio(base_url) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        redacted = answer(await session.call_tool("redact_pii", REDACT))
        missing = await session.call_tool(
            "answer_questions", {"documents": [{"text": "Acme sells widgets."}], "questions": ["Who sells widgets?"]}
        )
    assert names >= TASKS
    assert redacted == http_task(base_url, "redact_pii", REDACT) and redacted["redacted_text"] == REDACTED
    assert missing.is_error and missing.structured_content is not None  # the default reranker is not cached
    assert missing.structured_content["code"] == "MODEL_LOAD_FAILED"
    assert "sie-server models pull cross-encoder/ms-marco-MiniLM-L-6-v2" in missing.structured_content["message"]
