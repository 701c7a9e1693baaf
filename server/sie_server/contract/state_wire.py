"""Wire models of what a server or gateway says of its state: its models (``/v1/models``: catalog facts, live
state, precision, load progress), its memory (``/v1/memory``) and its readiness (``/readyz``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from sie_server.contract.wire import KeepNone, Sparse


class GateTrial(KeepNone):
    precision: str
    outcome: str
    detail: str | None = None
    min_cosine: float | None = None
    mean_cosine: float | None = None
    threshold: float | None = None
    top1_agreement: float | None = None
    kl: float | None = None
    speedup: float | None = None


class Precision(KeepNone):
    running: str | None
    allowed: list[str]
    reason: str | None
    gate: list[GateTrial]


class LoadProgress(BaseModel):
    """Where a load in progress is: its stage (resolving weights, planning memory, reading weights,
    warming up), seconds since the load and the stage began, and the stage's fraction where known."""

    model_config = ConfigDict(extra="forbid")
    stage: str
    detail: str | None = None
    elapsed_s: float
    stage_elapsed_s: float
    fraction: float | None = None


def owner(model_id: str) -> str:
    """OpenAI's ``owned_by`` for a model id: its organisation (``BAAI`` of ``BAAI/bge-small-en-v1.5``), else sie."""
    return model_id.split("/", 1)[0] if "/" in model_id else "sie"


class ModelInfo(BaseModel):
    """A model's catalog facts and its live state where it is served; with OpenAI's Model fields (``object``,
    ``created``, ``owned_by``) as ``GET /v1/models/{model}`` is the openai clients' ``models.retrieve`` too."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "sie"
    name: str
    adapter: str
    tasks: list[str]
    inputs: list[str]
    outputs: list[str]
    dims: dict[str, int]
    score_mode: str | None
    max_sequence_length: int | None
    revision: str | None
    state: str
    loaded: bool
    resident_bytes: int
    charge_bytes: int
    pinned: bool
    weights_source: str | None
    available_offline: bool
    last_error: str | None
    load_seconds: float | None
    precision: Precision
    profile: dict[str, Any] | None = None
    backend: str | None = None
    load_progress: LoadProgress | None = Field(default=None, description="while state is loading: how far it is")


class GatewayModelInfo(ModelInfo):
    """What a gateway says of a model: the most useful worker report, and where it runs."""

    pool: str
    workers: int
    loaded_on: int


class OpenAIModel(KeepNone):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(Sparse):
    """OpenAI's list shape (``object``, ``data``) beside SIE's (``models``, ``cpu``)."""

    object: Literal["list"] = "list"
    data: list[OpenAIModel]
    models: list[SerializeAsAny[ModelInfo]]
    cpu: dict[str, Any] | None = None


class ModelMemory(KeepNone):
    id: str
    state: str
    charge_bytes: int
    resident_bytes: int
    reserve_bytes: int
    pinned: bool


class MemoryReport(KeepNone):
    """``used_bytes`` = ``charged_bytes`` (the models' charges) + ``untracked_bytes`` (what the process
    holds beyond its start, ``runtime_bytes``, and the charges); ``process_bytes``: its holding now
    (resident set on CPU, the CUDA allocator's reservation on a GPU)."""

    device: str
    budget_bytes: int
    used_bytes: int
    free_bytes: int
    charged_bytes: int
    untracked_bytes: int
    process_bytes: int
    runtime_bytes: int
    models: list[ModelMemory]
    cache_bytes: int = 0  # the result cache's part of charged_bytes


class ModelProblem(KeepNone):
    """Why a model cannot serve now (``/readyz``, ``engine/model_health.py``): ``load_failed`` (its last load
    failed), ``stalled`` (a batch of it has run past ``--stall-after-s``), ``stopped`` (the batch loop ended;
    named ``*``, every model). ``required``: pinned or preloaded, so its problem makes ``/readyz`` 503."""

    problem: Literal["load_failed", "stalled", "stopped"]
    message: str
    required: bool


class Readiness(Sparse):
    # disconnected: a queue worker without NATS; failing: a required model failed to load, or a batch stalled
    status: Literal["ready", "starting", "draining", "disconnected", "failing"]
    queued_items: int | None = None
    inflight_requests: int | None = None
    preload_errors: dict[str, str] | None = None
    models: dict[str, ModelProblem] | None = None  # the models that cannot serve now, and why


class NoWorkerYet(KeepNone):
    """202 from a gateway asked not to wait (``X-SIE-Wait-For-Worker: false``) when its pool has no worker."""

    status: Literal["no worker yet"] = "no worker yet"
    pool: str
