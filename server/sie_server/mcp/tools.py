"""The tools' typed inputs and outputs (their JSON schemas are the tools' ``inputSchema`` and
``outputSchema``), and the ``Backend`` the handlers call: the server's own service in process, or
the Python SDK against a running server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Base64Bytes, BaseModel, ConfigDict, Field, model_validator

from sie_server.contract.grammar_wire import GrammarIn, ResponseFormat

Task = Literal["encode", "score", "extract", "generate"]
OutputType = Literal["dense", "sparse", "multivector"]
MODEL = Field(description="a model id, as list_models gives it (e.g. sentence-transformers/all-MiniLM-L6-v2)")


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt argument is refused, not ignored


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ----- inputs


class Media(Input):
    data: Base64Bytes = Field(description="the file's bytes, base64")
    format: str | None = Field(default=None, description="a hint: pdf, docx, pptx, xlsx, html, md; png, jpeg")


class EncodeInput(Input):
    model: str = MODEL
    texts: list[str] | None = Field(
        default=None, min_length=1, description="the texts to embed, one vector (set) each, in order"
    )
    images: list[Media] | None = Field(
        default=None, min_length=1, description="or images to embed (CLIP, SigLIP and other image models), one each"
    )
    output_types: list[OutputType] = Field(
        default=["dense"], min_length=1, description="which vectors to return (the model must give them)"
    )
    is_query: bool = Field(default=False, description="embed as search queries (models with a query prefix)")
    dims: int | None = Field(default=None, ge=1, description="cut dense vectors to one of the model's Matryoshka dims")

    @model_validator(mode="after")
    def _one_input(self) -> EncodeInput:
        if (self.texts is None) == (self.images is None):
            raise ValueError("send exactly one of texts or images")
        return self


class ScoreInput(Input):
    model: str = MODEL
    query: str = Field(description="what the documents are ranked against")
    documents: list[str] = Field(min_length=1, description="the texts to rank")
    top_n: int | None = Field(default=None, ge=1, description="return only the best top_n")


class ExtractInput(Input):
    model: str = MODEL
    text: str | None = Field(default=None, description="a text to extract from")
    document: Media | None = Field(default=None, description="a whole document (for models that parse documents)")
    image: Media | None = Field(default=None, description="an image (for OCR, detection and vision models)")
    labels: list[str] | None = Field(
        default=None, min_length=1, description="entity types or object classes to look for (e.g. person, date)"
    )
    threshold: float | None = Field(default=None, ge=0, le=1, description="the lowest score kept")
    options: dict[str, Any] | None = Field(
        default=None,
        description="the model's own options, as /v1/extract takes them (e.g. Florence-2's task, a detector's "
        "thresholds); an option the model does not have is refused by name",
    )
    blocks: bool = Field(
        default=False,
        description="for a document: also return its text blocks (entities with page and bbox) and its plain "
        "text; by default a document's answer carries its text once, as markdown",
    )

    @model_validator(mode="after")
    def _one_input(self) -> ExtractInput:
        given = [name for name in ("text", "document", "image") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"send exactly one of text, document or image (got {', '.join(given) or 'none'})")
        return self


class ChatMessage(Input):
    role: Literal["system", "user", "assistant"]
    content: str


class GenerateInput(Input):
    model: str = MODEL
    prompt: str | None = Field(default=None, description="a plain prompt (or send messages)")
    messages: list[ChatMessage] | None = Field(
        default=None, min_length=1, description="a chat, formatted with the model's chat template"
    )
    max_new_tokens: int = Field(default=256, ge=1, description="the most tokens to generate")
    temperature: float = Field(default=0.0, ge=0, le=5, description="0: greedy (deterministic)")
    top_p: float = Field(default=1.0, gt=0, le=1)
    stop: list[str] | None = Field(default=None, description="stop before any of these strings")
    seed: int | None = Field(default=None, description="a seed, for repeatable sampling")
    grammar: GrammarIn | None = Field(
        default=None, description="constrain the output: exactly one of json_schema, regex or ebnf (as /v1/generate)"
    )
    response_format: ResponseFormat | None = Field(
        default=None, description="or OpenAI's response_format: text, json_object, or json_schema {name, schema}"
    )

    @model_validator(mode="after")
    def _one_input(self) -> GenerateInput:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("send exactly one of prompt or messages")
        if self.grammar is not None and self.response_format is not None:
            raise ValueError("send at most one of grammar or response_format")
        return self

    def constraint(self) -> GrammarIn | None:
        """The grammar the output must match, from ``grammar`` or ``response_format`` (None: free text)."""
        if self.response_format is not None:
            return self.response_format.grammar()
        return self.grammar


class ListModelsInput(Input):
    task: Task | None = Field(default=None, description="only models that do this task")


# ----- outputs


class SparseOut(Output):
    indices: list[int]
    values: list[float]


def floats(values: Any) -> list[float]:
    """A vector (any shape, any float dtype) as a flat list of floats."""
    found: list[float] = np.asarray(values, dtype=np.float64).reshape(-1).tolist()
    return found


class Vectors(Output):
    """One text's vectors: the output types asked for."""

    dense: list[float] | None = None
    sparse: SparseOut | None = None
    multivector: list[list[float]] | None = None


class EncodeOutput(Output):
    model: str
    vectors: list[Vectors] = Field(description="one entry per text, in order")


class Ranked(Output):
    index: int = Field(description="the document's position in `documents`")
    score: float
    rank: int = Field(description="0 is the best")


class ScoreOutput(Output):
    model: str
    results: list[Ranked] = Field(description="best first")


class EntityOut(Output):
    text: str
    label: str
    score: float
    start: int | None = Field(default=None, description="character offset into the text")
    end: int | None = None
    bbox: list[int] | None = Field(default=None, description="[x, y, w, h] in pixels, for images and pages")
    page: int | None = None


class RelationOut(Output):
    head: str
    tail: str
    relation: str
    score: float


class ClassificationOut(Output):
    label: str
    score: float


class ObjectOut(Output):
    label: str
    score: float
    bbox: list[int] = Field(description="[x, y, w, h] in pixels")
    page: int | None = None


class ExtractOutput(Output):
    model: str
    entities: list[EntityOut]
    relations: list[RelationOut]
    classifications: list[ClassificationOut]
    objects: list[ObjectOut]
    data: dict[str, Any] = Field(description="a document's markdown and text, OCR text, transcripts")


class UsageOut(Output):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class GenerateOutput(Output):
    model: str
    text: str
    finish_reason: str | None = None
    usage: UsageOut


class ModelOut(Output):
    id: str
    tasks: list[str]
    inputs: list[str]
    dims: dict[str, int]
    state: str = Field(description="available, loading, loaded or failed")


class ListModelsOutput(Output):
    models: list[ModelOut]


# ----- what the tools call


class ItemFailed(Exception):
    """The server answered, but the one item of the call failed (an undecodable document, say)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Backend(Protocol):
    """The work behind the tools. ``headers`` are the MCP request's HTTP headers (empty on stdio): a
    backend may read the caller's ``X-SIE-Priority`` and ``X-SIE-Timeout-Ms`` from them. Failures are
    the server's errors (``sie_server.errors.SIEError``), the SDK's (``sie_sdk.SIEError``), or
    ``ItemFailed``."""

    async def encode(self, args: EncodeInput, headers: Mapping[str, str]) -> EncodeOutput: ...

    async def score(self, args: ScoreInput, headers: Mapping[str, str]) -> ScoreOutput: ...

    async def extract(self, args: ExtractInput, headers: Mapping[str, str]) -> ExtractOutput: ...

    async def generate(self, args: GenerateInput, headers: Mapping[str, str]) -> GenerateOutput: ...

    async def list_models(self, headers: Mapping[str, str]) -> ListModelsOutput:
        """Every model the server serves (the tool filters them)."""
        ...


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input: type[Input]
    output: type[Output]


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("encode", "Embed texts or images", "Embed texts (or images, base64, with an image model) with an "
             "embedding model: dense (and, where the model gives them, sparse or multivector) vectors, one per "
             "text or image, in order.", EncodeInput, EncodeOutput),
    ToolSpec("score", "Rerank documents", "Rank documents by relevance to a query with a reranker or embedding "
             "model; results are best first, each with the document's index.", ScoreInput, ScoreOutput),
    ToolSpec("extract", "Extract from text, documents or images", "Find entities of the given labels in a text, "
             "or read a document or image (base64) where the model parses them: entities, objects, "
             "classifications and document data (a document's markdown; its blocks when asked).",
             ExtractInput, ExtractOutput),
    ToolSpec("generate", "Generate text", "Generate text with a small language model from a prompt or chat "
             "messages, optionally constrained by a grammar or response_format (JSON schema, regex); returns "
             "the text and the token counts.", GenerateInput, GenerateOutput),
    ToolSpec("list_models", "List models", "The models this server serves, with their tasks, inputs, vector "
             "dims and state; optionally only those that do one task.", ListModelsInput, ListModelsOutput),
)  # fmt: skip
BY_NAME = {spec.name: spec for spec in TOOLS}


def as_asked(args: ExtractInput, answer: ExtractOutput) -> ExtractOutput:
    """A document's answer with its text once (the markdown), unless the caller asked for its blocks: the
    blocks (entities) and the plain text repeat the markdown's words, three times the tokens for an agent."""
    if args.document is None or args.blocks:
        return answer
    data = {key: value for key, value in answer.data.items() if key != "text"}
    return answer.model_copy(update={"entities": [], "data": data})
