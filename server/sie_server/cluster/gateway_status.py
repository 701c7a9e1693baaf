"""The gateway's ``/v1/status``: each model as its live workers report it, with the gateway's own
last minute of requests; the pools with their live workers (models, load), the work waiting per
priority class and the messages parked in the dead-letter stream."""

from __future__ import annotations

import time
from typing import Any

from sie_server import __version__
from sie_server.cluster import streams
from sie_server.cluster.gateway import Gateway
from sie_server.contract.headers import PRIORITIES
from sie_server.contract.status import ErrorEntry, ModelStatus, PoolStatus, StatusReport, WorkerStatus
from sie_server.observability.live import LiveStats

ORDER = {"loaded": 0, "loading": 1, "failed": 2, "available": 3}
STATES = frozenset(ORDER)


def _model(gateway: Gateway, model_id: str, generator: bool, live: LiveStats) -> ModelStatus:
    pool = gateway.settings.pool_for(model_id)
    reports = gateway.reports(model_id)
    best: dict[str, Any] = reports[0] if reports else {}
    state = str(best.get("state") or "available")
    figures = live.figures(model_id)
    return ModelStatus(
        id=model_id,
        state=state if state in STATES else "available",  # type: ignore[arg-type]
        load_seconds=best.get("load_seconds"),
        error=best.get("last_error") if state == "failed" else None,
        generator=generator,
        pinned=bool(best.get("pinned", False)),
        charge_bytes=sum(int(r.get("charge_bytes") or 0) for r in reports),
        requests=figures.requests,
        requests_per_s=figures.requests_per_s,
        p50_ms=figures.p50_ms,
        p99_ms=figures.p99_ms,
        workers=gateway.live_workers(pool),
        loaded_on=sum(1 for r in reports if r.get("state") == "loaded"),
    )


async def _dead_letters(gateway: Gateway, pool: str) -> int | None:
    try:
        info = await gateway.js.stream_info(
            streams.DEAD_LETTER_STREAM, subjects_filter=streams.DEAD_LETTER_SUBJECT.format(pool=pool)
        )
    except Exception:  # no stream yet (no worker started), or NATS away: unknown
        return None
    subjects = info.state.subjects or {}
    return int(sum(subjects.values()))


async def _pools(gateway: Gateway) -> list[PoolStatus]:
    now = time.monotonic()
    found = []
    for pool in gateway.settings.pools:
        workers = [
            WorkerStatus(
                id=worker,
                pool=seen.pool,
                models={m: str(info.get("state", "available")) for m, info in seen.models.items()},
                inflight=seen.inflight,
                stopping=seen.stopping,
                seen_s_ago=now - seen.seen,
            )
            for worker, seen in sorted(gateway.workers.items())
            if seen.pool == pool and gateway.live(worker)
        ]
        pending = {
            p: int(gateway.metrics.registry.get_sample_value("sie_gateway_pending_items", {"pool": pool, "priority": p})
                   or 0)
            for p in PRIORITIES
        }  # fmt: skip
        found.append(
            PoolStatus(name=pool, workers=workers, pending=pending, dead_letters=await _dead_letters(gateway, pool))
        )
    return found


async def gateway_status(gateway: Gateway, live: LiveStats) -> StatusReport:
    configs = gateway.settings.catalog.list()
    models = [_model(gateway, c.id, c.tasks.generate is not None, live) for c in configs]
    models.sort(key=lambda m: (ORDER[m.state], m.id))
    errors = [ErrorEntry(at=e.at, model=e.model, code=e.code, message=e.message) for e in live.last_errors()]
    return StatusReport(
        role="gateway",
        version=__version__,
        uptime_s=live.clock() - live.started,
        window_s=live.span_s(),
        models=models,
        errors=errors,
        pools=await _pools(gateway),
    )
