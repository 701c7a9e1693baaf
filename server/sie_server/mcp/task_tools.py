"""The pipeline tasks (``sie_server/tasks``) as MCP tools beside the primitives: the task's request is the
tool's input schema and its answer the output schema. Over the server's own service (``/mcp`` on a server
or gateway) a task runs in process; over the SDK (``sie-server mcp --url``) it is one
``POST /v1/tasks/{task}`` to the running server."""

from __future__ import annotations

from collections.abc import Mapping

import mcp_types as types
from pydantic import BaseModel

from sie_server.api.deadlines import within
from sie_server.contract.headers import call_options
from sie_server.mcp.sdk_backend import SDKBackend
from sie_server.mcp.service_backend import ServiceBackend
from sie_server.tasks.registry import TASKS, TaskSpec


def task_tools() -> list[types.Tool]:
    return [
        types.Tool(
            name=spec.name,
            title=spec.title,
            description=spec.description,
            input_schema=spec.request.model_json_schema(),
            output_schema=spec.response.model_json_schema(mode="serialization"),
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        )
        for spec in TASKS.values()
    ]


async def run_task(backend: object, spec: TaskSpec, args: BaseModel, headers: Mapping[str, str]) -> BaseModel:
    if isinstance(backend, ServiceBackend):
        call = call_options(headers)
        async with within(call):
            return await spec.run(backend.service, args, call)
    if isinstance(backend, SDKBackend):
        answer = await backend.client.task(spec.name, args.model_dump(mode="json", by_alias=True, exclude_none=True))
        return spec.response.model_validate(answer)
    raise TypeError(f"no way to run tasks over {type(backend).__name__}")
