"""What the gateway's ``/readyz`` says, in the same ``Readiness`` body as a server's.

The gateway holds no model: its own readiness is whether it can put work on the queue and get answers.

- 503 ``"disconnected"`` while its NATS connection is away (a lost connection shows at once; the client
  reconnects every 2 s), ``"draining"`` after SIGTERM. Kubernetes then sends callers to another gateway.
- 200 ``"ready"`` otherwise, with ``models`` naming each model that no live worker of its pool serves now
  because every one of them names it in its own ``/readyz`` (``engine/model_health.py``): a load that
  failed, a batch stalled on it. A worker counts as serving a model unless it is stopping or its
  ``/readyz`` names that model (or ``*``, its batch loop ended); a model one worker fails and another
  serves is not listed. The problem is the first such worker's, its message says on how many workers,
  and ``required`` is always false here: every gateway replica sees the same workers, so failing the
  gateways' readiness would take every model of every pool out of service for one model's sake.
- A pool with no live worker is not a problem of readiness: a pool scales to zero, and the gateway holds
  its requests while one starts (``--hold-s``); ``/v1/status`` shows the workers per pool.
"""

from __future__ import annotations

from sie_server.cluster.gateway import Gateway
from sie_server.cluster.gateway_workers import EVERY_MODEL, WorkerSeen
from sie_server.contract.state_wire import ModelProblem, Readiness


def gateway_readiness(gateway: Gateway, *, draining: bool) -> Readiness:
    if draining:
        return Readiness(status="draining")
    nc = gateway.nc
    if nc is None:
        return Readiness(status="starting")
    if not nc.is_connected:
        return Readiness(status="disconnected")
    unserved = unserved_models(gateway)
    return Readiness(status="ready", models=unserved or None)


def unserved_models(gateway: Gateway) -> dict[str, ModelProblem]:
    """Each model some live worker names in its ``/readyz`` that no live worker of the model's pool serves."""
    live: dict[str, list[tuple[str, WorkerSeen]]] = {}
    for worker, seen in sorted(gateway.workers.items()):
        if gateway.live(worker):
            live.setdefault(seen.pool, []).append((worker, seen))
    found: dict[str, ModelProblem] = {}
    for pool, workers in live.items():
        named = {m for _, seen in workers for m in seen.problems if m != EVERY_MODEL}
        for model_id in sorted(named):
            if gateway.settings.pool_for(model_id) != pool or any(seen.serves(model_id) for _, seen in workers):
                continue
            worker, problem = next((w, s.problems[model_id]) for w, s in workers if model_id in s.problems)
            message = (f"no live worker of pool {pool} serves it ({len(workers)} live); "
                       f"worker {worker}: {problem.message}")  # fmt: skip
            found[model_id] = ModelProblem(problem=problem.problem, message=message, required=False)
    return found
