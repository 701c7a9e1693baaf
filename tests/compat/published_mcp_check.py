"""Run with the published `sie-mcp` 0.10.1 (Python 3.12): starts its edge (`sie-mcp serve`, as its users run it)
pointed at a running SIE server, its model settings overridden by its own environment variables to models this
server's catalog has, and calls its tools through the official `mcp` client over streamable HTTP; prints one
JSON report.

Usage: python published_mcp_check.py BASE_URL PDF_PATH SCAN_PATH DOCLING OCR EMBED RERANK LLM GLINER
"""

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

base_url, pdf_path, scan_path, docling, ocr, embed, rerank, llm, gliner = sys.argv[1:10]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def b64(path: str) -> str:
    return base64.b64encode(Path(path).read_bytes()).decode()


async def calls(url: str) -> dict:
    report: dict = {}
    async with (
        streamablehttp_client(url, timeout=30, sse_read_timeout=300) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        # when the edge's lifespan fails (its SDK client refusing its settings, say), mcp 1.30's client waits
        # forever for the handshake: bounded here, so the check fails in a minute and says so
        async with asyncio.timeout(60):
            await session.initialize()
            report["tools"] = sorted(t.name for t in (await session.list_tools()).tools)

        async def call(name: str, arguments: dict) -> dict:
            result = await session.call_tool(name, arguments)
            if result.isError:
                return {"error": " ".join(getattr(c, "text", "") for c in result.content)}
            return result.structuredContent or json.loads(result.content[0].text)

        report["docs_to_markdown"] = await call(
            "docs_to_markdown", {"document_base64": b64(pdf_path), "filename": "mixed.pdf"}
        )
        report["docs_to_markdown_docling_ocr"] = await call(
            "docs_to_markdown",
            {"document_base64": b64(pdf_path), "filename": "mixed.pdf", "ocr": True, "engine": "docling"},
        )
        report["docs_to_markdown_vl_ocr"] = await call(
            "docs_to_markdown", {"document_base64": b64(scan_path), "filename": "scan.pdf", "engine": "vl-ocr"}
        )
        report["extract_entities"] = await call(
            "extract_entities", {"labels": ["company", "amount"], "content": "ACME Corp owes 1,234.56 EUR."}
        )
        report["answer_questions"] = await call(
            "answer_questions",
            {
                "documents": ["The invoice total is 1,234.56 EUR.", "Lunch is served at noon in the canteen."],
                "questions": ["What is the invoice total?"],
            },
        )
        report["generate_structured"] = await call(
            "generate_structured",
            {
                "prompt": "Name a colour.",
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "colour",
                        "schema": {
                            "type": "object",
                            "properties": {"colour": {"enum": ["red", "green", "blue"]}},
                            "required": ["colour"],
                            "additionalProperties": False,
                        },
                        "strict": True,
                    },
                },
                "max_output_tokens": 24,
            },
        )
    return report


port = free_port()
env = {
    **os.environ,
    "SIE_BASE_URL": base_url,
    "SIE_API_KEY": "",
    "SIE_MCP_ALLOW_ANONYMOUS": "1",
    "SIE_MCP_OAUTH_ENABLED": "0",
    "SIE_MCP_DOCLING_MODEL": docling,
    "SIE_MCP_VLOCR_MODEL": ocr,
    "SIE_MCP_ENCODE_MODEL": embed,
    "SIE_MCP_RERANK_MODEL": rerank,
    "SIE_MCP_GENERATE_MODEL": llm,
    "SIE_MCP_EXTRACT_MODEL": gliner,
    "SIE_MCP_QA_MAX_TOKENS": "32",
    "SIE_MCP_TIMEOUT_S": "240",
}
edge_cli = str(Path(sys.executable).with_name("sie-mcp"))
edge = subprocess.Popen(
    [edge_cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
    env=env,
    stdout=subprocess.DEVNULL,
    stderr=sys.stderr,
)
try:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if edge.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"sie-mcp serve did not start (exit {edge.poll()})")
        time.sleep(0.2)
    try:
        found = asyncio.run(calls(f"http://127.0.0.1:{port}/mcp"))
    except Exception as exc:  # anyio's task groups may wrap the timeout in an exception group
        if isinstance(exc, TimeoutError) or (
            isinstance(exc, BaseExceptionGroup) and exc.subgroup(TimeoutError) is not None
        ):
            raise SystemExit("no MCP session with sie-mcp within 60 s (its log is above)") from exc
        raise
finally:
    edge.terminate()
    try:
        edge.wait(timeout=20)
    except subprocess.TimeoutExpired:
        edge.kill()
        edge.wait()
print(json.dumps(found))
