"""The SIE / Engine dashboard: per-model throughput, latency, queue, batching, memory and model lifecycle
of sie-server processes."""

from __future__ import annotations

from typing import Any

from panels import RATE, dashboard, layout, quantiles, timeseries, variable_query


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
