"""``POST /v1/tasks/{task}``: a pipeline step in one call (``sie_server/tasks``), one route per task so each
has its own request and answer in the OpenAPI spec; on the server and the gateway alike."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Request
from fastapi.responses import Response

from sie_server.api.body import parse, render
from sie_server.api.context import call, service
from sie_server.api.deadlines import within
from sie_server.api.openapi import doc
from sie_server.tasks.registry import TASKS, TaskSpec

router = APIRouter(tags=["tasks"])


def _route(spec: TaskSpec) -> Callable[[Request], Awaitable[Response]]:
    async def run_task(request: Request) -> Response:
        svc = service(request)
        body = await parse(request, spec.request, svc.limits.max_body_bytes)
        request.state.sie_task = spec.name
        options = call(request)
        async with within(options):
            answer = await spec.run(svc, body, options)
        return render(request, answer)

    run_task.__name__ = f"task_{spec.name}"
    return run_task


for _spec in TASKS.values():
    router.add_api_route(
        f"/v1/tasks/{_spec.name}",
        _route(_spec),
        methods=["POST"],
        summary=_spec.title,
        description=_spec.description,
        **doc(_spec.response, body=_spec.request),
    )
