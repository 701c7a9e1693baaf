"""One table of the tasks: name, title, description, request and answer types, and the function that runs
it over a ``Service``. The HTTP routes and the MCP task tools are built from it; a new task is a module and
a line here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from sie_server.api.service import Service
from sie_server.contract.headers import CallOptions
from sie_server.contract.tasks_wire import (
    AnswerQuestionsRequest,
    AnswerQuestionsResponse,
    DescribeImageRequest,
    DescribeImageResponse,
    DocsToMarkdownRequest,
    DocsToMarkdownResponse,
    ExtractEntitiesRequest,
    ExtractEntitiesResponse,
    ExtractStructuredRequest,
    ExtractStructuredResponse,
    RedactPiiRequest,
    RedactPiiResponse,
    SummarizeDocumentRequest,
    SummarizeDocumentResponse,
)
from sie_server.tasks import (
    answer_questions,
    describe_image,
    docs_to_markdown,
    extract_entities,
    extract_structured,
    redact_pii,
    summarize_document,
)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    title: str
    description: str
    request: type[BaseModel]
    response: type[BaseModel]
    run: Callable[[Service, Any, CallOptions], Awaitable[BaseModel]]


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            docs_to_markdown.NAME,
            docs_to_markdown.TITLE,
            docs_to_markdown.DESCRIPTION,
            DocsToMarkdownRequest,
            DocsToMarkdownResponse,
            docs_to_markdown.run,
        ),
        TaskSpec(
            answer_questions.NAME,
            answer_questions.TITLE,
            answer_questions.DESCRIPTION,
            AnswerQuestionsRequest,
            AnswerQuestionsResponse,
            answer_questions.run,
        ),
        TaskSpec(
            redact_pii.NAME,
            redact_pii.TITLE,
            redact_pii.DESCRIPTION,
            RedactPiiRequest,
            RedactPiiResponse,
            redact_pii.run,
        ),
        TaskSpec(
            extract_structured.NAME,
            extract_structured.TITLE,
            extract_structured.DESCRIPTION,
            ExtractStructuredRequest,
            ExtractStructuredResponse,
            extract_structured.run,
        ),
        TaskSpec(
            summarize_document.NAME,
            summarize_document.TITLE,
            summarize_document.DESCRIPTION,
            SummarizeDocumentRequest,
            SummarizeDocumentResponse,
            summarize_document.run,
        ),
        TaskSpec(
            extract_entities.NAME,
            extract_entities.TITLE,
            extract_entities.DESCRIPTION,
            ExtractEntitiesRequest,
            ExtractEntitiesResponse,
            extract_entities.run,
        ),
        TaskSpec(
            describe_image.NAME,
            describe_image.TITLE,
            describe_image.DESCRIPTION,
            DescribeImageRequest,
            DescribeImageResponse,
            describe_image.run,
        ),
    )
}
