"""The pipeline tasks' wire models (``POST /v1/tasks/{task}`` and the MCP task tools): one request and one
answer per task. The caps are checked by the task before any work (``sie_server/tasks/common.py``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Base64Bytes, BaseModel, ConfigDict, Field, StringConstraints, model_validator


class TaskWire(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class TaskModels(TaskWire):
    """The model of each step; a step left out uses the server's default (``sie_server/tasks/common.py``), and a
    model named for a step the task never runs is refused (400 naming the field)."""

    embed: str | None = Field(default=None, description="the embedder that shortlists passages (encode)")
    rerank: str | None = Field(default=None, description="the model that ranks the shortlist (score)")
    generate: str | None = Field(default=None, description="the language model that writes the answer")
    document: str | None = Field(default=None, description="the document parser (extract, e.g. docling)")
    ocr: str | None = Field(default=None, description="the OCR model used when the parser finds almost no text")
    ner: str | None = Field(default=None, description="the entity model (extract with labels, e.g. GLiNER)")
    caption: str | None = Field(default=None, description="the captioning model (extract on an image, e.g. Florence-2)")
    tags: str | None = Field(default=None, description="the image-text encoder that ranks tags (encode, CLIP/SigLIP)")


class FileIn(TaskWire):
    data: Base64Bytes = Field(description="the file's bytes, base64")
    format: str | None = Field(default=None, description="a hint: pdf, docx, pptx, xlsx, html, md")


class SourceIn(TaskWire):
    """One document: plain text, or a file the document model parses."""

    text: str | None = None
    file: FileIn | None = None

    @model_validator(mode="after")
    def _one(self) -> SourceIn:
        if (self.text is None) == (self.file is None):
            raise ValueError("send exactly one of text or file")
        return self


# ----- docs_to_markdown


class DocsToMarkdownRequest(TaskWire):
    file: FileIn
    models: TaskModels = Field(default_factory=TaskModels)


class DocsToMarkdownResponse(TaskWire):
    markdown: str
    text: str
    pages: int = Field(description="pages the parser saw (0 for formats without pages)")
    source_bytes: int = Field(description="the size of the file sent")
    ocr_fallback: bool = Field(description="the parser found almost no text, so the OCR model read the file")
    models: dict[str, str] = Field(description="the model each step ran on")


# ----- answer_questions


class AnswerQuestionsRequest(TaskWire):
    documents: list[SourceIn] = Field(min_length=1)
    questions: list[str] = Field(min_length=1)
    top_k: int = Field(default=3, ge=1, le=8, description="passages the answer may use")
    shortlist: int = Field(default=12, ge=1, le=64, description="passages the embedder hands to the reranker")
    min_score: float | None = Field(
        default=None,
        description="below this rerank score the passages do not hold the answer: 'not in the documents' without "
        "generating (default: 0 for cross-encoder logits, 0.3 for a bi-encoder's cosine)",
    )
    chunk_chars: int = Field(default=600, ge=100, le=2000, description="the longest passage, in characters")
    max_new_tokens: int = Field(default=96, ge=1, le=512)
    models: TaskModels = Field(default_factory=TaskModels)


class Passage(TaskWire):
    document: int = Field(description="the document's index in `documents`")
    start: int = Field(description="character offset of the passage in that document's text")
    end: int
    text: str
    score: float = Field(description="the rerank score")


class Answer(TaskWire):
    question: str
    answer: str
    found: bool = Field(description="false: the passages do not hold the answer ('not in the documents')")
    passages: list[Passage] = Field(description="the passages the answer was written from, best first")


class AnswerQuestionsResponse(TaskWire):
    answers: list[Answer]
    models: dict[str, str]


# ----- redact_pii


class RedactPiiRequest(TaskWire):
    text: str = Field(min_length=1)
    labels: list[str] = Field(
        default=["person", "organization", "location", "address"],
        min_length=1,
        max_length=32,
        description="the entity types the NER model looks for (e-mail addresses and phone numbers are always found)",
    )
    known: dict[str, list[str]] | None = Field(
        default=None, description="values to redact wherever they appear, by label (e.g. names from a CRM)"
    )
    threshold: float = Field(default=0.5, ge=0, le=1, description="the lowest NER score redacted")
    models: TaskModels = Field(default_factory=TaskModels)


class RedactPiiResponse(TaskWire):
    """The placeholder-to-value map never leaves the server."""

    redacted_text: str
    counts: dict[str, int] = Field(description="distinct values redacted, by placeholder label")
    models: dict[str, str]


# ----- extract_structured


class ExtractStructuredRequest(TaskWire):
    text: str = Field(min_length=1)
    json_schema: dict[str, Any] = Field(
        alias="schema", description="the JSON schema of the object to extract (decoding is constrained to it)"
    )
    instructions: str | None = Field(default=None, max_length=2000, description="what to look for, in words")
    max_new_tokens: int = Field(default=256, ge=1, le=2048)
    models: TaskModels = Field(default_factory=TaskModels)

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), populate_by_name=True)


class ExtractStructuredResponse(TaskWire):
    data: dict[str, Any] = Field(description="the object, valid under the schema (checked after generation)")
    models: dict[str, str]


# ----- summarize_document


class SummarizeDocumentRequest(SourceIn):
    """One document: ``text``, or a ``file`` the document model parses."""

    chunk_chars: int = Field(
        default=2000, ge=200, le=8000, description="the longest chunk summarized in one call, in characters"
    )
    max_new_tokens: int = Field(default=160, ge=8, le=512, description="the longest summary of a chunk, and of all")
    instructions: str | None = Field(
        default=None, max_length=2000, description="what the summary should keep or focus on, in words"
    )
    models: TaskModels = Field(default_factory=TaskModels)


class SummarizeDocumentResponse(TaskWire):
    summary: str
    chunks: int = Field(description="the chunks summarized one by one (map) before their summaries were combined")
    rounds: int = Field(description="rounds of combining summaries (reduce); 0 when the text was one chunk")
    characters: int = Field(description="characters of the document's text")
    pages: int | None = Field(default=None, description="pages the parser saw, where a file was given")
    source_bytes: int | None = Field(default=None, description="the size of the file sent, where a file was given")
    models: dict[str, str]


# ----- extract_entities

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]


class ExtractEntitiesRequest(SourceIn):
    """One document: ``text``, or a ``file`` the document model parses; and the entity types to find."""

    labels: list[Label] = Field(min_length=1, max_length=25, description="the entity types to find, e.g. person")
    threshold: float = Field(default=0.5, ge=0, le=1, description="the lowest score an entity is kept with")
    models: TaskModels = Field(default_factory=TaskModels)


class EntityFound(TaskWire):
    text: str
    label: str
    score: float
    start: int = Field(description="character offset in the whole text (the document's text for a file)")
    end: int = Field(description="character offset just past the entity")


class ExtractEntitiesResponse(TaskWire):
    entities: list[EntityFound] = Field(description="in text order; overlapping windows' duplicates merged")
    counts: dict[str, int] = Field(description="entities found, by label")
    table: str = Field(description="the entities as a markdown table")
    windows: int = Field(description="the windows of the text the model read")
    text: str | None = Field(default=None, description="the document's text, where a file was given")
    pages: int | None = Field(default=None, description="pages the parser saw, where a file was given")
    source_bytes: int | None = Field(default=None, description="the size of the file sent, where a file was given")
    models: dict[str, str]


# ----- describe_image

CaptionDetail = Literal["brief", "detailed", "more_detailed", "none"]


class DescribeImageRequest(TaskWire):
    image: FileIn = Field(description="PNG, JPEG, WebP, GIF, BMP or TIFF bytes, base64")
    caption: CaptionDetail = Field(default="brief", description="how much the caption says; none: tags only")
    labels: list[Label] | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="candidate tags ranked against the image (default: common subjects and kinds of picture)",
    )
    top_k: int = Field(default=5, ge=0, le=50, description="tags returned, best first; 0: the caption only")
    template: str = Field(
        default="a photo of {label}",
        min_length=7,
        max_length=200,
        pattern=r"\{label\}",
        description="how each tag is phrased for the text encoder; {label} is replaced by the tag",
    )
    models: TaskModels = Field(default_factory=TaskModels)


class Tag(TaskWire):
    label: str
    score: float = Field(description="cosine similarity of the image and the phrased tag in the encoder's space")


class DescribeImageResponse(TaskWire):
    caption: str | None = Field(description="the captioning model's caption (null when none was asked for)")
    tags: list[Tag] = Field(description="the top_k tags, best first")
    width: int = Field(description="pixels, as the image's header declares them")
    height: int
    source_bytes: int = Field(description="the size of the image sent")
    models: dict[str, str]
