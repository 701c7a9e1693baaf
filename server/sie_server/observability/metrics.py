"""Every Prometheus metric the server exports, on one registry per server instance."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

disable_created_metrics()  # type: ignore[no-untyped-call]  # no `*_created` series: dashboards do not use them

LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKEN_BUCKETS = (16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
RATIO_BUCKETS = (1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0)
LOAD_BUCKETS = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "sie_requests",
            "Requests by model, task and outcome (ok or error code)",
            ["model", "task", "status"],
            registry=r,
        )
        self.request_duration = Histogram(
            "sie_request_duration_seconds",
            "Request latency",
            ["model", "task"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_items = Gauge("sie_queue_items", "Items waiting", ["model", "priority"], registry=r)
        self.queue_wait = Histogram(
            "sie_queue_wait_seconds",
            "Time an item waited before its batch ran",
            ["model", "priority"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_items = Histogram("sie_batch_items", "Items per batch", ["model"], buckets=SIZE_BUCKETS, registry=r)
        self.batch_tokens = Histogram(
            "sie_batch_tokens",
            "Real (unpadded) tokens per batch",
            ["model"],
            buckets=TOKEN_BUCKETS,
            registry=r,
        )
        self.padding_ratio = Histogram(
            "sie_padding_ratio",
            "Padded tokens / real tokens per batch",
            ["model"],
            buckets=RATIO_BUCKETS,
            registry=r,
        )
        self.batch_seconds = Histogram(
            "sie_batch_seconds",
            "Seconds a batch ran in its model (the forward pass, on the lane's thread)",
            ["model"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.real_tokens = Counter("sie_real_tokens", "Real tokens run", ["model"], registry=r)
        self.padded_tokens = Counter("sie_padded_tokens", "Tokens run including padding", ["model"], registry=r)
        self.dropped_items = Counter(
            "sie_dropped_items", "Queued items dropped because their caller went away", ["model"], registry=r
        )
        self.model_loaded = Gauge("sie_model_loaded", "1 while the model is resident", ["model"], registry=r)
        self.model_memory = Gauge(
            "sie_model_memory_bytes",
            "Charge of a resident model (weights + activation reserve)",
            ["model"],
            registry=r,
        )
        self.memory_budget = Gauge("sie_memory_budget_bytes", "The memory budget for models", registry=r)
        self.memory_used = Gauge(
            "sie_memory_used_bytes",
            "Memory counted against the budget: resident models' charges plus what the process holds beyond them",
            registry=r,
        )
        self.memory_untracked = Gauge(
            "sie_memory_untracked_bytes",
            "What the process holds beyond its holding at start and its models' charges (caches, buffers, code)",
            registry=r,
        )
        self.model_loads = Counter("sie_model_loads", "Model loads started", ["model"], registry=r)
        self.model_evictions = Counter(
            "sie_model_evictions", "Models unloaded, by reason", ["model", "reason"], registry=r
        )
        self.model_load_seconds = Histogram(
            "sie_model_load_seconds", "Load duration", ["model"], buckets=LOAD_BUCKETS, registry=r
        )
        self.oom = Counter("sie_oom", "Batches that ran out of memory", ["model"], registry=r)
        self.isolation_retries = Counter(
            "sie_isolation_retries",
            "Failed batches run again apart so only the members that fail alone get an error "
            "(kind: prefill or decode, each sequence alone; encode, score or extract, halves down to single items)",
            ["model", "kind"],
            registry=r,
        )
        self.nonfinite_reruns = Counter(
            "sie_nonfinite_reruns",
            "Encode and score items whose output held NaN or Inf in a reduced precision (fp16, bf16) and were "
            "run again in float32 (engine/finite.py)",
            ["model", "kind"],
            registry=r,
        )
        self.nonfinite_failures = Counter(
            "sie_nonfinite_failures",
            "Encode and score items answered NON_FINITE_OUTPUT: their output held NaN or Inf in float32 too "
            "(or their model runs in float32 or int8, with nothing to run them again in)",
            ["model", "kind"],
            registry=r,
        )
        self.batches_in_progress = Gauge(
            "sie_batches_in_progress", "Batch API batches this server is running (OpenAI's /v1/batches)", registry=r
        )
        self.batch_lines = Counter(
            "sie_batch_lines",
            "Batch API lines finished, by endpoint and outcome (completed: the output file; failed: the error file)",
            ["endpoint", "outcome"],
            registry=r,
        )

        self.cache_hits = Counter(
            "sie_cache_hits", "Encode and score items answered from the result cache", ["model"], registry=r
        )
        self.cache_misses = Counter(
            "sie_cache_misses", "Encode and score items computed for the result cache (one per distinct item)",
            ["model"], registry=r,
        )  # fmt: skip
        self.cache_coalesced = Counter(
            "sie_cache_coalesced",
            "Encode and score items answered by an identical item already being computed (in flight or in the request)",
            ["model"],
            registry=r,
        )
        self.cache_evictions = Counter(
            "sie_cache_evictions",
            "Result cache entries dropped, by reason (lru: its size; budget: a model needed the room; "
            "generation: the model's revision or precision changed; reload)",
            ["model", "reason"],
            registry=r,
        )
        self.cache_bytes = Gauge(
            "sie_cache_bytes", "Bytes the result cache holds (charged to the memory budget)", registry=r
        )
        self.cache_entries = Gauge("sie_cache_entries", "Entries in the result cache", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)
