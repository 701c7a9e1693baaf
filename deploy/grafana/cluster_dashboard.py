"""The SIE / Cluster dashboard: gateway traffic and latency, JetStream backlog and worker count per pool."""

from __future__ import annotations

from typing import Any

from panels import RATE, dashboard, layout, quantiles, stat, timeseries, variable_query


def cluster_dashboard() -> Any:
    p = '{pool=~"$pool"}'
    overview = [
        stat(
            "Gateway requests/s",
            "All gateway requests.",
            "reqps",
            f"sum(rate(sie_gateway_requests_total[{RATE}]))",
        ),
        stat("Workers", "Live workers in the selected pools.", "short", f"sum(max by (pool) (sie_gateway_workers{p}))"),
        stat(
            "Pending work",
            "Messages waiting in the selected pools' streams.",
            "short",
            f"sum(max by (pool, priority) (sie_gateway_pending_items{p}))",
        ),
        stat(
            "Gateway p99 latency",
            "Over all tasks.",
            "s",
            f"histogram_quantile(0.99, sum by (le) (rate(sie_gateway_request_duration_seconds_bucket[{RATE}])))",
        ),
    ]
    gateway = [
        timeseries(
            "Gateway requests per second",
            "By task and outcome (ok or the error code).",
            "reqps",
            (f"sum by (task, status) (rate(sie_gateway_requests_total[{RATE}]))", "{{task}} {{status}}"),
            stack=True,
        ),
        timeseries(
            "Gateway latency p50 / p99",
            "Request duration at the gateway (queueing, worker start-up and inference), by task.",
            "s",
            *quantiles("sie_gateway_request_duration_seconds", "task", "", "{{task}}"),
        ),
        timeseries(
            "Bodies sent by reference",
            "Requests and replies too large for one NATS message, sent through the object store.",
            "short",
            (f"sum by (direction) (rate(sie_gateway_payloads_by_reference_total[{RATE}]))", "{{direction}}"),
        ),
        timeseries(
            "Answers dropped",
            "Second answers to a call that already had one (a redelivery after a worker lost NATS mid-work, "
            "or a resend), dropped so no caller sees two.",
            "short",
            (f"sum by (reason) (rate(sie_gateway_replies_dropped_total[{RATE}]))", "{{reason}}"),
        ),
    ]
    scaling = [
        timeseries(
            "Pending items by pool and priority",
            "Messages waiting in each JetStream stream (what KEDA scales on).",
            "short",
            (f"max by (pool, priority) (sie_gateway_pending_items{p})", "{{pool}} {{priority}}"),
        ),
        timeseries(
            "Workers per pool",
            "Live workers the gateway sees (max over gateway replicas).",
            "short",
            (f"max by (pool) (sie_gateway_workers{p})", "{{pool}}"),
        ),
        timeseries(
            "Worker queues by pool and priority",
            "Items waiting inside the workers' engine queues.",
            "short",
            (f"sum by (pool, priority) (sie_queue_items{p})", "{{pool}} {{priority}}"),
        ),
        timeseries(
            "Worker memory use by pool",
            "Charged bytes / budget, summed over each pool's workers.",
            "percentunit",
            (f"sum by (pool) (sie_memory_used_bytes{p}) / sum by (pool) (sie_memory_budget_bytes{p})", "{{pool}}"),
        ),
        timeseries(
            "Work latency p50 / p99 by pool and priority",
            "From publishing a work message to its first answer (the interactive p99 alert watches this).",
            "s",
            *quantiles("sie_gateway_work_seconds", "pool, priority", p, "{{pool}} {{priority}}"),
        ),
        timeseries(
            "Dead letters and failed models by pool",
            "Messages parked in each pool's dead-letter stream, and live workers reporting a model whose load failed.",
            "short",
            (f"max by (pool) (sie_gateway_dead_letters{p})", "{{pool}} dead letters"),
            (
                'max by (pool, model) (sie_gateway_model_workers{pool=~"$pool", state="failed"})',
                "{{pool}} {{model}} failed",
            ),
        ),
        timeseries(
            "Batch API: batches and lines",
            "Batches the cluster is running (the gateway's reading) and lines the workers finish per second.",
            "short",
            ("max(sie_gateway_batches_in_progress)", "batches in progress"),
            ("sum by (outcome) (rate(sie_batch_lines_total[5m]))", "lines/s {{outcome}}"),
        ),
    ]
    panels = layout([("Overview", overview, 4), ("Gateway", gateway, 2), ("Pools and scaling", scaling, 2)])
    pool = variable_query("pool", "Pool", "label_values(sie_gateway_workers, pool)")
    return dashboard(
        "sie-cluster",
        "SIE / Cluster",
        "Gateway traffic and latency, JetStream backlog and worker count per pool.",
        [pool],
        panels,
    )
