"""What the routes reach through ``app.state.sie``: settings, catalog, pool, engine."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from sie_server.catalog.loader import Catalog
from sie_server.engine.scheduler import Scheduler
from sie_server.engine.service import CallOptions, InferenceService
from sie_server.errors import InvalidInput
from sie_server.memory.pool import ModelPool
from sie_server.settings import Settings

PRIORITY_HEADER = "x-sie-priority"
WAIT_HEADER = "x-sie-wait-for-model"
PRIORITIES = ("interactive", "batch")


@dataclass
class ServerState:
    settings: Settings
    catalog: Catalog
    pool: ModelPool
    scheduler: Scheduler
    service: InferenceService
    ready: bool = False
    draining: bool = False
    preload_errors: dict[str, str] = field(default_factory=dict)


def server(request: Request) -> ServerState:
    state: ServerState = request.app.state.sie
    return state


def call_options(request: Request) -> CallOptions:
    """Per-request engine options from headers: priority class and whether to wait for a cold model."""
    priority = request.headers.get(PRIORITY_HEADER, "interactive").strip().lower()
    if priority not in PRIORITIES:
        raise InvalidInput(f"X-SIE-Priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")
    wait = request.headers.get(WAIT_HEADER, "true").strip().lower() not in ("0", "false", "no")
    return CallOptions(priority=priority, wait_for_load=wait)
