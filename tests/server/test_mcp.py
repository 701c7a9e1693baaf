"""The MCP server, through the official ``mcp`` client: streamable HTTP at ``/mcp`` on the shared
server (and on the gateway in the gateway pass), and ``sie-server mcp --url`` on stdio.

Encode gives /v1/encode's vectors, score ranks the relevant document first, generate answers with
token counts, extract reads entities and documents; a server error is a tool error (``isError``)
with the server's code, and the session goes on; ``/mcp`` takes the same API keys as ``/v1/``.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import numpy as np
import pytest
from mcp import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from sie_server.tasks.registry import TASKS
from tests.helpers.catalog import DOCLING, MINILM, OCR, SMOLLM, tiny_embedder, write_config
from tests.helpers.documents import INVOICE_LINES, png, text_image
from tests.helpers.server import ServerProcess

PRIMITIVES = {"encode", "score", "extract", "generate", "list_models"}
TOOLS = PRIMITIVES | set(TASKS)  # the tasks beside them (tests/tasks)
GLINER = "test/tiny-gliner"
CLIP = "test/tiny-clip"
TINY_BPE = "test/tiny-bpe-llm"  # torch, random weights: only the grammar shapes its output
TEXTS = ["A cat sat on the mat.", "Stock markets fell sharply on Monday."]
SIE_SERVER = str(Path(sys.executable).with_name("sie-server"))


@asynccontextmanager
async def over_http(
    url: str, key: str | None = None, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    headers = {**(headers or {}), **({"Authorization": f"Bearer {key}"} if key else {})}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def over_stdio(url: str) -> AsyncIterator[ClientSession]:
    command = StdioServerParameters(command=SIE_SERVER, args=["mcp", "--url", url], env={"SIE_API_KEY": ""})
    async with stdio_client(command) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def answer(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    found: dict[str, Any] = result.structured_content
    assert found is not None
    return found


def v1_dense(base_url: str, texts: list[str]) -> np.ndarray:
    r = httpx.post(f"{base_url}/v1/encode/{MINILM}", json={"items": [{"text": t} for t in texts]}, timeout=120)
    assert r.status_code == 200, r.text
    return np.array([item["dense"]["values"] for item in r.json()["items"]], dtype=np.float32)


async def test_the_five_tools_have_typed_input_and_output_schemas(base_url: str) -> None:
    async with over_http(base_url) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    encode = tools["encode"].input_schema
    assert set(encode["required"]) == {"model"}  # and exactly one of texts or images
    assert encode["properties"]["texts"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}, "minItems": 1}
    assert {"texts", "images"} <= set(encode["properties"])
    assert {"options", "blocks"} <= set(tools["extract"].input_schema["properties"])
    assert encode["additionalProperties"] is False  # a misspelt argument is refused
    generate = tools["generate"].input_schema["properties"]
    assert {"grammar", "response_format"} <= set(generate)
    assert generate["max_new_tokens"]["type"] == "integer" and generate["max_new_tokens"]["minimum"] == 1
    assert tools["list_models"].input_schema["properties"]["task"]["anyOf"][0]["enum"] == [
        "encode", "score", "extract", "generate"
    ]  # fmt: skip
    assert all(tool.output_schema and tool.output_schema["type"] == "object" for tool in tools.values())


async def test_the_high_level_client_negotiates_and_calls(base_url: str) -> None:
    async with Client(f"{base_url}/mcp") as client:  # probes server/discover, else the initialize handshake
        names = {tool.name for tool in (await client.list_tools()).tools}
        listed = answer(await client.call_tool("list_models", {"task": "encode"}))["models"]
        protocol = client.protocol_version
    assert names == TOOLS and protocol
    minilm = next(m for m in listed if m["id"] == MINILM)
    assert minilm["dims"]["dense"] == 384 and "text" in minilm["inputs"]


async def test_encode_gives_the_unit_vectors_of_v1_encode(base_url: str) -> None:
    async with over_http(base_url) as session:
        found = answer(await session.call_tool("encode", {"model": MINILM, "texts": TEXTS}))
    assert found["model"] == MINILM
    vectors = np.array([v["dense"] for v in found["vectors"]], dtype=np.float32)
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors, v1_dense(base_url, TEXTS), atol=1e-6)


async def test_score_ranks_the_relevant_document_first(base_url: str) -> None:
    documents = ["Bananas are rich in potassium.", "Paris is the capital of France.", "The match ended in a draw."]
    query = {"model": MINILM, "query": "What is the capital of France?", "documents": documents}
    async with over_http(base_url) as session:
        ranked = answer(await session.call_tool("score", query))["results"]
        top = answer(await session.call_tool("score", {**query, "top_n": 1}))["results"]
    assert [r["rank"] for r in ranked] == [0, 1, 2] and ranked[0]["index"] == 1
    assert sorted(r["index"] for r in ranked) == [0, 1, 2]
    assert ranked[0]["score"] > ranked[1]["score"] >= ranked[2]["score"]
    assert top == ranked[:1]


async def test_generate_returns_text_and_token_counts(base_url: str) -> None:
    chat = {"model": SMOLLM, "messages": [{"role": "user", "content": "Name a colour."}], "max_new_tokens": 6}
    async with over_http(base_url) as session:
        found = answer(await session.call_tool("generate", chat))
    usage = found["usage"]
    assert found["model"] == SMOLLM and found["text"].strip()
    assert 1 <= usage["completion_tokens"] <= 6 and usage["prompt_tokens"] > 3
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert found["finish_reason"] in ("length", "stop")


async def test_extract_reads_entities_and_documents(base_url: str) -> None:
    text = "Invoice from Acme Corp: total due 4,250.00 EUR."
    html = b"<html><body><h1>Price list</h1><p>Widgets cost 4.00 EUR.</p></body></html>"
    document = {"data": base64.b64encode(html).decode(), "format": "html"}
    async with over_http(base_url) as session:
        spans = answer(
            await session.call_tool(
                "extract", {"model": GLINER, "text": text, "labels": ["company", "amount"], "threshold": 0.0}
            )
        )
        page = answer(await session.call_tool("extract", {"model": DOCLING, "document": document, "blocks": True}))
        once = answer(await session.call_tool("extract", {"model": DOCLING, "document": document}))
        broken = await session.call_tool(
            "extract", {"model": DOCLING, "document": {"data": base64.b64encode(b"%PDF-1.7 junk").decode()}}
        )
    assert spans["entities"]
    for entity in spans["entities"]:
        assert text[entity["start"] : entity["end"]] == entity["text"] and entity["label"] in ("company", "amount")
    assert [(e["text"], e["label"]) for e in page["entities"]] == [
        ("Price list", "heading"),
        ("Widgets cost 4.00 EUR.", "paragraph"),
    ]
    assert "Price list" in page["data"]["markdown"] and "Price list" in page["data"]["text"]
    # by default a document's text comes once: the markdown, without the plain text or one entity per block
    assert once["entities"] == [] and "text" not in once["data"]
    assert once["data"]["markdown"] == page["data"]["markdown"]
    assert broken.is_error and broken.structured_content is not None
    assert broken.structured_content["code"] == "INVALID_INPUT"  # the item's own error, as /v1/extract gives it


async def test_extract_reads_an_image(base_url: str) -> None:
    image = {"data": base64.b64encode(png(text_image(INVOICE_LINES))).decode(), "format": "png"}
    async with over_http(base_url) as session:
        read = answer(await session.call_tool("extract", {"model": OCR, "image": image}))
    assert [e["text"] for e in read["entities"]] == INVOICE_LINES  # the real PP-OCRv6, one line each
    assert all(len(e["bbox"]) == 4 and "start" not in e for e in read["entities"])  # None is left out
    assert read["data"]["text"] == "\n".join(INVOICE_LINES)


async def test_server_errors_are_tool_errors_and_the_session_goes_on(base_url: str) -> None:
    async with over_http(base_url) as session:
        unknown = await session.call_tool("encode", {"model": "no/such-model", "texts": ["x"]})
        wrong_task = await session.call_tool("generate", {"model": MINILM, "prompt": "hi"})
        empty = await session.call_tool("encode", {"model": MINILM, "texts": []})
        with pytest.raises(MCPError):
            await session.call_tool("no_such_tool", {})
        listed = answer(await session.call_tool("list_models", {"task": "generate"}))["models"]
    for result, code in ((unknown, "MODEL_NOT_FOUND"), (wrong_task, "INVALID_INPUT"), (empty, "INVALID_INPUT")):
        assert result.is_error and result.structured_content is not None
        assert result.structured_content["code"] == code
        text = result.content[0]
        assert isinstance(text, types.TextContent) and text.text.startswith(f"{code}: ")
    assert "no/such-model" in unknown.structured_content["message"]
    ids = {m["id"] for m in listed}
    assert SMOLLM in ids and MINILM not in ids and all("generate" in m["tasks"] for m in listed)


async def test_the_call_options_come_from_the_http_headers(base_url: str) -> None:
    call = {"model": MINILM, "texts": ["x"]}
    async with over_http(base_url, headers={"X-SIE-Priority": "urgent"}) as session:
        bad = await session.call_tool("encode", call)
    async with over_http(base_url, headers={"X-SIE-Timeout-Ms": "0"}) as session:
        late = await session.call_tool("encode", call)
    async with over_http(base_url, headers={"X-SIE-Priority": "batch"}) as session:
        assert len(answer(await session.call_tool("encode", call))["vectors"][0]["dense"]) == 384
    assert bad.is_error and bad.structured_content is not None and late.structured_content is not None
    assert bad.structured_content["code"] == "INVALID_INPUT" and "X-SIE-Priority" in bad.structured_content["message"]
    assert late.is_error and late.structured_content["code"] == "DEADLINE_EXCEEDED"


def test_mcp_is_not_in_the_openapi_spec(base_url: str) -> None:
    paths = httpx.get(f"{base_url}/openapi.json", timeout=30).json()["paths"]
    assert "/v1/encode/{model}" in paths and "/mcp" not in paths


async def test_stdio_calls_a_running_server_through_the_sdk(base_url: str) -> None:
    async with over_stdio(base_url) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        found = answer(await session.call_tool("encode", {"model": MINILM, "texts": TEXTS[:1]}))
        unknown = await session.call_tool("score", {"model": "no/such-model", "query": "q", "documents": ["d"]})
    assert names == TOOLS
    np.testing.assert_allclose(np.array([found["vectors"][0]["dense"]]), v1_dense(base_url, TEXTS[:1]), atol=1e-6)
    assert unknown.is_error and unknown.structured_content["code"] == "MODEL_NOT_FOUND"  # the server's, via the SDK
    assert "no/such-model" in unknown.structured_content["message"]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("mcp-keys")
    write_config(folder, tiny_embedder("test/tiny-embedder", tiny_models["embedder"]))
    env = {"SIE_API_KEYS": "", "SIE_API_KEY": ""}
    proc = ServerProcess(
        folder, "--offline", "--threads", "1", "--api-key", "alpha", "--mcp-allowed-hosts", "sie.internal",
        env=env, log=folder / "log",
    )  # fmt: skip
    proc.wait_ready()
    try:
        yield proc
    finally:
        proc.stop()


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


async def test_mcp_takes_the_same_api_keys(keyed: ServerProcess) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for key, status, code in ((None, 401, "UNAUTHENTICATED"), ("nope", 403, "FORBIDDEN")):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        refused = httpx.post(f"{keyed.url}/mcp", json=call, headers=headers, timeout=30)
        assert refused.status_code == status and refused.json()["detail"]["code"] == code
        with pytest.raises(BaseException) as caught:  # the client raises a group of its tasks' errors
            async with over_http(keyed.url, key) as session:
                await session.list_tools()
        assert any(isinstance(leaf, MCPError) for leaf in leaves(caught.value)), caught.value
    async with over_http(keyed.url, "alpha") as session:
        assert {tool.name for tool in (await session.list_tools()).tools} == TOOLS


MCP_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


def mcp_post(url: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=MCP_CALL, headers={**MCP_ACCEPT, **headers}, timeout=30)


def test_a_page_on_another_name_cannot_drive_a_keyless_local_server(base_url: str) -> None:
    """DNS rebinding: a page on attacker.example re-pointed at 127.0.0.1 sends its own Host and Origin."""
    port = base_url.rsplit(":", 1)[1]
    rebound = mcp_post(base_url, {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"})
    cross_origin = mcp_post(base_url, {"Origin": "http://attacker.example"})  # Host is 127.0.0.1:port
    same_origin = mcp_post(base_url, {"Origin": f"http://127.0.0.1:{port}"})
    by_name = mcp_post(base_url, {"Host": f"localhost:{port}"})
    assert rebound.status_code == 421 and "Host" in rebound.text
    assert cross_origin.status_code == 403 and "Origin" in cross_origin.text
    assert same_origin.status_code == 200 and by_name.status_code == 200
    assert {tool["name"] for tool in same_origin.json()["result"]["tools"]} == TOOLS
    assert httpx.get(f"{base_url}/healthz", headers={"Host": "attacker.example"}, timeout=30).status_code == 200


def test_the_flag_adds_names_to_the_allowed_hosts(keyed: ServerProcess) -> None:
    key = {"Authorization": "Bearer alpha"}
    named = mcp_post(keyed.url, {**key, "Host": "sie.internal:8080", "Origin": "https://sie.internal:8080"})
    other = mcp_post(keyed.url, {**key, "Host": "sie.external:8080"})
    assert named.status_code == 200 and {tool["name"] for tool in named.json()["result"]["tools"]} == TOOLS
    assert other.status_code == 421


def v1_image_dense(base_url: str, model: str, images: list[bytes]) -> np.ndarray:
    items = [{"images": [{"data": base64.b64encode(i).decode(), "format": "png"}]} for i in images]
    r = httpx.post(f"{base_url}/v1/encode/{model}", json={"items": items}, timeout=120)
    assert r.status_code == 200, r.text
    return np.array([item["dense"]["values"] for item in r.json()["items"]], dtype=np.float32)


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_encode_takes_images(base_url: str, transport: str) -> None:
    pictures = [png(text_image(["one"])), png(text_image(["two", "lines"]))]
    images = [{"data": base64.b64encode(p).decode(), "format": "png"} for p in pictures]
    session_for = over_http if transport == "http" else over_stdio
    async with session_for(base_url) as session:
        found = answer(await session.call_tool("encode", {"model": CLIP, "images": images}))
        both = await session.call_tool("encode", {"model": CLIP, "images": images, "texts": ["x"]})
        text_only = await session.call_tool("encode", {"model": MINILM, "images": images})
    vectors = np.array([v["dense"] for v in found["vectors"]], dtype=np.float32)
    np.testing.assert_allclose(vectors, v1_image_dense(base_url, CLIP, pictures), atol=1e-5)
    assert both.is_error and both.structured_content is not None
    assert (
        both.structured_content["code"] == "INVALID_INPUT"
        and "exactly one of texts or images" in (both.structured_content["message"])
    )
    assert text_only.is_error and text_only.structured_content is not None  # the model's own refusal
    assert text_only.structured_content["code"] == "INVALID_INPUT", text_only.structured_content


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_extract_passes_the_models_options_and_refuses_one_it_lacks(base_url: str, transport: str) -> None:
    image = {"data": base64.b64encode(png(text_image(INVOICE_LINES))).decode(), "format": "png"}
    session_for = over_http if transport == "http" else over_stdio
    async with session_for(base_url) as session:
        call = {"model": OCR, "image": image}
        read = answer(await session.call_tool("extract", {**call, "options": {"text_score": 0.5}}))
        strict = answer(await session.call_tool("extract", {**call, "options": {"text_score": 1.0}}))
        refused = await session.call_tool("extract", {**call, "options": {"colour": "red"}})
    assert [e["text"] for e in read["entities"]] == INVOICE_LINES
    assert len(strict["entities"]) < len(INVOICE_LINES)  # no line scores above 1.0: the option reached the model
    assert refused.is_error and refused.structured_content is not None
    assert refused.structured_content["code"] == "INVALID_INPUT" and "'colour'" in refused.structured_content["message"]


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_generate_takes_a_grammar_or_a_response_format(base_url: str, transport: str) -> None:
    schema = {
        "type": "object",
        "properties": {"colour": {"enum": ["red", "green", "blue"]}},
        "required": ["colour"],
        "additionalProperties": False,
    }
    ask = [{"role": "user", "content": "Name a colour."}]
    response_format = {"type": "json_schema", "json_schema": {"name": "colour", "schema": schema}}
    session_for = over_http if transport == "http" else over_stdio
    async with session_for(base_url) as session:
        yes_no = answer(
            await session.call_tool(
                "generate",
                {"model": TINY_BPE, "prompt": "Is it?", "grammar": {"regex": "(yes|no)"}, "max_new_tokens": 8},
            )
        )
        shaped = answer(
            await session.call_tool(
                "generate", {"model": SMOLLM, "messages": ask, "response_format": response_format, "max_new_tokens": 24}
            )
        )
        both = await session.call_tool(
            "generate",
            {"model": SMOLLM, "prompt": "x", "grammar": {"regex": "a"}, "response_format": {"type": "json_object"}},
        )
        bad = await session.call_tool("generate", {"model": SMOLLM, "prompt": "x", "grammar": {"regex": "("}})
    assert yes_no["text"] in ("yes", "no") and yes_no["finish_reason"] == "stop"
    assert shaped["finish_reason"] == "stop" and json.loads(shaped["text"])["colour"] in ("red", "green", "blue")
    assert both.is_error and both.structured_content is not None and both.structured_content["code"] == "INVALID_INPUT"
    assert bad.is_error and bad.structured_content is not None and bad.structured_content["code"] == "INVALID_INPUT"
