"""Wire models of Ollama's API (``/api/...``) as its clients send and read it: the official ``ollama``
Python client, ``langchain-ollama`` and the tools that speak Ollama. Requests accept the fields these
clients send that this server does not use (``keep_alive``, ``num_ctx``, ...: listed in the OpenAPI spec) and
refuse, by name, a sampler option this server does not have (``top_k``, ``mirostat``, ...;
``contract/ignored.py``); answers carry Ollama's names, durations in nanoseconds, and leave out what is
``None``."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool

from sie_server.contract.ignored import Compatible, list_ignored, unserved
from sie_server.contract.requests import Penalty, Seed, Stops, Temperature, Whole
from sie_server.contract.tools_wire import Tool
from sie_server.contract.wire import KeepNone, ShownSparse

#: the Ollama release whose API these routes follow (``GET /api/version``; clients gate features on it)
OLLAMA_API_VERSION = "0.12.6"
DEFAULT_NUM_PREDICT = 256  # Ollama's -1 (until the model stops) is capped here, as the native default is
DEFAULT_TEMPERATURE = 0.8  # Ollama's sampling defaults
DEFAULT_TOP_P = 0.9
#: Go's ``time.ParseDuration`` syntax, which Ollama reads ``keep_alive`` strings with ("5m", "1h30m", "-1m")
GO_DURATION = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+")


def _keep_alive(value: float | int | str | None) -> float | int | str | None:
    if isinstance(value, str) and value != "0" and not GO_DURATION.fullmatch(value):
        raise ValueError('must be a duration such as "5m", "1h30m" or "-1m", or a number of seconds (-1: forever)')
    return value


KeepAlive = Annotated[float | int | str | None, AfterValidator(_keep_alive)]
LATEST = ":latest"  # Ollama's default tag: ``name`` and ``name:latest`` are one model


def bare(name: str) -> str:
    """The catalog id an Ollama model name stands for."""
    return name.removesuffix(LATEST)


def now() -> str:
    """A time as Ollama writes it (``created_at``): RFC 3339 in UTC."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class _Open(Compatible):
    # Ollama's clients send fields this server does not use: accepted, ignored (and listed: ``IGNORED``)
    model_config = ConfigDict(extra="ignore", strict=True, json_schema_extra=list_ignored)


#: Ollama's load-time and runtime options: how llama.cpp is set up, not what it answers; ignored
LOAD_OPTIONS = ("num_ctx", "num_batch", "num_gpu", "main_gpu", "low_vram", "num_thread", "numa", "use_mmap",
                "use_mlock", "vocab_only", "num_keep")  # fmt: skip
NO_SAMPLER = "this server's sampler has temperature, top_p, seed, stop and the presence / frequency penalties only"


class OllamaOptions(_Open):
    """``options``: the sampling options this server applies; the load-time ones are ignored; a sampler it
    does not have is refused unless set to the value that turns it off."""

    IGNORED = LOAD_OPTIONS
    num_predict: Whole | None = Field(
        default=None, description=f"tokens to generate; -1 or -2 (Ollama's unbounded): {DEFAULT_NUM_PREDICT}"
    )
    temperature: Annotated[Temperature, Field(ge=0, le=5)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: Seed | None = None
    stop: Stops = None
    presence_penalty: Penalty | None = None
    frequency_penalty: Penalty | None = None
    top_k: Annotated[Whole | None, unserved(NO_SAMPLER, 0)] = None
    min_p: Annotated[float | int | None, unserved(NO_SAMPLER, 0.0, 0)] = None
    typical_p: Annotated[float | int | None, unserved(NO_SAMPLER, 1.0, 1)] = None
    tfs_z: Annotated[float | int | None, unserved(NO_SAMPLER, 1.0, 1)] = None
    repeat_penalty: Annotated[float | int | None, unserved(NO_SAMPLER, 1.0, 1)] = None
    mirostat: Annotated[Whole | None, unserved(NO_SAMPLER, 0)] = None


#: ``format``: ``"json"`` (any JSON object), a JSON schema, or ``""`` / absent (free text)
Format = Literal["", "json"] | dict[str, Any] | None


class OllamaFunctionCall(_Open):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class OllamaToolCall(_Open):
    function: OllamaFunctionCall


class OllamaMessage(_Open):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[str] | None = Field(default=None, description="refused when not empty: text models only")
    tool_calls: list[OllamaToolCall] | None = None
    tool_name: str | None = Field(default=None, description="a tool result: the tool it comes from")
    thinking: str | None = None


class _Generation(_Open):
    IGNORED = ("keep_alive",)
    model: str
    format: Format = None
    options: OllamaOptions | None = None
    stream: StrictBool = True  # Ollama streams unless asked not to
    keep_alive: KeepAlive = Field(
        default=None, description="ignored (models stay until evicted); 0 with nothing to generate is a 400"
    )
    think: StrictBool | str | None = None


class OllamaChatRequest(_Generation):
    """``POST /api/chat``; no messages: load the model."""

    messages: list[OllamaMessage] = Field(default_factory=list)
    tools: list[Tool] | None = None


class OllamaGenerateRequest(_Generation):
    """``POST /api/generate``: ``prompt`` as a user turn in the model's chat template (``system`` before it),
    or as it is with ``raw``; an empty prompt loads the model."""

    prompt: str = ""
    system: str | None = None
    raw: StrictBool = False
    suffix: str | None = Field(default=None, description="refused when not empty: no fill-in-the-middle")
    images: list[str] | None = Field(default=None, description="refused when not empty: text models only")
    context: list[Whole] | None = Field(default=None, description="refused when not empty: send the prompt")
    template: str | None = Field(default=None, description="refused when given: the model's own template is used")


class OllamaEmbedRequest(_Open):
    """``POST /api/embed``; ``truncate`` false: an input over the model's limit is a 400."""

    IGNORED = ("options", "keep_alive")
    model: str
    input: str | list[str] = Field(min_length=1)
    truncate: StrictBool = True
    dimensions: Whole | None = Field(default=None, ge=1)
    options: dict[str, Any] | None = None
    keep_alive: KeepAlive = None


class OllamaEmbeddingsRequest(_Open):
    """``POST /api/embeddings`` (Ollama's older embedding route): one prompt, one vector."""

    IGNORED = ("options", "keep_alive")
    model: str
    prompt: str = ""
    options: dict[str, Any] | None = None
    keep_alive: KeepAlive = None


class OllamaShowRequest(_Open):
    model: str
    verbose: StrictBool = False


class OllamaError(KeepNone):
    """Every error answer on ``/api/...`` (and ``X-SIE-Error-Code: <code>``)."""

    error: str


class OllamaEmbedResponse(KeepNone):
    model: str
    embeddings: list[list[float]]
    total_duration: int
    load_duration: int
    prompt_eval_count: int


class OllamaEmbeddingsResponse(KeepNone):
    embedding: list[float]


class OllamaMessageOut(ShownSparse):
    role: Literal["assistant"] = "assistant"
    content: str
    tool_calls: list[OllamaToolCall] | None = None


class _Done(ShownSparse):
    """What every answer line carries; the last (``done: true``) also how it ended and its counts."""

    model: str
    created_at: str
    done: bool
    done_reason: str | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None


class OllamaChatResponse(_Done):
    message: OllamaMessageOut


class OllamaGenerateResponse(_Done):
    response: str


class OllamaModelDetails(KeepNone):
    parent_model: str = ""
    format: str
    family: str
    families: list[str]
    parameter_size: str
    quantization_level: str


class OllamaModel(KeepNone):
    """A model as ``/api/tags`` lists it."""

    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: OllamaModelDetails


class OllamaTags(KeepNone):
    models: list[OllamaModel]


class OllamaRunning(OllamaModel):
    """A loaded model as ``/api/ps`` lists it; it stays until evicted (``expires_at`` far ahead)."""

    expires_at: str
    size_vram: int
    context_length: int | None


class OllamaRunningList(KeepNone):
    models: list[OllamaRunning]


class OllamaShow(KeepNone):
    modelfile: str
    parameters: str
    template: str
    license: str
    details: OllamaModelDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


class OllamaVersion(KeepNone):
    version: str
