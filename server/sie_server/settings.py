"""Server settings: one validated object built from CLI flags and ``SIE_*`` environment variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sie_server.catalog.schema import CpuPrecision

REPO_CATALOG = Path(__file__).resolve().parents[2] / "configs" / "models"


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    models_dir: Path = REPO_CATALOG
    models: list[str] | None = Field(default=None, description="ids to serve; None serves the whole catalog")
    preload: list[str] = Field(default_factory=list)
    device: Literal["auto", "cpu", "cuda"] | str = "auto"
    offline: bool = False
    threads: int = Field(default_factory=default_threads, ge=1)
    verbose: bool = False
    load_timeout_s: float = Field(default=300.0, gt=0, description="how long a request waits for a cold model")
    max_queued_items: int = Field(default=65536, ge=1)
    max_items_per_request: int = Field(default=8192, ge=1)
    max_text_bytes: int = Field(default=256 * 1024, ge=1)
    max_body_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    memory_budget: str | None = Field(
        default=None,
        description="bytes (6GiB, 512MB) or a fraction of device memory / available RAM; default 0.8",
    )
    pin: list[str] = Field(default_factory=list, description="ids loaded at start and never evicted")
    idle_evict_s: float | None = Field(default=None, gt=0, description="unload models unused this long")
    batch_share: float = Field(default=0.1, ge=0, le=1, description="minimum share of batches for batch-class work")
    queue: str | None = Field(default=None, description="nats:// URL: also pull work for `pool` from JetStream")
    pool: str = "default"
    ack_wait_s: float = Field(default=30.0, gt=0)
    max_deliver: int = Field(default=5, ge=1)
    single_lane: bool = Field(
        default=False, description="run batch-class and interactive batches in one lane instead of two"
    )
    cpu_precision: list[CpuPrecision] | None = Field(
        default=None,
        min_length=1,
        description="precisions every cpu model may try, in order, instead of its profile's cpu_precision",
    )
    batch_max_tokens: int | None = Field(
        default=2048, ge=1, description="token cap of a batch-class batch, so interactive work waits less"
    )
