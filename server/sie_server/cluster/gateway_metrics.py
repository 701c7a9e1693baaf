"""The gateway's own Prometheus metrics (a registry of its own: a gateway runs no engine)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sie_server.observability.metrics import LATENCY_BUCKETS


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("sie_gateway_requests", "Gateway requests", ["task", "status"], registry=r)
        self.duration = Histogram("sie_gateway_request_duration_seconds", "Gateway latency", ["task"], registry=r)
        self.pending = Gauge("sie_gateway_pending_items", "Work messages waiting", ["pool", "priority"], registry=r)
        self.workers = Gauge("sie_gateway_workers", "Live workers seen", ["pool"], registry=r)
        self.by_reference = Counter("sie_gateway_payloads_by_reference", "Bodies sent via the object store",
                                    ["direction"], registry=r)  # fmt: skip
        self.dropped = Counter("sie_gateway_replies_dropped", "Replies not passed on: a call's second answer "
                               "(duplicate) or one for a call given up (late)", ["reason"], registry=r)  # fmt: skip
        self.work_seconds = Histogram("sie_gateway_work_seconds", "Seconds from publishing a work message to its "
                                      "first answer, by pool and priority class", ["pool", "priority"],
                                      buckets=LATENCY_BUCKETS, registry=r)  # fmt: skip
        self.dead_letters = Gauge("sie_gateway_dead_letters", "Messages parked in the pool's dead-letter stream",
                                  ["pool"], registry=r)  # fmt: skip
        self.batches_in_progress = Gauge("sie_gateway_batches_in_progress", "Batch API batches the cluster is "
                                         "running (OpenAI's /v1/batches)", registry=r)  # fmt: skip
        self.model_workers = Gauge("sie_gateway_model_workers", "Live workers reporting the model in this state "
                                   "(loaded, loading, failed)", ["pool", "model", "state"], registry=r)  # fmt: skip
