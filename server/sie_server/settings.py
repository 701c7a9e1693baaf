"""Server settings: one validated object built from CLI flags and ``SIE_*`` environment variables.

Every default, description and bound is written here once (the gateway's own fields are in
``cluster/gateway_settings.py``); ``cli_flags.py`` turns the fields into flags. A field is
``--kebab-name`` on the command line and ``SIE_<UPPER_NAME>`` in the environment unless its
class's ``CLI`` table says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sie_server.catalog.schema import CpuPrecision, GgufFormat
from sie_server.contract.limits import (
    DEFAULT_MAX_AUDIO_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_DOCUMENT_PAGES,
    DEFAULT_MAX_IMAGE_PIXELS,
    DEFAULT_MAX_ITEMS,
    DEFAULT_MAX_TEXT_BYTES,
    Limits,
)

REPO_CATALOG = Path(__file__).resolve().parents[2] / "configs" / "models"
DEFAULT_ENCODE_CACHE = "256MiB"  # --encode-cache: about 150,000 384-dim float32 vectors


def default_data_dir() -> Path:
    """Where the server keeps what outlives it (Batch API files and state): $XDG_DATA_HOME/sie or ~/.local/share/sie."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".local" / "share") / "sie"


def default_threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@dataclass(frozen=True)
class Cli:
    """How one field differs from the usual ``--kebab-name`` / ``SIE_<UPPER_NAME>``."""

    flag: str | None = None  # the long flag, when not --kebab-name
    short: str | None = None  # e.g. "-v"
    env: str | None = None  # the variable, when not SIE_<UPPER_NAME>
    also_env: tuple[str, ...] = ()  # further variables read when the first is unset (HF_HUB_OFFLINE)
    no_flag: bool = False  # set by the environment only (secrets stay out of `ps`)
    no_env: bool = False  # set by the flag only
    repeat: bool = False  # the flag is given once per value instead of comma-separated
    hidden: bool = False  # set in code only: neither flag nor variable


def check_key(key: str) -> str:
    """A key a client can send in ``Authorization: Bearer <key>``: printable ASCII, no spaces."""
    if not key or "," in key or not all(33 <= ord(c) <= 126 for c in key):
        raise ValueError("an API key is printable ASCII without spaces or commas")
    return key


def read_key_file(path: Path) -> tuple[str, ...]:
    """The keys in ``path``, one a line; blank lines and lines starting with # are skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the key file {path}: {exc}") from None
    keys = tuple(line.strip() for line in lines if line.strip() and not line.strip().startswith("#"))
    if not keys:
        raise ValueError(f"the key file {path} has no keys")
    for number, key in enumerate(keys, 1):
        try:
            check_key(key)
        except ValueError as exc:
            raise ValueError(f"key {number} in {path}: {exc}") from None
    return keys


class CatalogSettings(BaseModel):
    """What picks the models: the catalog folder and the ids served from it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    CLI: ClassVar[Mapping[str, Cli]] = {"models": Cli(short="-m")}

    models_dir: Path = Field(
        default=REPO_CATALOG, description="catalog folder of model YAML files; a file added there is served"
    )
    models: list[str] | None = Field(
        default=None, description="comma-separated ids to serve; unset serves the whole catalog"
    )
    default_model: str | None = Field(
        default=None,
        description="the model of TEI's routes (/embed, /rerank, POST / ...) when a request names none "
        "(in its model field or X-SIE-Model header)",
    )


class CommonSettings(CatalogSettings):
    """The fields the server and the gateway share."""

    CLI: ClassVar[Mapping[str, Cli]] = {
        **CatalogSettings.CLI,
        "verbose": Cli(short="-v"),
        "max_items_per_request": Cli(env="SIE_MAX_ITEMS"),
        "api_keys": Cli(flag="--api-key", repeat=True),
        "admin_keys": Cli(flag="--admin-key", repeat=True),
    }

    host: str = Field(default="127.0.0.1", description="bind address")
    port: int = Field(default=8080, ge=0, le=65535, description="bind port")
    verbose: bool = Field(default=False, description="debug logs and an access-log line per request")
    log_format: Literal["text", "json"] = Field(
        default="text", description="text lines, or JSON lines with the request id on each line about a request"
    )
    max_items_per_request: int = Field(default=DEFAULT_MAX_ITEMS, ge=1, description="items in one request")
    max_text_bytes: int = Field(default=DEFAULT_MAX_TEXT_BYTES, ge=1, description="bytes of one text (413 past it)")
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1, description="bytes of one body (413 past it)")
    max_image_pixels: int = Field(
        default=DEFAULT_MAX_IMAGE_PIXELS,
        ge=1,
        description="pixels one image may declare (width x height), refused before it is decoded",
    )
    max_document_pages: int = Field(default=DEFAULT_MAX_DOCUMENT_PAGES, ge=1, description="pages of one document")
    max_audio_seconds: float = Field(
        default=DEFAULT_MAX_AUDIO_SECONDS,
        gt=0,
        description="seconds of audio in one item, refused from its header before decoding (or as decoding passes it)",
    )

    @property
    def limits(self) -> Limits:
        """What every request is checked against."""
        return Limits(
            self.max_items_per_request,
            self.max_text_bytes,
            self.max_body_bytes,
            self.max_image_pixels,
            self.max_document_pages,
            self.max_audio_seconds,
        )

    ack_wait_s: float = Field(
        default=30.0, gt=0, description="seconds JetStream waits for a worker's ack before redelivering"
    )
    api_keys: tuple[str, ...] = Field(
        default=(), description="bearer key for /v1/, /v2/ and TEI's routes, repeatable; unset: no keys"
    )
    api_key_file: Path | None = Field(
        default=None, description="a file of API keys, one a line (# comments), read at start: keys stay out of ps"
    )
    admin_keys: tuple[str, ...] = Field(
        default=(), description="bearer key for management routes (reload), repeatable; unset: any API key may"
    )
    metrics_need_key: bool = Field(default=False, description="/metrics needs an API key too")
    batch_max_file_bytes: int = Field(
        default=200 * 10**6,
        ge=1,
        description="bytes of one Batch API input file (POST /v1/files), refused with 413 while it is read",
    )
    batch_max_lines: int = Field(
        default=50_000, ge=1, description="requests (lines) in one Batch API input file (400 past it)"
    )
    mcp_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="comma-separated Host values /mcp accepts besides loopback (name, name:port, name:* for any "
        "port), and their http(s) Origins; '*' turns the Host/Origin check off (a proxy in front checks them)",
    )
    max_queued_per_key: int | None = Field(
        default=None, ge=1, description="items one key may have in flight (429 RATE_LIMITED past it); unset: no limit"
    )
    drain_timeout_s: float = Field(
        default=90.0,
        gt=0,
        description="longest drain after SIGTERM: work unfinished then is failed with 503 and the process exits",
    )

    @field_validator("api_keys", "admin_keys", mode="after")
    @classmethod
    def _usable_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for key in value:
            check_key(key)
        return value

    @field_validator("api_key_file", mode="after")
    @classmethod
    def _readable_key_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            read_key_file(value)
        return value


class Settings(CommonSettings):
    CLI: ClassVar[Mapping[str, Cli]] = {**CommonSettings.CLI, "offline": Cli(also_env=("HF_HUB_OFFLINE",))}

    preload: list[str] = Field(default_factory=list, description="comma-separated ids to load before ready")
    device: Literal["auto", "cpu", "cuda"] | str = Field(default="auto", description="auto | cpu | cuda")
    offline: bool = Field(default=False, description="never touch the Hugging Face hub")
    threads: int = Field(default_factory=default_threads, ge=1, description="torch threads (default: all cores)")
    load_timeout_s: float = Field(default=300.0, gt=0, description="how long a request waits for a cold model")
    max_load_waiters: int = Field(
        default=128,
        ge=0,
        description="requests one loading model holds (answered once it is up); more get 503 MODEL_LOADING with "
        "Retry-After at once, so a burst on a cold model starts one load and holds no unbounded crowd",
    )
    stall_after_s: float = Field(
        default=120.0,
        gt=0,
        description="a batch (or decode step) running this long marks its model stalled: /readyz answers 503 "
        "naming it until the batch ends",
    )
    max_queued_items: int = Field(default=65536, ge=1, description="admission limit (QUEUE_FULL past it)")
    memory_budget: str | None = Field(
        default=None,
        description="bytes (6GiB, 512MB) or a fraction of device memory / available RAM; default 0.8",
    )
    pin: list[str] = Field(default_factory=list, description="comma-separated ids loaded at start and never evicted")
    encode_cache: str = Field(
        default=DEFAULT_ENCODE_CACHE,
        description="bytes of encode results and cross-encoder scores kept for identical items (256MiB, 1GiB), "
        "charged to --memory-budget and given up first when a model needs room; 0 turns the cache and the "
        "sharing of identical items in flight off (a request opts out with X-SIE-Cache: bypass)",
    )
    idle_evict_s: float | None = Field(default=None, gt=0, description="unload models unused this long")
    batch_share: float = Field(
        default=0.1, ge=0, le=1, description="minimum share of batches for batch-class work while interactive waits"
    )
    queue: str | None = Field(default=None, description="nats:// URL: also pull work for --pool from JetStream")
    pool: str = Field(default="default", description="the worker pool to pull for")
    max_deliver: int = Field(default=5, ge=1, description="deliveries before a message goes to the dead-letter stream")
    single_lane: bool = Field(
        default=False, description="run batch-class and interactive batches in one lane instead of two"
    )
    batch_defer_ms: int = Field(
        default=250,
        ge=0,
        description="on a CPU, a batch-class batch does not start while an interactive one runs (they would share "
        "the cores) unless its oldest item has waited this long, and a running batch-class pass stops at its model's "
        "next module while an interactive pass runs, for at most this long; 0: the two lanes run side by side, as on "
        "a GPU",
    )
    cpu_precision: list[CpuPrecision] | None = Field(
        default=None,
        min_length=1,
        description="comma-separated precisions (int8, bf16, fp32) every cpu model may try, in order, instead of "
        "its profile's cpu_precision; each must pass the quality gate, fp32 is the last resort",
    )
    gguf_formats: list[GgufFormat] | None = Field(
        default=None,
        min_length=1,
        description="comma-separated GGUF weight formats (q8_0, q4_0, f16, as_is) every llamacpp model may try, in "
        "order, instead of its profile's gguf_formats; each copy must pass the gate, as_is is the last resort",
    )
    torch_prefill_tokens: int | None = Field(
        default=None,
        ge=0,
        description="llama.cpp models read prompts of at least this many tokens with torch in float32 and decode "
        "on llama.cpp, instead of their profile's torch_prefill_tokens; 0: llama.cpp reads every prompt",
    )
    batch_max_tokens: int | None = Field(
        default=2048, ge=1, description="token cap of a batch-class batch, so interactive work waits less; 0: no cap"
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="folder for what outlives the process: Batch API files, batch state and finished lines (SQLite)",
    )
    batch_inflight: int = Field(
        default=8,
        ge=1,
        description="Batch API lines of all batches in flight at once (each at the batch priority): the most of the "
        "queue batches hold, so live calls keep their latency",
    )

    @property
    def encode_cache_bytes(self) -> int:
        """``encode_cache`` in bytes (0: off)."""
        from sie_server.memory.budget import parse_bytes  # here: the gateway imports settings without memory/

        return parse_bytes(self.encode_cache)

    @field_validator("encode_cache", mode="after")
    @classmethod
    def _a_size(cls, value: str) -> str:
        from sie_server.memory.budget import parse_bytes

        parse_bytes(value)
        return value

    @field_validator("cpu_precision", mode="before")
    @classmethod
    def _known_precisions(cls, value: Any) -> Any:
        known = get_args(CpuPrecision)
        unknown = [str(v) for v in value if v not in known] if isinstance(value, list) else []
        if unknown:
            raise ValueError(f"unknown {', '.join(unknown)}; use a list of {', '.join(known)}")
        return value

    @field_validator("gguf_formats", mode="before")
    @classmethod
    def _known_formats(cls, value: Any) -> Any:
        known = get_args(GgufFormat)
        unknown = [str(v) for v in value if v not in known] if isinstance(value, list) else []
        if unknown:
            raise ValueError(f"unknown {', '.join(unknown)}; use a list of {', '.join(known)}")
        return value

    @field_validator("batch_max_tokens", mode="before")
    @classmethod
    def _zero_is_no_cap(cls, value: Any) -> Any:
        return None if value in (0, "0") else value
