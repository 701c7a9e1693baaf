"""The MCP server over a ``Backend``: the one set of tool handlers, for both transports.

Arguments are validated by the tool's input model; a failure of the server's (unknown model, bad
input, a model that cannot load) comes back as a tool error (``isError``) whose text and
``structuredContent`` carry the server's code and message, so the session goes on. An unknown tool
name is a protocol error (JSON-RPC invalid params), as the MCP spec asks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

import sie_sdk
from sie_server import __version__
from sie_server.errors import SIEError
from sie_server.mcp.task_tools import run_task, task_tools
from sie_server.mcp.tools import (
    BY_NAME,
    TOOLS,
    Backend,
    EncodeInput,
    ExtractInput,
    GenerateInput,
    Input,
    ItemFailed,
    ListModelsInput,
    ListModelsOutput,
    Output,
    ScoreInput,
    as_asked,
)
from sie_server.tasks.registry import TASKS

log = logging.getLogger(__name__)
INSTRUCTIONS = (
    "SIE serves small models of many kinds. Call list_models (optionally with a task) to find a model id, "
    "then encode, score, extract or generate with it; or run a whole pipeline step with a task tool "
    "(docs_to_markdown, answer_questions, redact_pii, extract_structured, summarize_document, extract_entities, "
    "describe_image). "
    "A failed call answers with the server's error code."
)


def tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.input.model_json_schema(),
            output_schema=spec.output.model_json_schema(mode="serialization"),
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=spec.name != "generate"),
        )
        for spec in TOOLS
    ] + task_tools()


def failure(code: str, message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"code": code, "message": message},
        is_error=True,
    )


def success(answer: BaseModel) -> types.CallToolResult:
    body = answer.model_dump(mode="json", exclude_none=True)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, separators=(",", ":")))],
        structured_content=body,
    )


def _explain(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in error["loc"])
        problems.append(f"{where}: {error['msg']}" if where else error["msg"])
    return "; ".join(problems)


async def _run(backend: Backend, args: Input, headers: Mapping[str, str]) -> Output:
    if isinstance(args, EncodeInput):
        return await backend.encode(args, headers)
    if isinstance(args, ScoreInput):
        ranked = await backend.score(args, headers)
        return ranked.model_copy(update={"results": ranked.results[: args.top_n]}) if args.top_n else ranked
    if isinstance(args, ExtractInput):
        return as_asked(args, await backend.extract(args, headers))
    if isinstance(args, GenerateInput):
        return await backend.generate(args, headers)
    assert isinstance(args, ListModelsInput)
    listed = await backend.list_models(headers)
    wanted = [m for m in listed.models if args.task is None or args.task in m.tasks]
    return ListModelsOutput(models=wanted)


async def call_tool(
    backend: Backend, name: str, arguments: Mapping[str, Any], headers: Mapping[str, str]
) -> types.CallToolResult:
    spec, task = BY_NAME.get(name), TASKS.get(name)
    if spec is None and task is None:
        raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}; the tools are {', '.join([*BY_NAME, *TASKS])}")
    try:
        schema: type[BaseModel] = spec.input if spec is not None else TASKS[name].request
        args = schema.model_validate(dict(arguments))
    except ValidationError as exc:
        return failure("INVALID_INPUT", _explain(exc))
    try:
        if task is not None:
            return success(await run_task(backend, task, args, headers))
        assert isinstance(args, Input)
        return success(await _run(backend, args, headers))
    except ItemFailed as exc:
        return failure(exc.code, exc.message)
    except SIEError as exc:  # the server's own (in process)
        return failure(exc.code.value, exc.message)
    except sie_sdk.APIError as exc:  # a running server's answer (through the SDK)
        return failure(exc.code or f"HTTP_{exc.status_code}", exc.message)
    except sie_sdk.SIETimeoutError as exc:
        return failure("DEADLINE_EXCEEDED", str(exc))
    except sie_sdk.SIEConnectionError as exc:
        return failure("UNAVAILABLE", f"cannot reach the SIE server: {exc}")
    except sie_sdk.SIEError as exc:
        return failure("INVALID_OUTPUT", str(exc))
    except Exception:
        log.exception("MCP tool %s failed", name)
        return failure("INFERENCE_ERROR", f"tool {name} failed; the server's log has the details")


def _headers(ctx: ServerRequestContext[Any, Any]) -> Mapping[str, str]:
    """The HTTP request's headers on streamable HTTP; none on stdio."""
    found = getattr(ctx.request, "headers", None)
    return found if isinstance(found, Mapping) else {}


def build_server(backend: Backend) -> Server[Any]:
    tools = tool_list()
    schemas = {tool.name: tool.input_schema for tool in tools}

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return await call_tool(backend, params.name, params.arguments or {}, _headers(ctx))

    return Server(
        "sie",
        version=__version__,
        title="SIE",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=schemas.get,
        on_list_tools=list_tools,
        on_call_tool=on_call,
    )
