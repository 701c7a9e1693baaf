"""Wire models of request bodies. Unknown fields are refused so typos get a clear 400 (the OpenAI,
Cohere and Jina shapes accept the fields their clients send, by the rule in ``contract/ignored.py``);
values are validated strictly, so a body the OpenAPI spec's types refuse is refused."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from sie_server.contract.grammar_wire import GrammarIn, ResponseFormat
from sie_server.contract.ignored import Compatible, unserved
from sie_server.contract.tools_wire import ChatMessageIn, Tool, ToolCall, ToolChoice, ToolRequest

OutputType = Literal["dense", "sparse", "multivector", "muvera"]
OutputDtype = Literal["float32", "float16", "int8", "uint8", "binary", "ubinary"]
MIN_TEMPERATURE = 1e-3  # below it (but above 0) sampling divides logits into infinities: use 0 for greedy
MAX_STOPS = 16
MAX_STOP_CHARS = 256


def _temperature(value: float) -> float:
    if 0 < value < MIN_TEMPERATURE:
        raise ValueError(f"must be 0 (greedy) or at least {MIN_TEMPERATURE}")
    return value


def _stops(value: str | list[str] | None) -> str | list[str] | None:
    stops = [value] if isinstance(value, str) else value or []
    if len(stops) > MAX_STOPS:
        raise ValueError(f"at most {MAX_STOPS} stop strings")
    for stop in stops:
        if not stop or len(stop) > MAX_STOP_CHARS:
            raise ValueError(f"each stop string must have 1 to {MAX_STOP_CHARS} characters")
    return value


def _whole(value: Any) -> Any:
    """JSON's `5.0` is the integer 5 (as JSON Schema counts it); `5.5`, `"5"` and `true` are not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Whole = Annotated[int, BeforeValidator(_whole)]  # an integer field of a strict model
Temperature = Annotated[float, AfterValidator(_temperature)]
Stops = Annotated[str | list[str] | None, AfterValidator(_stops)]
Seed = Annotated[Whole, Field(ge=-(2**63), lt=2**64)]
Penalty = Annotated[float, Field(ge=-2, le=2, allow_inf_nan=False)]  # OpenAI's range
FREQUENCY_PENALTY = "subtracted from a token's logit for each time it was generated so far (OpenAI's)"
PRESENCE_PENALTY = "subtracted from a token's logit once it has been generated (OpenAI's)"


class Wire(BaseModel):
    # strict: a number is a number, not a numeric string or a boolean (`"seed": false` or
    # `"top_n": "3"` is a 400, as the OpenAPI spec's types say)
    model_config = ConfigDict(extra="forbid", strict=True)


def _base64(value: Any, what: str) -> Any:
    if isinstance(value, str):  # JSON carries bytes as base64; msgpack as bin
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{what} data must be base64") from None
    return value


class ImageIn(Wire):
    data: bytes
    format: str | None = None

    @field_validator("data", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        return _base64(value, "image")


class DocumentIn(Wire):
    """A whole document: ``format`` (pdf, docx, pptx, xlsx, html, md) is a hint; the bytes are sniffed."""

    data: bytes
    format: str | None = None

    @field_validator("data", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        return _base64(value, "document")


MAX_SAMPLE_RATE = 384_000  # the highest rate audio interfaces record at; a rate past it is a mistake


class AudioIn(Wire):
    """Audio: ``format`` (wav, flac, mp3, ogg, webm, m4a, aiff, or any container FFmpeg decodes; ``pcm`` for raw
    16-bit little-endian mono) is a hint, the bytes are sniffed; ``sample_rate`` (Hz) is what raw ``pcm`` was
    recorded at."""

    data: bytes
    format: str | None = None
    sample_rate: Whole | None = Field(default=None, ge=1, le=MAX_SAMPLE_RATE)

    @field_validator("data", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        return _base64(value, "audio")


MAX_IMAGES_PER_ITEM = 64


class ItemIn(Wire):
    id: str | None = None
    text: str | None = None
    images: list[ImageIn] | None = Field(default=None, max_length=MAX_IMAGES_PER_ITEM)
    document: DocumentIn | None = None
    audio: AudioIn | None = None
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="the caller's own fields; generative guards read `response` (a string: the assistant "
        "response to judge beside `text`, the user's prompt)",
    )

    def id_at(self, index: int) -> str:
        """Its id, or the one a server gives an item without one: ``item-<index>``."""
        return self.id if self.id is not None else f"item-{index}"


MAX_SPANS = 256  # late-chunking spans per item
Truncation = Literal["end", "error", "chunk"]
CharSpan = Annotated[list[Whole], Field(min_length=2, max_length=2)]


class EncodeItemIn(ItemIn):
    """An encode item; ``spans`` asks for late chunking: ``[start, end)`` character offsets into
    ``text``, one dense vector each, pooled from one pass over the whole text."""

    spans: list[CharSpan] | None = Field(default=None, min_length=1, max_length=MAX_SPANS)


class EncodeParams(Wire):
    output_types: list[OutputType] | None = Field(default=None, min_length=1)
    output_dtype: OutputDtype | None = None
    instruction: str | None = None
    options: dict[str, Any] | None = None
    dims: Whole | None = Field(
        default=None, ge=1, description="dense dims to return: the model's dim or one of its Matryoshka dims"
    )
    truncation: Truncation | None = Field(
        default=None,
        description="an item over the model's token limit: end (cut it, default), error (400), "
        "chunk (dense only: mean of the vectors of overlapping windows, normalised)",
    )


class EncodeRequest(Wire):
    items: list[EncodeItemIn] = Field(min_length=1)
    params: EncodeParams | None = None


class ScoreRequest(Wire):
    query: ItemIn
    items: list[ItemIn] = Field(min_length=1)
    instruction: str | None = None
    options: dict[str, Any] | None = None


SchemaName = Annotated[str, Field(min_length=1, max_length=256, pattern=r"\S")]
#: keys of GLiNER2's own result that a classification or structure name may not take
RESERVED_SCHEMA_NAMES = frozenset({"entities", "relation_extraction"})


def _unique(names: list[str]) -> list[str]:
    if len(set(names)) != len(names):
        raise ValueError("names must be unique")
    return names


class SchemaField(Wire):
    """One field of a structure. ``dtype`` ``list``: every value found; ``str``: the best one. With
    ``choices`` the field is classified among those values (answered without character offsets)."""

    dtype: Literal["str", "list"] = "list"
    description: str | None = Field(default=None, max_length=1024)
    choices: Annotated[list[SchemaName], AfterValidator(_unique)] | None = Field(default=None, min_length=1)


class SchemaClassification(Wire):
    """A classification of the whole text among ``labels``: one label, or with ``multi_label`` any number."""

    labels: Annotated[list[SchemaName], AfterValidator(_unique)] = Field(min_length=2)
    multi_label: StrictBool = False


class ExtractSchema(Wire):
    """GLiNER2 schema extraction (``params.schema``, GLiNER2 models only), its own concepts: entity types,
    text classifications, structures (records of named fields) and relation types. At least one is set;
    classification and structure names are distinct."""

    entities: Annotated[list[SchemaName], AfterValidator(_unique)] | None = Field(default=None, min_length=1)
    classifications: dict[SchemaName, SchemaClassification] | None = Field(default=None, min_length=1)
    structures: dict[SchemaName, Annotated[dict[SchemaName, SchemaField], Field(min_length=1)]] | None = Field(
        default=None, min_length=1
    )
    relations: Annotated[list[SchemaName], AfterValidator(_unique)] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _names(self) -> ExtractSchema:
        if not (self.entities or self.classifications or self.structures or self.relations):
            raise ValueError("set at least one of entities, classifications, structures, relations")
        tasks = [*(self.classifications or {}), *(self.structures or {})]
        if len(set(tasks)) != len(tasks):
            raise ValueError("a classification and a structure may not share a name")
        if taken := RESERVED_SCHEMA_NAMES & set(tasks):
            raise ValueError(f"{sorted(taken)[0]!r} is reserved: name the classification or structure otherwise")
        return self

    def names(self) -> dict[str, int]:
        """How many names each part of the schema asks the model about (for the model's label limit)."""
        counts = {"entities": len(self.entities or []), "relations": len(self.relations or [])}
        for name, classification in (self.classifications or {}).items():
            counts[f"classifications.{name}.labels"] = len(classification.labels)
        for name, fields in (self.structures or {}).items():
            counts[f"structures.{name}"] = len(fields)
        return counts


class ExtractParams(Wire):
    # ``schema`` is a BaseModel attribute: the field is ``schema_`` in Python and ``schema`` on the wire
    model_config = ConfigDict(extra="forbid", strict=True, serialize_by_alias=True)

    labels: list[str] | None = None
    threshold: float | None = Field(default=None, ge=0, le=1)
    options: dict[str, Any] | None = None
    schema_: ExtractSchema | None = Field(
        default=None,
        alias="schema",
        description="GLiNER2 models: entities, classifications, structures and relations to extract in one "
        "pass, answered in each item's schema_result (instead of params.labels).",
    )


class ExtractRequest(Wire):
    items: list[ItemIn] = Field(min_length=1)
    params: ExtractParams | None = None


class OpenAIEmbeddingsRequest(Compatible):
    """OpenAI's embeddings, and Jina's (the same shape, with ``task``, ``normalized``, ``embedding_type``,
    ``late_chunking`` and ``truncate``)."""

    IGNORED = ("user",)
    model: str
    input: str | list[str] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Whole | None = Field(default=None, ge=1)
    user: str | None = None
    task: str | None = Field(
        default=None,
        description="Jina's: retrieval.query or retrieval.passage (the text's role), or a task adapter of the model",
    )
    normalized: StrictBool | None = Field(
        default=None, description="Jina's: false is refused for a model that gives normalised vectors only"
    )
    embedding_type: Literal["float", "base64"] | None = Field(default=None, description="Jina's encoding_format")
    late_chunking: Annotated[StrictBool | None, unserved("late chunking is /v1/encode's items[].spans", False)] = None
    truncate: StrictBool | None = Field(
        default=None, description="Jina's: false refuses an input past the model's limit; unset or true cuts it"
    )


class RerankDocument(Wire):
    text: str


TEXT_FIELD_ONLY = 'documents are texts: rank_fields may be ["text"] only'


class RerankRequest(Compatible):
    """Cohere's rerank (``/v1/rerank``, ``/v2/rerank``) and Jina's, which share these fields."""

    model: str
    query: str
    documents: list[str | RerankDocument] = Field(min_length=1)
    top_n: Whole | None = Field(default=None, ge=1)
    return_documents: StrictBool = False
    rank_fields: Annotated[list[str] | None, unserved(TEXT_FIELD_ONLY, ["text"])] = None
    max_chunks_per_doc: Annotated[
        Whole | None, Field(ge=1), unserved("a document past the model's limit is cut, not split into chunks")
    ] = None
    max_tokens_per_doc: Whole | None = Field(
        default=None, ge=1, description="refused below the model's token limit (each pair is cut at that limit)"
    )


class Message(Wire):
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str
    tool_calls: list[ToolCall] | None = Field(default=None, description="an assistant's earlier tool calls")
    tool_call_id: str | None = Field(default=None, description="a tool result: the call it answers")


class GenerateRequest(Wire):
    prompt: str | None = None
    messages: list[Message] | None = Field(default=None, min_length=1)
    max_new_tokens: Whole = Field(default=256, ge=1)
    temperature: Temperature = Field(default=0.0, ge=0, le=5)
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: Stops = None
    seed: Seed | None = None
    frequency_penalty: Penalty = Field(default=0.0, description=FREQUENCY_PENALTY)
    presence_penalty: Penalty = Field(default=0.0, description=PRESENCE_PENALTY)
    stream: StrictBool = False
    grammar: GrammarIn | None = Field(
        default=None, description="constrain the output: exactly one of json_schema, regex or ebnf"
    )
    tools: ToolRequest | None = Field(
        default=None, description="tools rendered in the model's own tool format; a forced call is constrained"
    )


class OpenAISampling(Compatible):
    """What OpenAI's generation routes share."""

    IGNORED = ("user", "store", "metadata", "service_tier", "stream_options", "prompt_cache_key", "safety_identifier")
    model: str
    temperature: Temperature = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: Stops = None
    seed: Seed | None = None
    frequency_penalty: Penalty | None = Field(default=None, description=FREQUENCY_PENALTY)
    presence_penalty: Penalty | None = Field(default=None, description=PRESENCE_PENALTY)
    stream: StrictBool = False
    n: Whole = Field(default=1, ge=1, le=1)
    response_format: ResponseFormat | None = None
    logit_bias: Annotated[dict[str, Any] | None, unserved("token biases are not applied", {})] = None

    def native(
        self, max_new_tokens: int, prompt: str | None = None, messages: list[Message] | None = None
    ) -> GenerateRequest:
        """The same generation as this server's own request."""
        return GenerateRequest(
            prompt=prompt,
            messages=messages,
            max_new_tokens=max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=self.stop,
            seed=self.seed,
            frequency_penalty=self.frequency_penalty or 0.0,
            presence_penalty=self.presence_penalty or 0.0,
            grammar=self.response_format.grammar() if self.response_format is not None else None,
        )


class ChatCompletionRequest(OpenAISampling):
    """OpenAI chat completions, with tool calling (api/tool_calls.py)."""

    messages: list[ChatMessageIn] = Field(min_length=1)
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    #: one call per answer unless asked (llama.cpp's server's default: small models otherwise repeat a call)
    parallel_tool_calls: StrictBool = False
    max_tokens: Whole | None = Field(default=None, ge=1)
    max_completion_tokens: Whole | None = Field(default=None, ge=1)
    logprobs: Annotated[StrictBool | None, unserved("this server returns no log probabilities", False)] = None
    top_logprobs: Annotated[Whole | None, unserved("this server returns no log probabilities", 0)] = None


class CompletionRequest(OpenAISampling):
    """OpenAI (legacy) completions."""

    prompt: str
    max_tokens: Whole = Field(default=16, ge=1)
    logprobs: Annotated[Whole | None, unserved("this server returns no log probabilities", 0)] = None
    echo: Annotated[StrictBool | None, unserved("the prompt is not echoed", False)] = None
    best_of: Annotated[Whole | None, unserved("one completion is generated", 1)] = None
    suffix: Annotated[str | None, unserved("no fill-in-the-middle", "")] = None
