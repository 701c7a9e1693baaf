"""``summarize_document``: a map-reduce summary of one document (a text, or a file through the document
model). The text is cut into chunks (``common.chunks``), each chunk is summarized by the language model
(all chunks at once: the queue decodes them together), and the summaries are combined, a few at a time,
until one is left. Caps (characters, chunks, each prompt's size) are checked before the first generation."""

from __future__ import annotations

import asyncio

from sie_server.api.service import Service
from sie_server.api.streaming import whole
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import GenerateRequest, Message
from sie_server.contract.tasks_wire import SummarizeDocumentRequest, SummarizeDocumentResponse
from sie_server.tasks.common import CAPS, check_count, check_file, check_text, chunks, models_for, parse, used

NAME = "summarize_document"
TITLE = "Summarize a document"
DESCRIPTION = (
    "Summarize one document (a text, or a base64 file: PDF, DOCX, PPTX, XLSX, HTML) with the language model, "
    "map-reduce: each chunk is summarized, then the summaries are combined into one. Answers the summary, the "
    "number of chunks, and pages and source size where a file was given."
)
STEPS = ("generate",)
USES = (*STEPS, "document")  # the document model for a file
SYSTEM = "You write short, faithful summaries: keep the names, numbers and dates that matter; add nothing."
# the instruction after the text: a small model (SmolLM2-135M) follows it there, and repeats it when it comes first
MAP = "Summarize this text in two or three sentences."
REDUCE = "Combine these notes on consecutive parts of one document into one summary of a few sentences."
MAX_ROUNDS = 8  # each round at least halves the summaries: 64 chunks need 6


def _messages(body: str, asked: str, instructions: str | None) -> list[Message]:
    focus = f" {instructions}" if instructions else ""
    return [Message(role="system", content=SYSTEM), Message(role="user", content=f"{body}\n\n{asked}{focus}")]


def _map_prompt(text: str, instructions: str | None) -> list[Message]:
    return _messages(f"Text:\n{text}", MAP, instructions)


def _reduce_prompt(notes: list[str], instructions: str | None) -> list[Message]:
    body = "\n".join(f"- {' '.join(note.split())}" for note in notes)
    return _messages(f"Notes:\n{body}", REDUCE, instructions)


def groups(notes: list[str], size: int) -> list[list[str]]:
    """Consecutive notes, as many as fit ``size`` characters together, and at least two a group (so each
    round at least halves them); a last note alone joins the group before it."""
    found: list[list[str]] = []
    for note in notes:
        last = found[-1] if found else None
        if last is not None and (len(last) < 2 or sum(map(len, last)) + len(note) <= size):
            last.append(note)
        else:
            found.append([note])
    if len(found) > 1 and len(found[-1]) == 1:
        found[-2].extend(found.pop())
    return found


async def _generate(svc: Service, model: ModelConfig, messages: list[Message], tokens: int, call: CallOptions) -> str:
    request = GenerateRequest(messages=messages, max_new_tokens=tokens, temperature=0.0)
    stream = await svc.generate(model, request, call)
    try:
        await whole(stream, call)
    except asyncio.CancelledError:  # a sibling failed (TaskGroup): stop decoding this one too
        stream.cancel()
        raise
    return stream.text.strip()


async def _all(
    svc: Service, model: ModelConfig, prompts: list[list[Message]], tokens: int, call: CallOptions
) -> list[str]:
    """Every prompt's answer, generated together; the first failure cancels the rest."""
    try:
        async with asyncio.TaskGroup() as group:
            running = [group.create_task(_generate(svc, model, p, tokens, call)) for p in prompts]
    except BaseExceptionGroup as failed:  # the error the first failure raised, as one call would
        raise failed.exceptions[0] from None
    return [task.result() for task in running]


def _check_prompts(svc: Service, prompts: list[list[Message]]) -> None:
    for prompt in prompts:
        for message in prompt:
            svc.limits.text(message.content, "the task's prompt")


async def run(svc: Service, request: SummarizeDocumentRequest, call: CallOptions) -> SummarizeDocumentResponse:
    if request.text is not None:
        check_text(request.text, "text")
        check_count(len(chunks(0, request.text, request.chunk_chars)), CAPS.max_summary_chunks, "chunks")
    if request.file is not None:
        check_file(request.file, "file")
    steps = STEPS + (("document",) if request.file is not None else ())
    configs = await models_for(NAME, svc, steps, request.models, uses=USES)
    pages: int | None = None
    source_bytes: int | None = None
    text = request.text
    if request.file is not None:
        parsed = await parse(svc, configs["document"], request.file, call)
        text, pages, source_bytes = parsed.text, parsed.pages, len(request.file.data)
        check_text(parsed.text, "the document's text")
    assert text is not None  # SourceIn holds exactly one of text and file
    parts = chunks(0, text, request.chunk_chars)
    check_count(len(parts), CAPS.max_summary_chunks, "chunks")
    prompts = [_map_prompt(part.text, request.instructions) for part in parts]
    _check_prompts(svc, prompts)

    model, tokens = configs["generate"], request.max_new_tokens
    notes = await _all(svc, model, prompts, tokens, call) if prompts else []
    rounds = 0
    while len(notes) > 1 and rounds < MAX_ROUNDS:
        rounds += 1
        prompts = [_reduce_prompt(group, request.instructions) for group in groups(notes, request.chunk_chars)]
        _check_prompts(svc, prompts)
        notes = await _all(svc, model, prompts, tokens, call)
    return SummarizeDocumentResponse(
        summary=notes[0] if notes else "",
        chunks=len(parts),
        rounds=rounds,
        characters=len(text),
        pages=pages,
        source_bytes=source_bytes,
        models=used(configs),
    )
