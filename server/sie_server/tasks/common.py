"""What the tasks share: the default model of each step, the caps checked before any work, the check that
every model a task needs can load (before its first step), text chunking with offsets, and a document's
text through the document model."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from sie_server.api.service import Service
from sie_server.catalog.schema import ModelConfig
from sie_server.contract import models as model_rules
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import DocumentIn, ExtractRequest, ItemIn
from sie_server.contract.state_wire import GatewayModelInfo
from sie_server.contract.tasks_wire import FileIn, TaskModels
from sie_server.errors import InvalidInput, ModelLoadFailed, PayloadTooLarge
from sie_server.tasks import pdf_pages

# the model of each step when the request names none (TaskModels overrides any of them)
DEFAULTS: dict[str, str] = {
    "embed": "sentence-transformers/all-MiniLM-L6-v2",
    "rerank": "cross-encoder/ms-marco-MiniLM-L-6-v2",
    "generate": "HuggingFaceTB/SmolLM2-135M-Instruct",
    "document": "docling-project/docling",
    "ocr": "RapidAI/PP-OCRv6",
    "ner": "urchade/gliner_multi_pii-v1",
    "caption": "microsoft/Florence-2-base",
    "tags": "openai/clip-vit-base-patch32",
}
# the service call each step makes
STEP_TASK = {
    "embed": "encode",
    "rerank": "score",
    "generate": "generate",
    "document": "extract",
    "ocr": "extract",
    "ner": "extract",
    "caption": "extract",
    "tags": "encode",
}


@dataclass(frozen=True)
class Caps:
    """Refused with 400/413 before any work."""

    max_chars: int = 200_000  # all text of one task, documents' extracted text included
    max_documents: int = 16
    max_file_bytes: int = 20 * 1024 * 1024
    max_pages: int = 100
    max_questions: int = 8
    max_chunks: int = 512
    max_summary_chunks: int = 64  # each chunk is one generate call before the combining rounds


CAPS = Caps()


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip() not in ("", "0")


def check_models(task: str, chosen: TaskModels, uses: tuple[str, ...]) -> None:
    """A model named for a step the task never runs is refused by name (400), not silently ignored."""
    named = [f"models.{step}" for step in TaskModels.model_fields if getattr(chosen, step) is not None]
    unused = [field for field in named if field.removeprefix("models.") not in uses]
    if unused:
        raise InvalidInput(
            f"{', '.join(unused)}: task {task} has no such step (its steps: {', '.join(uses)}); leave "
            f"{'it' if len(unused) == 1 else 'them'} out"
        )


async def models_for(
    task: str, svc: Service, steps: tuple[str, ...], chosen: TaskModels, *, uses: tuple[str, ...]
) -> dict[str, ModelConfig]:
    """Each step's model, resolved and able to load (MODEL_NOT_FOUND / MODEL_LOAD_FAILED naming the model and
    the command that fetches it), all before the first step runs. ``steps`` are the steps this request runs,
    ``uses`` every step the task can run (a model named for any other is refused)."""
    check_models(task, chosen, uses)
    configs: dict[str, ModelConfig] = {}
    for step in steps:
        model_id = getattr(chosen, step) or DEFAULTS[step]
        config = svc.resolve(model_id)
        model_rules.require_task(config, STEP_TASK[step])
        info = await svc.model(config)
        fetch = f"fetch it with `sie-server models pull {config.id}` where the hub is reachable"
        if info.state == "failed":
            raise ModelLoadFailed(
                f"task {task} needs {config.id} for its {step} step, and it failed to load "
                f"({info.last_error or 'no detail'}); {fetch}, or name another with models.{step}"
            )
        # A gateway's own cache and offline flag say nothing of its workers' (a gateway loads no model, and
        # what workers report covers only models they have touched): there the check is the workers' report
        # of a failed load, above, and a model no worker can load fails when its step reaches one.
        if _offline() and not info.available_offline and not isinstance(info, GatewayModelInfo):
            raise ModelLoadFailed(
                f"task {task} needs {config.id} for its {step} step, which is not cached and this server is offline; "
                f"{fetch}, or name another with models.{step}"
            )
        configs[step] = config
    return configs


def used(configs: dict[str, ModelConfig]) -> dict[str, str]:
    return {step: config.id for step, config in configs.items()}


def check_text(text: str, where: str, caps: Caps = CAPS) -> None:
    if len(text) > caps.max_chars:
        raise PayloadTooLarge(f"{where} is {len(text)} characters; a task takes at most {caps.max_chars}")


def check_file(file: FileIn, where: str, caps: Caps = CAPS) -> None:
    """Size, and for a PDF its pages (counted without parsing it, ``pdf_pages.py``)."""
    if len(file.data) > caps.max_file_bytes:
        raise PayloadTooLarge(f"{where} is {len(file.data)} bytes; a task takes files of at most {caps.max_file_bytes}")
    if pdf_pages.is_pdf(file.data):
        found = pdf_pages.count(file.data)
        if found.pages is None:
            said = f"{where}: a task counts a PDF's pages before any work, and {found.why}"
            if found.too_large:
                raise PayloadTooLarge(said)
            raise InvalidInput(f"{said}; save it without object streams (as PDF 1.4) or repair it")
        if found.pages > caps.max_pages:
            raise PayloadTooLarge(f"{where} has {found.pages} pages; a task takes at most {caps.max_pages}")


def check_count(count: int, limit: int, what: str) -> None:
    if count > limit:
        raise InvalidInput(f"{count} {what} in one task; the limit is {limit}")


@dataclass(frozen=True)
class Chunk:
    document: int
    start: int
    end: int
    text: str


_BREAK = re.compile(r"\n\s*\n|(?<=[.!?])\s+|\n")


def chunks(document: int, text: str, size: int) -> list[Chunk]:
    """Passages of at most ``size`` characters, cut at paragraph, sentence or line ends where possible,
    each with its character offsets in ``text``."""
    pieces: list[tuple[int, int]] = []
    at = 0
    for match in _BREAK.finditer(text):
        pieces.append((at, match.start()))
        at = match.end()
    pieces.append((at, len(text)))
    found: list[Chunk] = []
    start = end = -1
    for a, b in pieces:
        while b - a > size:  # one sentence longer than a passage: cut it
            if start >= 0:
                found.append(Chunk(document, start, end, text[start:end]))
                start = -1
            found.append(Chunk(document, a, a + size, text[a : a + size]))
            a += size
        if a >= b:
            continue
        if start >= 0 and b - start > size:
            found.append(Chunk(document, start, end, text[start:end]))
            start = -1
        if start < 0:
            start = a
        end = b
    if start >= 0:
        found.append(Chunk(document, start, end, text[start:end]))
    return [c for c in found if c.text.strip()]


@dataclass(frozen=True)
class Parsed:
    text: str
    markdown: str
    pages: int


async def parse(svc: Service, model: ModelConfig, file: FileIn, call: CallOptions) -> Parsed:
    """A file's text through a document (or OCR) model; a file it cannot read is the caller's (400)."""
    (parsed,) = await parse_all(svc, model, [file], call)
    return parsed


async def parse_all(svc: Service, model: ModelConfig, files: list[FileIn], call: CallOptions) -> list[Parsed]:
    """Files parsed together, as one extract request (the model batches them) per ``max_items``."""
    found: list[Parsed] = []
    step = svc.limits.max_items
    for at in range(0, len(files), step):
        items = [
            ItemIn(id=str(i), document=DocumentIn(data=f.data, format=f.format))
            for i, f in enumerate(files[at : at + step])
        ]
        svc.limits.items(items, model)
        answer = await svc.extract(model, ExtractRequest(items=items), call)
        for i, item in enumerate(answer.items):
            if item.error is not None:
                raise InvalidInput(f"{model.id} could not read file {at + i}: {item.error.message}")
            data = item.data or {}
            text = str(data.get("text") or "") or "\n".join(e.text for e in item.entities)
            pages = data.get("pages")
            count = len(pages) if isinstance(pages, list) else 0
            found.append(Parsed(text=text, markdown=str(data.get("markdown") or text), pages=count))
    return found
