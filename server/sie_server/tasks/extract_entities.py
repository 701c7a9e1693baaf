"""``extract_entities``: entities of the caller's labels in a text or a document (through the document model),
found by a GLiNER-family model over overlapping windows of the text. Each window's entities are mapped back
to offsets in the whole text; where windows overlap, the same entity found twice is kept once, and of two
overlapping entities the one away from a window's cut edge, then the higher score, wins (flat entities, as
GLiNER gives within one window). The answer lists the entities, counts them per label and shows them as a
markdown table."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from sie_server.api.service import Service
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractParams, ExtractRequest, ItemIn
from sie_server.contract.tasks_wire import EntityFound, ExtractEntitiesRequest, ExtractEntitiesResponse
from sie_server.errors import InvalidInput
from sie_server.tasks.common import CAPS, Chunk, check_count, check_file, check_text, models_for, parse, used
from sie_server.tasks.redact_pii import window_chars

NAME = "extract_entities"
TITLE = "Extract entities"
DESCRIPTION = (
    "Find entities of the given labels (person, organization, date, ...) in a text or a base64 document with "
    "a GLiNER model, over overlapping windows of long text. Answers each entity with its label, score and "
    "character offsets in the whole text, the count per label, and a markdown table."
)
STEPS = ("ner",)
USES = (*STEPS, "document")  # the document model for a file
GENERAL_NER = "urchade/gliner_multi-v2.1"  # the default here: general entity types (redact_pii's is tuned for PII)
OVERLAP = 5  # windows overlap by a fifth of their size
_SPACE = re.compile(r"\s+")


def windows(text: str, size: int, overlap: int) -> list[Chunk]:
    """Windows of at most ``size`` characters covering ``text``, each starting about ``overlap`` characters
    before the previous one ended; cut at whitespace where there is some (in the window's second half, and in
    the overlap), so a word is whole in at least one window."""
    found: list[Chunk] = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + size)
        if end < n:
            cuts = [m.start() for m in _SPACE.finditer(text, start + size // 2, end + 1)]
            end = cuts[-1] if cuts else end
        if text[start:end].strip():
            found.append(Chunk(0, start, end, text[start:end]))
        if end >= n:
            break
        at = max(start + 1, end - overlap)
        space = _SPACE.search(text, at, end)
        start = space.end() if space is not None and space.end() < end else at
    return found


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str
    score: float
    edge: bool  # touches a window's cut edge: maybe a part of an entity the next window holds whole


def _edge(window: Chunk, start: int, end: int, length: int) -> bool:
    left = window.start > 0 and not window.text[: start - window.start].strip()
    right = window.end < length and not window.text[end - window.start :].strip()
    return left or right


def merge(spans: list[Span]) -> list[Span]:
    """One entity per place: identical spans (from overlapping windows) once, at their best score; of
    overlapping ones, those off a window's cut edge first, then the higher score, then the longer."""
    best: dict[tuple[int, int, str], Span] = {}
    for span in spans:
        key = (span.start, span.end, span.label)
        seen = best.get(key)
        if seen is None:
            best[key] = span
        else:
            best[key] = Span(span.start, span.end, span.label, max(seen.score, span.score), seen.edge and span.edge)
    kept: list[Span] = []
    starts: list[int] = []
    for span in sorted(best.values(), key=lambda s: (s.edge, -s.score, s.start - s.end, s.start, s.label)):
        i = bisect.bisect_right(starts, span.start)
        if (i > 0 and kept[i - 1].end > span.start) or (i < len(kept) and kept[i].start < span.end):
            continue
        starts.insert(i, span.start)
        kept.insert(i, span)
    return kept


def table(entities: list[EntityFound]) -> str:
    if not entities:
        return "No entities found."

    def cell(value: str) -> str:
        return " ".join(value.split()).replace("|", "\\|")

    rows = [f"| {cell(e.text)} | {cell(e.label)} | {e.score:.2f} | {e.start} | {e.end} |" for e in entities]
    return "\n".join(["| entity | label | score | start | end |", "|---|---|---:|---:|---:|", *rows])


async def _spans(
    svc: Service, model: ModelConfig, text: str, parts: list[Chunk], request: ExtractEntitiesRequest, call: CallOptions
) -> list[Span]:
    params = ExtractParams(labels=list(request.labels), threshold=request.threshold)
    found: list[Span] = []
    step = svc.limits.max_items
    for at in range(0, len(parts), step):
        part = parts[at : at + step]
        items = [ItemIn(id=str(i), text=w.text) for i, w in enumerate(part)]
        svc.limits.items(items, model)
        answer = await svc.extract(model, ExtractRequest(items=items, params=params), call)
        for window, item in zip(part, answer.items, strict=True):
            for e in item.entities:
                if e.start is None or e.end is None or not 0 <= e.start < e.end <= len(window.text):
                    continue
                if e.score >= request.threshold:
                    start, end = window.start + e.start, window.start + e.end
                    found.append(Span(start, end, e.label, e.score, _edge(window, start, end, len(text))))
    return found


def _check_labels(model: ModelConfig, labels: list[str]) -> None:
    most = model.tasks.extract.max_labels if model.tasks.extract is not None else None
    if most is not None and len(labels) > most:
        raise InvalidInput(f"{len(labels)} labels; model {model.id} takes at most {most} in one call")


async def run(svc: Service, request: ExtractEntitiesRequest, call: CallOptions) -> ExtractEntitiesResponse:
    if request.text is not None:
        check_text(request.text, "text")
    if request.file is not None:
        check_file(request.file, "file")
    if len({label.casefold() for label in request.labels}) != len(request.labels):
        raise InvalidInput("labels must be unique")
    chosen = request.models if request.models.ner else request.models.model_copy(update={"ner": GENERAL_NER})
    steps = STEPS + (("document",) if request.file is not None else ())
    configs = await models_for(NAME, svc, steps, chosen, uses=USES)
    model = configs["ner"]
    _check_labels(model, list(request.labels))
    size = window_chars(model, len(request.labels))
    if request.text is not None:  # the windows of a text are counted before any work
        check_count(len(windows(request.text, size, size // OVERLAP)), CAPS.max_chunks, "windows")

    pages: int | None = None
    source_bytes: int | None = None
    text = request.text
    if request.file is not None:
        parsed = await parse(svc, configs["document"], request.file, call)
        text, pages, source_bytes = parsed.text, parsed.pages, len(request.file.data)
        check_text(text, "the document's text")
    assert text is not None  # SourceIn holds exactly one of text and file
    parts = windows(text, size, size // OVERLAP)
    check_count(len(parts), CAPS.max_chunks, "windows")

    kept = merge(await _spans(svc, model, text, parts, request, call))
    entities = [
        EntityFound(text=text[s.start : s.end], label=s.label, score=s.score, start=s.start, end=s.end) for s in kept
    ]
    counts: dict[str, int] = {}
    for entity in entities:
        counts[entity.label] = counts.get(entity.label, 0) + 1
    return ExtractEntitiesResponse(
        entities=entities,
        counts=counts,
        table=table(entities),
        windows=len(parts),
        text=text if request.file is not None else None,
        pages=pages,
        source_bytes=source_bytes,
        models=used(configs),
    )
