"""``GET /v1/status``: what an operator watches, in one answer (the status page and ``sie-server top``
read it). Figures marked "last minute" are over the last 60 s, or since start when that is shorter.

The shape is kept stable: fields are added, never renamed or removed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ModelStatus(BaseModel):
    id: str
    state: Literal["available", "loading", "loaded", "failed"]
    loading_s: float | None = Field(default=None, description="seconds since the load started, while loading")
    load_seconds: float | None = Field(default=None, description="how long the last load took")
    error: str | None = Field(default=None, description="why the load failed, when failed")
    generator: bool = Field(description="the model does generate (decode tokens/s applies)")
    pinned: bool = False
    charge_bytes: int = Field(default=0, description="bytes counted against the memory budget")
    requests: int = Field(default=0, description="requests finished in the last minute")
    requests_per_s: float = 0.0
    p50_ms: float | None = Field(default=None, description="median latency of the last minute's requests")
    p99_ms: float | None = None
    queued: dict[str, int] = Field(default_factory=dict, description="items waiting, per priority class")
    batch_fill: float | None = Field(
        default=None, description="last minute: mean real tokens per batch / the profile's max_batch_tokens"
    )
    padding_ratio: float | None = Field(
        default=None, description="last minute: padded tokens / real tokens (1.0: none)"
    )
    decode_tokens_per_s: float | None = Field(default=None, description="last minute: tokens decoded per second")
    workers: int | None = Field(default=None, description="gateway: live workers of the model's pool")
    loaded_on: int | None = Field(default=None, description="gateway: live workers that hold the model")


class ErrorEntry(BaseModel):
    at: float = Field(description="Unix time, seconds")
    model: str
    code: str
    message: str


class MemoryStatus(BaseModel):
    budget_bytes: int
    used_bytes: int = Field(description="charged + untracked")
    charged_bytes: int = Field(description="the models' charges")
    untracked_bytes: int = Field(description="what the process holds beyond its start and the charges")
    free_bytes: int


class WorkerStatus(BaseModel):
    id: str
    pool: str
    models: dict[str, str] = Field(description="model id -> its state on the worker")
    inflight: int
    stopping: bool
    seen_s_ago: float


class PoolStatus(BaseModel):
    name: str
    workers: list[WorkerStatus]
    pending: dict[str, int] = Field(description="work messages waiting, per priority class")
    dead_letters: int | None = Field(
        default=None, description="messages parked in the dead-letter stream (None: unknown)"
    )


class BatchesStatus(BaseModel):
    """The Batch API (``/v1/batches``) on this server: counts since the process started."""

    in_progress: int = Field(description="batches running now")
    lines_in_flight: int = Field(description="lines running now (at most inflight_limit)")
    peak_lines_in_flight: int = Field(description="the most lines ever in flight at once since start")
    inflight_limit: int = Field(description="--batch-inflight")
    lines_done: int = Field(description="lines finished with a 2xx answer (the output files)")
    lines_failed: int = Field(description="lines finished otherwise (the error files)")
    lines_per_s: float = Field(description="lines finished per second over the last 30 s")


class StatusReport(BaseModel):
    role: Literal["server", "gateway"]
    version: str
    uptime_s: float
    window_s: float = Field(description="the span the last-minute figures cover now")
    models: list[ModelStatus] = Field(description="every served model; loaded, loading and failed ones first")
    errors: list[ErrorEntry] = Field(description="the last errors, newest first")
    memory: MemoryStatus | None = Field(default=None, description="server only")
    pools: list[PoolStatus] = Field(default_factory=list, description="gateway only")
    batches: BatchesStatus | None = Field(default=None, description="the Batch API, where it runs")
