"""The one list of Prometheus metrics that sie-server and the cluster gateway export.

Dashboards (deploy/grafana) may use only these; test_metrics_list checks the list against the
code. Names are as exposed: counters end in _total; a histogram's series are its name with
_bucket (plus the `le` label), _sum and _count.
"""

from __future__ import annotations

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"

# (exposed name, type, labels)
EXPORTED_METRICS: list[tuple[str, str, tuple[str, ...]]] = [
    # sie-server (single server and cluster workers)
    ("sie_requests_total", COUNTER, ("model", "task", "status")),
    ("sie_request_duration_seconds", HISTOGRAM, ("model", "task")),
    ("sie_queue_items", GAUGE, ("model", "priority")),
    ("sie_queue_wait_seconds", HISTOGRAM, ("model", "priority")),
    ("sie_batch_items", HISTOGRAM, ("model",)),
    ("sie_batch_tokens", HISTOGRAM, ("model",)),
    ("sie_padding_ratio", HISTOGRAM, ("model",)),
    ("sie_batch_seconds", HISTOGRAM, ("model",)),
    ("sie_real_tokens_total", COUNTER, ("model",)),
    ("sie_padded_tokens_total", COUNTER, ("model",)),
    ("sie_dropped_items_total", COUNTER, ("model",)),
    ("sie_model_loaded", GAUGE, ("model",)),
    ("sie_model_memory_bytes", GAUGE, ("model",)),
    ("sie_memory_budget_bytes", GAUGE, ()),
    ("sie_memory_used_bytes", GAUGE, ()),
    ("sie_memory_untracked_bytes", GAUGE, ()),
    ("sie_model_loads_total", COUNTER, ("model",)),
    ("sie_model_evictions_total", COUNTER, ("model", "reason")),
    ("sie_model_load_seconds", HISTOGRAM, ("model",)),
    ("sie_oom_total", COUNTER, ("model",)),
    ("sie_isolation_retries_total", COUNTER, ("model", "kind")),
    ("sie_nonfinite_reruns_total", COUNTER, ("model", "kind")),
    ("sie_nonfinite_failures_total", COUNTER, ("model", "kind")),
    ("sie_cache_hits_total", COUNTER, ("model",)),
    ("sie_cache_misses_total", COUNTER, ("model",)),
    ("sie_cache_coalesced_total", COUNTER, ("model",)),
    ("sie_cache_evictions_total", COUNTER, ("model", "reason")),
    ("sie_cache_bytes", GAUGE, ()),
    ("sie_cache_entries", GAUGE, ()),
    ("sie_batches_in_progress", GAUGE, ()),
    ("sie_batch_lines_total", COUNTER, ("endpoint", "outcome")),
    # cluster gateway
    ("sie_gateway_requests_total", COUNTER, ("task", "status")),
    ("sie_gateway_request_duration_seconds", HISTOGRAM, ("task",)),
    ("sie_gateway_pending_items", GAUGE, ("pool", "priority")),
    ("sie_gateway_workers", GAUGE, ("pool",)),
    ("sie_gateway_payloads_by_reference_total", COUNTER, ("direction",)),
    ("sie_gateway_replies_dropped_total", COUNTER, ("reason",)),
    ("sie_gateway_work_seconds", HISTOGRAM, ("pool", "priority")),
    ("sie_gateway_dead_letters", GAUGE, ("pool",)),
    ("sie_gateway_model_workers", GAUGE, ("pool", "model", "state")),
    ("sie_gateway_batches_in_progress", GAUGE, ()),
]

GATEWAY_PREFIX = "sie_gateway_"

# Labels that scraping adds to every series (Prometheus Operator's ServiceMonitor), plus `pool`,
# which the chart's worker ServiceMonitor copies from the worker Service onto worker series.
SCRAPE_LABELS = frozenset({"instance", "job", "namespace", "pod", "service", "endpoint", "container", "pool"})

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def series() -> dict[str, tuple[str, str, frozenset[str]]]:
    """Every series name a query may select -> (metric, type, labels it carries, scrape labels included)."""
    out: dict[str, tuple[str, str, frozenset[str]]] = {}
    for name, kind, labels in EXPORTED_METRICS:
        carried = frozenset(labels) | SCRAPE_LABELS
        if kind == HISTOGRAM:
            out[f"{name}_bucket"] = (name, kind, carried | {"le"})
            out[f"{name}_sum"] = (name, kind, carried)
            out[f"{name}_count"] = (name, kind, carried)
        else:
            out[name] = (name, kind, carried)
    return out
