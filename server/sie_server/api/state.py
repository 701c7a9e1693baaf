"""What the routes reach through ``app.state.sie``: settings, catalog, pool, engine, metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.generation import GenerationService
from sie_server.engine.policy import PRIORITIES
from sie_server.engine.scheduler import Scheduler
from sie_server.engine.service import CallOptions, InferenceService
from sie_server.errors import InvalidInput, QueueFull
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from sie_server.settings import Settings

PRIORITY_HEADER = "x-sie-priority"
WAIT_HEADER = "x-sie-wait-for-model"
DRAIN_RETRY_AFTER_S = 5.0


@dataclass
class ServerState:
    settings: Settings
    catalog: Catalog
    pool: ModelPool
    scheduler: Scheduler
    service: InferenceService
    metrics: Metrics
    generation: GenerationService
    ready: bool = False
    draining: bool = False
    inflight: int = 0  # work requests being answered (maintained by the metrics middleware)
    queue_token: str = ""  # on a queue worker: the secret its in-process calls carry
    preload_errors: dict[str, str] = field(default_factory=dict)

    def idle(self) -> bool:
        return (
            self.inflight == 0
            and self.scheduler.is_idle()
            and not any(loop.busy for loop in self.generation.loops.values())
        )


def server(request: Request) -> ServerState:
    state: ServerState = request.app.state.sie
    return state


def resolve(request: Request, model_id: str, task: str) -> tuple[ServerState, ModelConfig]:
    """The served model for a work route; tags the request for metrics; refuses work while draining."""
    state = server(request)
    if state.draining:
        raise QueueFull("the server is shutting down and accepts no new work", retry_after=DRAIN_RETRY_AFTER_S)
    config = state.service.resolve(model_id)
    request.state.sie_model = config.id
    request.state.sie_task = task
    return state, config


def call_options(request: Request) -> CallOptions:
    """Per-request engine options from headers: priority class and whether to wait for a cold model."""
    priority = request.headers.get(PRIORITY_HEADER, "interactive").strip().lower()
    if priority not in PRIORITIES:
        raise InvalidInput(f"X-SIE-Priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    wait = request.headers.get(WAIT_HEADER, "true").strip().lower() not in ("0", "false", "no")

    async def disconnected() -> None:
        # the body has been read, so the next ASGI message is the client going away
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return CallOptions(priority=priority, wait_for_load=wait, disconnected=disconnected)
