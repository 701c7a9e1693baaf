"""OpenAI's Batch API on the wire: files, batches and their lists, in OpenAI's shapes to the field
(``openai`` 3.57's ``types/batch.py`` and ``types/file_object.py``; OpenAI's OpenAPI ``Batch``,
``OpenAIFile``, ``ListBatchesResponse``, ``ListFilesResponse``, ``DeleteFileResponse``).

The single server (``sie_server/batches``) and the cluster gateway serve the same models.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

COMPLETION_WINDOWS: dict[str, int] = {"24h": 24 * 3600}  # the only window OpenAI takes
FILE_PURPOSE = "batch"
OUTPUT_PURPOSE = "batch_output"

# endpoints a batch may name, and the url each of its lines must carry
OPENAI_ENDPOINTS: tuple[str, ...] = (
    "/v1/embeddings",
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/moderations",
    "/v1/rerank",
)
# the native endpoints: a batch names "/v1/encode" and each line "/v1/encode/{model}"
NATIVE_ENDPOINTS: tuple[str, ...] = ("/v1/encode", "/v1/score", "/v1/extract")
ENDPOINTS: tuple[str, ...] = OPENAI_ENDPOINTS + NATIVE_ENDPOINTS
_NATIVE_URL = re.compile(r"^(/v1/(?:encode|score|extract))/(\S+)$")


def url_fits(endpoint: str, url: str) -> bool:
    """Whether a line's ``url`` belongs to a batch for ``endpoint``."""
    if endpoint in NATIVE_ENDPOINTS:
        found = _NATIVE_URL.match(url)
        return found is not None and found.group(1) == endpoint
    return url == endpoint


class BatchStatus(StrEnum):
    VALIDATING = "validating"
    FAILED = "failed"
    IN_PROGRESS = "in_progress"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    EXPIRED = "expired"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"


# a batch in one of these still has work to do (a restarted server resumes it)
LIVE_STATUSES: frozenset[BatchStatus] = frozenset(
    {BatchStatus.VALIDATING, BatchStatus.IN_PROGRESS, BatchStatus.FINALIZING, BatchStatus.CANCELLING}
)


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: Literal["batch", "batch_output"]
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class FileDeleted(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


class FileList(BaseModel):
    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class BatchError(BaseModel):
    code: str | None = None
    message: str | None = None
    param: str | None = None
    line: int | None = None


class BatchErrors(BaseModel):
    object: Literal["list"] = "list"
    data: list[BatchError] = Field(default_factory=list)


class RequestCounts(BaseModel):
    total: int = 0
    completed: int = 0
    failed: int = 0


class Batch(BaseModel):
    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: BatchStatus
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: RequestCounts = Field(default_factory=RequestCounts)
    metadata: dict[str, str] | None = None


class BatchList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Batch]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class CreateBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_file_id: str = Field(min_length=1)
    endpoint: str
    completion_window: str
    metadata: dict[str, str] | None = None
    output_expires_after: dict[str, object] | None = None  # OpenAI's client may send it; accepted, not applied

    @field_validator("endpoint")
    @classmethod
    def _known_endpoint(cls, value: str) -> str:
        if value not in ENDPOINTS:
            raise ValueError(f"endpoint {value!r} is not served in batches; use one of {', '.join(ENDPOINTS)}")
        return value

    @field_validator("completion_window")
    @classmethod
    def _known_window(cls, value: str) -> str:
        if value not in COMPLETION_WINDOWS:
            raise ValueError(f"completion_window {value!r} is not supported; use {', '.join(COMPLETION_WINDOWS)}")
        return value

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return value
        if len(value) > 16:
            raise ValueError(f"metadata has {len(value)} keys; at most 16")
        for key, item in value.items():
            if len(key) > 64:
                raise ValueError(f"metadata key {key[:20]!r}... is over 64 characters")
            if len(item) > 512:
                raise ValueError(f"metadata value of {key!r} is over 512 characters")
        return value
