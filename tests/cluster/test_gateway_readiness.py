"""The gateway's ``/readyz`` judged from its workers' heartbeats (``cluster/gateway_readiness.py``), without
NATS: which models no live worker serves, and the gateway's own status. The processes' side is in
``test_cluster_readiness.py``."""

from __future__ import annotations

import time
from typing import Any

from sie_server.cluster.gateway import Gateway, GatewaySettings
from sie_server.cluster.gateway_readiness import gateway_readiness, unserved_models
from sie_server.cluster.gateway_workers import WorkerSeen

MODEL = "org/model"
FAILED = {"problem": "load_failed", "message": "weights missing", "required": True}


class Connection:
    def __init__(self, connected: bool):
        self.is_connected = connected


def beat(worker: str, problems: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"worker": worker, "pool": "default", "models": {}, "inflight": 0, "problems": problems or {}, **extra}


def gateway(*beats: dict[str, Any]) -> Gateway:
    found = Gateway(GatewaySettings())
    for b in beats:
        found.workers[b["worker"]] = WorkerSeen.from_beat(b)
    return found


def test_a_model_every_live_worker_names_is_listed_but_not_required() -> None:
    problems = unserved_models(gateway(beat("a", {MODEL: FAILED}), beat("b", {MODEL: FAILED})))
    assert list(problems) == [MODEL]
    assert problems[MODEL].problem == "load_failed" and problems[MODEL].required is False
    assert problems[MODEL].message == "no live worker of pool default serves it (2 live); worker a: weights missing"


def test_a_model_one_live_worker_serves_is_not_listed() -> None:
    assert unserved_models(gateway(beat("a", {MODEL: FAILED}), beat("b"))) == {}


def test_a_stopping_worker_or_one_whose_batch_loop_ended_does_not_serve() -> None:
    stopped = {"*": {"problem": "stopped", "message": "the batch loop ended", "required": True}}
    assert list(unserved_models(gateway(beat("a", {MODEL: FAILED}), beat("b", stopping=True)))) == [MODEL]
    assert list(unserved_models(gateway(beat("a", {MODEL: FAILED}), beat("b", stopped)))) == [MODEL]


def test_a_worker_no_longer_heartbeating_is_not_counted() -> None:
    found = gateway(beat("a", {MODEL: FAILED}), beat("b"))
    found.workers["b"].seen = time.monotonic() - 60
    assert list(unserved_models(found)) == [MODEL]
    found.workers["a"].seen = time.monotonic() - 60
    assert unserved_models(found) == {}


def test_a_malformed_or_missing_problems_field_counts_as_none() -> None:
    assert WorkerSeen.from_beat(beat("a", {MODEL: {"problem": "unheard of"}})).problems == {}
    old = beat("a")
    del old["problems"]  # a worker of an older version
    assert WorkerSeen.from_beat(old).serves(MODEL)


def test_the_gateway_is_unready_only_without_nats_or_while_draining() -> None:
    found = gateway(beat("a", {MODEL: FAILED}))
    assert gateway_readiness(found, draining=False).status == "starting"
    found.nc = Connection(connected=False)
    assert gateway_readiness(found, draining=False).status == "disconnected"
    found.nc = Connection(connected=True)
    ready = gateway_readiness(found, draining=False)
    assert ready.status == "ready" and ready.models is not None and MODEL in ready.models
    assert gateway_readiness(found, draining=True).status == "draining"
