"""The server's composition root: catalog, pool, scheduler and services built from settings,
put behind the HTTP API, with a queue worker when the server is one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from sie_server.api.app import create_api
from sie_server.api.keys import Access
from sie_server.api.middleware import ApiKeys, QueueOnly, RequestMetrics
from sie_server.api.quota import with_quota
from sie_server.batches import local as local_batches
from sie_server.catalog.loader import canonical_id, load_served
from sie_server.cpu_features import detect
from sie_server.device import device_kind, resolve_device, steer_attention
from sie_server.engine.cache_scope import ItemCache
from sie_server.engine.frontdoor import EngineFrontDoor
from sie_server.engine.generation import GenerationService
from sie_server.engine.model_health import ModelHealth
from sie_server.engine.policy import PriorityPolicy
from sie_server.engine.result_cache import ResultCache
from sie_server.engine.scheduler import Scheduler
from sie_server.engine.service import InferenceService
from sie_server.errors import SIEError
from sie_server.memory.budget import available_bytes, parse_budget
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics
from sie_server.settings import Settings

log = logging.getLogger(__name__)


def build_state(settings: Settings) -> EngineFrontDoor:
    """Every component, wired; nothing started yet."""
    catalog = load_served(settings.models_dir, settings.models)
    device = resolve_device(settings.device)
    metrics = Metrics()
    pinned = frozenset(canonical_id(m) for m in settings.pin)
    budget = parse_budget(settings.memory_budget, available_bytes(device))
    pool = ModelPool(
        device,
        device_kind(device),
        offline=settings.offline,
        budget_bytes=budget,
        metrics=metrics,
        pinned=pinned,
        cpu_precision=settings.cpu_precision,
        gguf_formats=settings.gguf_formats,
        torch_prefill_tokens=settings.torch_prefill_tokens,
        max_load_waiters=settings.max_load_waiters,
    )
    policy = PriorityPolicy(
        settings.batch_share,
        settings.batch_max_tokens,
        lanes=not settings.single_lane,
        defer_s=settings.batch_defer_ms / 1000 if device_kind(device) == "cpu" else 0.0,
    )
    scheduler = Scheduler(
        pool,
        metrics,
        policy=policy,
        max_queued_items=settings.max_queued_items,
        load_timeout_s=settings.load_timeout_s,
    )
    inference = InferenceService(
        catalog, pool, scheduler, load_timeout_s=settings.load_timeout_s, results=result_cache(settings, pool, metrics)
    )
    generation = GenerationService(pool, settings.load_timeout_s)
    pool.is_busy = lambda model_id: scheduler.busy(model_id) or generation.busy(model_id)
    log.info("device %s, memory budget %.1f MiB", device, budget / 2**20)
    if steer_attention(device):
        log.info("cuda: attention runs on flash or memory-efficient kernels, not cuDNN's (rebuilt per shape)")
    if device_kind(device) == "cpu":
        cpu = detect()
        found = ", ".join(cpu.flags) or "none of the precision-relevant flags"
        log.info("cpu %s: %s; precisions it runs: %s", cpu.model or "(unknown)", found, ", ".join(cpu.precisions))
    return EngineFrontDoor(settings, catalog, pool, scheduler, inference, metrics, generation)


def result_cache(settings: Settings, pool: ModelPool, metrics: Metrics) -> ItemCache | None:
    """The exact cache of encode and score items (``--encode-cache``), charged to the pool's budget;
    None when it is off."""
    size = settings.encode_cache_bytes
    if not size:
        return None
    cache = ResultCache(size, metrics)
    cache.room = pool.free_bytes
    pool.reclaimable = cache
    return ItemCache(cache, pool)


async def preload(state: EngineFrontDoor) -> None:
    for model_id in dict.fromkeys([*state.settings.pin, *state.settings.preload]):
        try:
            config = state.resolve(model_id)
            await state.pool.acquire(config, wait=True, timeout_s=state.settings.load_timeout_s, request=False)
        except SIEError as exc:
            state.preload_errors[model_id] = exc.message
            log.error("preload of %s failed: %s", model_id, exc.message)


def create_app(settings: Settings) -> FastAPI:
    state = build_state(settings)
    # a queue worker keeps no batches of its own: the gateway serves the Batch API over JetStream and the
    # worker runs its lines (cluster/batch_worker.py); no SQLite store under its --data-dir
    batches = (
        None
        if settings.queue
        else local_batches.from_settings(settings, lambda: app, state.metrics, lambda: state.queue_token)
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        state.scheduler.start()
        if batches is not None:
            batches.start()  # resumes the batches a stop or crash left unfinished
        background = [loop.create_task(preload(state))]
        background[0].add_done_callback(lambda _: setattr(state, "ready", True))
        background.append(loop.create_task(state.pool.keep_within_budget_forever()))
        if settings.idle_evict_s:
            background.append(loop.create_task(state.pool.evict_idle_forever(settings.idle_evict_s)))
        worker, pulling = None, None
        if settings.queue:
            from sie_server.cluster.worker import QueueWorker

            worker = QueueWorker(
                app,
                nats_url=settings.queue,
                pool=settings.pool,
                ack_wait_s=settings.ack_wait_s,
                max_deliver=settings.max_deliver,
            )
            pulling = loop.create_task(worker.run())
        yield
        if worker is not None and pulling is not None:  # stop pulling, answer what was taken; engine still runs
            worker.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(pulling, settings.load_timeout_s)
        if batches is not None:
            await batches.stop()  # lines in flight run again at the next start
        state.draining = True
        for task in background:
            task.cancel()
        await state.scheduler.stop()
        state.inference.close()
        await state.generation.stop()

    service, quota = with_quota(state, settings.max_queued_per_key)
    app = create_api(
        service,
        title="SIE",
        lifespan=lifespan,
        default_model=settings.default_model,
        mcp_allowed_hosts=settings.mcp_allowed_hosts,
    )
    app.state.sie = state
    required = (canonical_id(m) for m in [*settings.pin, *settings.preload])  # /readyz fails if these cannot load
    health = ModelHealth(state.pool, state.scheduler, state.generation, required=required,
                         stall_after_s=settings.stall_after_s)  # fmt: skip
    app.state.judge_readiness = health.judge
    access = Access.from_settings(settings)
    app.state.access = access  # the Batch API derives each object's owner from the caller's key
    app.state.batches = batches
    app.state.batch_max_file_bytes = settings.batch_max_file_bytes
    app.add_middleware(RequestMetrics, recorder=state.requests)
    state.queue_token = secrets.token_hex(16)  # the secret in-process calls carry (queue worker, batch runner)
    if settings.queue:
        app.add_middleware(QueueOnly, token=state.queue_token)
    app.add_middleware(ApiKeys, access=access, quota=quota, queue_token=state.queue_token)
    return app
