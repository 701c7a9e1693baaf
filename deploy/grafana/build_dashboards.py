"""Writes the Grafana dashboards in this folder from the panel lists below.

    python deploy/grafana/build_dashboards.py           # rewrite sie-engine.json and sie-cluster.json
    python deploy/grafana/build_dashboards.py --check   # exit 1 if a committed file differs

Edit the panels here, not the JSON. Every expression may use only the metrics that sie-server
and the gateway export (docs/operate/metrics.md); tests/deploy checks that, and that the JSON files are
this script's output. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
SCHEMA_VERSION = 39
GRID_WIDTH = 24

Panel = dict[str, Any]


def target(expr: str, legend: str = "", ref: str = "A") -> dict[str, Any]:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "range": True, "refId": ref}


def targets(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def timeseries(title: str, description: str, unit: str, *pairs: tuple[str, str], stack: bool = False) -> Panel:
    custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets(*pairs),
    }


def stat(title: str, description: str, unit: str, expr: str) -> Panel:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "textMode": "auto",
        },
        "targets": targets((expr, "")),
    }


def quantiles(metric: str, by: str, selector: str, legend: str) -> list[tuple[str, str]]:
    """p50 and p99 of a histogram, per `by` labels."""
    return [
        (
            f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{selector}[{RATE}])))",
            f"p{int(q * 100)} {legend}",
        )
        for q in (0.5, 0.99)
    ]


def layout(sections: list[tuple[str, list[Panel], int]]) -> list[Panel]:
    """Rows of panels: each section is a row header and its panels, `per_row` abreast."""
    panels: list[Panel] = []
    y = 0
    for title, section, per_row in sections:
        panels.append(
            {"type": "row", "title": title, "collapsed": False, "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y}}
        )
        y += 1
        width = GRID_WIDTH // per_row
        height = 4 if all(p["type"] == "stat" for p in section) else 8
        for i, panel in enumerate(section):
            panel["gridPos"] = {"h": height, "w": width, "x": (i % per_row) * width, "y": y + (i // per_row) * height}
        y += ((len(section) + per_row - 1) // per_row) * height
        panels.extend(section)
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
        if panel["type"] == "row":
            panel["panels"] = []
    return panels


def variable_datasource() -> dict[str, Any]:
    return {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def variable_query(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-values"},
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": 0,
        "regex": "",
        "options": [],
    }


def dashboard(uid: str, title: str, description: str, variables: list[dict[str, Any]], panels: list[Panel]) -> Any:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["sie"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {"list": [variable_datasource(), *variables]},
        "panels": panels,
    }


def engine_dashboard() -> Any:
    m = '{model=~"$model"}'
    throughput = [
        timeseries(
            "Requests per second",
            "Requests by model and outcome (ok or the error code).",
            "reqps",
            (f"sum by (model, status) (rate(sie_requests_total{m}[{RATE}]))", "{{model}} {{status}}"),
            stack=True,
        ),
        timeseries(
            "Error ratio",
            "Share of requests that did not end ok.",
            "percentunit",
            (
                f'sum by (model) (rate(sie_requests_total{{model=~"$model", status!="ok"}}[{RATE}]))'
                f" / sum by (model) (rate(sie_requests_total{m}[{RATE}]))",
                "{{model}}",
            ),
        ),
        timeseries(
            "Tokens per second",
            "Real (unpadded) tokens run, per model.",
            "short",
            (f"sum by (model) (rate(sie_real_tokens_total{m}[{RATE}]))", "{{model}}"),
            stack=True,
        ),
        timeseries(
            "Items per second",
            "Items run in batches (decode steps count their active sequences).",
            "short",
            (f"sum by (model) (rate(sie_batch_items_sum{m}[{RATE}]))", "{{model}}"),
            stack=True,
        ),
    ]
    latency = [
        timeseries(
            "Request latency p50 / p99",
            "End-to-end request duration in the server, by model and task.",
            "s",
            *quantiles("sie_request_duration_seconds", "model, task", m, "{{model}} {{task}}"),
        ),
        timeseries(
            "Mean request latency",
            "Mean request duration by model and task.",
            "s",
            (
                f"sum by (model, task) (rate(sie_request_duration_seconds_sum{m}[{RATE}]))"
                f" / sum by (model, task) (rate(sie_request_duration_seconds_count{m}[{RATE}]))",
                "{{model}} {{task}}",
            ),
        ),
    ]
    queues = [
        timeseries(
            "Queued items by priority",
            "Items waiting in the engine queue, per priority class (all selected models).",
            "short",
            (f"sum by (priority) (sie_queue_items{m})", "{{priority}}"),
            stack=True,
        ),
        timeseries(
            "Queued items by model",
            "Items waiting in the engine queue, per model and priority class.",
            "short",
            (f"sum by (model, priority) (sie_queue_items{m})", "{{model}} {{priority}}"),
        ),
        timeseries(
            "Queue wait p50 / p99 by priority",
            "Time an item waited before its batch ran.",
            "s",
            *quantiles("sie_queue_wait_seconds", "priority", m, "{{priority}}"),
        ),
        timeseries(
            "Dropped items",
            "Queued items dropped because their caller went away.",
            "short",
            (f"sum by (model) (increase(sie_dropped_items_total{m}[{RATE}]))", "{{model}}"),
        ),
    ]
    batching = [
        timeseries(
            "Mean batch size (items)",
            "Items per batch, by model.",
            "short",
            (
                f"sum by (model) (rate(sie_batch_items_sum{m}[{RATE}]))"
                f" / sum by (model) (rate(sie_batch_items_count{m}[{RATE}]))",
                "{{model}}",
            ),
        ),
        timeseries(
            "Batch tokens p50 / p99",
            "Real tokens per batch, against the model's max_batch_tokens budget.",
            "short",
            *quantiles("sie_batch_tokens", "model", m, "{{model}}"),
        ),
        timeseries(
            "Padding overhead",
            "Padded tokens / real tokens over the window (1.0 = no padding).",
            "short",
            (
                f"sum by (model) (rate(sie_padded_tokens_total{m}[{RATE}]))"
                f" / sum by (model) (rate(sie_real_tokens_total{m}[{RATE}]))",
                "{{model}}",
            ),
        ),
        timeseries(
            "Forward pass per batch p50 / p99",
            "Seconds a batch ran in its model, timed on its lane's thread (queueing excluded).",
            "s",
            *quantiles("sie_batch_seconds", "model", m, "{{model}}"),
        ),
        timeseries(
            "Padding ratio p99 per batch",
            "The worst batches' padding ratio.",
            "short",
            (
                f"histogram_quantile(0.99, sum by (le, model) (rate(sie_padding_ratio_bucket{m}[{RATE}])))",
                "{{model}}",
            ),
        ),
    ]
    memory = [
        timeseries(
            "Memory charge per model",
            "Weights plus activation reserve of each resident model, summed over workers.",
            "bytes",
            (f"sum by (model) (sie_model_memory_bytes{m})", "{{model}}"),
            stack=True,
        ),
        timeseries(
            "Budget used per process",
            "Used bytes (models' charges + what the process holds beyond them) / memory budget, per process.",
            "percentunit",
            ("sie_memory_used_bytes / sie_memory_budget_bytes", "{{instance}}"),
        ),
        timeseries(
            "Memory budget and use",
            "Budget, used bytes, and the part of them no model's charge covers (caches, buffers, code), all processes.",
            "bytes",
            ("sum(sie_memory_budget_bytes)", "budget"),
            ("sum(sie_memory_used_bytes)", "used"),
            ("sum(sie_memory_untracked_bytes)", "beyond the charges"),
        ),
        timeseries(
            "Resident copies per model",
            "How many processes hold each model.",
            "short",
            (f"sum by (model) (sie_model_loaded{m})", "{{model}}"),
            stack=True,
        ),
        timeseries(
            "Result cache: hits, misses, shared",
            "Encode and score items per second answered from the exact result cache, computed (misses), or "
            "answered by an identical item already in flight (--encode-cache, X-SIE-Cache).",
            "ops",
            (f"sum by (model) (rate(sie_cache_hits_total{m}[{RATE}]))", "hit {{model}}"),
            (f"sum by (model) (rate(sie_cache_misses_total{m}[{RATE}]))", "miss {{model}}"),
            (f"sum by (model) (rate(sie_cache_coalesced_total{m}[{RATE}]))", "shared {{model}}"),
        ),
        timeseries(
            "Result cache: size and evictions",
            "Bytes and entries the result cache holds (charged to the memory budget), and entries dropped per "
            "interval by reason (lru: its size; budget: a model needed the room; generation or reload).",
            "short",
            ("sum(sie_cache_bytes)", "bytes"),
            ("sum(sie_cache_entries)", "entries"),
            (
                f"sum by (model, reason) (increase(sie_cache_evictions_total{m}[{RATE}]))",
                "evicted {{model}} ({{reason}})",
            ),
        ),
    ]
    lifecycle = [
        timeseries(
            "Loads and evictions",
            "Model loads started and models unloaded (by reason) per interval.",
            "short",
            (f"sum by (model) (increase(sie_model_loads_total{m}[{RATE}]))", "load {{model}}"),
            (
                f"sum by (model, reason) (increase(sie_model_evictions_total{m}[{RATE}]))",
                "evict {{model}} ({{reason}})",
            ),
        ),
        timeseries(
            "Load time p50 / p99",
            "How long a model takes to load.",
            "s",
            *quantiles("sie_model_load_seconds", "model", m, "{{model}}"),
        ),
        timeseries(
            "Out-of-memory batches",
            "Batches that ran out of device memory (then split and retried).",
            "short",
            (f"sum by (model) (increase(sie_oom_total{m}[{RATE}]))", "{{model}}"),
        ),
        timeseries(
            "Batches run apart",
            "Failed batches run again apart so only the members that fail alone get an error "
            "(prefill and decode: each sequence alone; encode, score, extract: halves down to single items).",
            "short",
            (f"sum by (model, kind) (increase(sie_isolation_retries_total{m}[{RATE}]))", "{{model}} {{kind}}"),
        ),
        timeseries(
            "Non-finite outputs",
            "Encode and score items whose output held NaN or Inf: run again in float32 when their model runs "
            "in fp16 or bf16, and failed (NON_FINITE_OUTPUT) when still not finite.",
            "short",
            (f"sum by (model, kind) (increase(sie_nonfinite_reruns_total{m}[{RATE}]))", "{{model}} {{kind}} rerun"),
            (f"sum by (model, kind) (increase(sie_nonfinite_failures_total{m}[{RATE}]))", "{{model}} {{kind}} failed"),
        ),
    ]
    batch_api = [
        timeseries(
            "Batch API batches in progress",
            "OpenAI-style batches (/v1/batches) the servers are running.",
            "short",
            ("sum(sie_batches_in_progress)", "batches"),
        ),
        timeseries(
            "Batch API lines/s",
            "Batch lines finished per second, by endpoint and outcome (completed or failed).",
            "ops",
            (f"sum by (endpoint, outcome) (rate(sie_batch_lines_total[{RATE}]))", "{{endpoint}} {{outcome}}"),
        ),
    ]
    panels = layout(
        [
            ("Throughput", throughput, 2),
            ("Latency", latency, 2),
            ("Queue", queues, 2),
            ("Batching and padding", batching, 2),
            ("Memory", memory, 2),
            ("Loads, evictions and faults", lifecycle, 2),
            ("Batch API", batch_api, 2),
        ]
    )
    model = variable_query("model", "Model", "label_values(sie_requests_total, model)")
    return dashboard(
        "sie-engine",
        "SIE / Engine",
        "Per-model throughput, latency, queue, batching, memory and model lifecycle of sie-server processes.",
        [model],
        panels,
    )


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


DASHBOARDS = {"sie-engine.json": engine_dashboard, "sie-cluster.json": cluster_dashboard}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare with the committed files")
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        text, path = render(build), HERE / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python {Path(__file__).name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
