"""``redact_pii``: personal data replaced by consistent placeholders (``[PERSON_1]`` each time the same
person appears). E-mail addresses and phone numbers are found by pattern, values the caller names
(``known``) wherever they appear, and the rest by the NER model over windows of the text. The
placeholder-to-value map stays in this function: the answer is the redacted text and counts only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sie_server.api.service import Service
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractParams, ExtractRequest, ItemIn
from sie_server.contract.tasks_wire import RedactPiiRequest, RedactPiiResponse
from sie_server.tasks.common import CAPS, check_count, check_text, chunks, models_for, used

NAME = "redact_pii"
TITLE = "Redact personal data"
DESCRIPTION = (
    "Replace names, e-mail addresses, phone numbers and other personal data in a text with consistent "
    "placeholders ([PERSON_1], [EMAIL_1], ...). Answers the redacted text and how many distinct values of "
    "each kind were replaced; the original values are never returned."
)
STEPS = ("ner",)
MAX_WINDOW_CHARS = 1000


def window_chars(model: ModelConfig, labels: int) -> int:
    """A window the model's context holds with its labels (about two characters a token, to be safe)."""
    tokens = model.max_sequence_length or 512
    return max(100, min(MAX_WINDOW_CHARS, 2 * tokens - 16 * labels))


PATTERNS = {
    "email": re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    "phone number": re.compile(r"(?<![\w+])\+?\d[\d ().-]{6,}\d(?!\w)"),
}
KNOWN, PATTERN, MODEL = 0, 1, 2  # which finding wins where two overlap


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str
    rank: int


def tag(label: str) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", label.upper()).strip("_") or "PII"


async def _model_spans(svc: Service, model: ModelConfig, request: RedactPiiRequest, call: CallOptions) -> list[Span]:
    windows = chunks(0, request.text, window_chars(model, len(request.labels)))
    check_count(len(windows), CAPS.max_chunks, "windows")
    found: list[Span] = []
    params = ExtractParams(labels=list(request.labels), threshold=request.threshold)
    step = svc.limits.max_items
    for at in range(0, len(windows), step):
        part = windows[at : at + step]
        items = [ItemIn(id=str(i), text=w.text) for i, w in enumerate(part)]
        svc.limits.items(items, model)
        answer = await svc.extract(model, ExtractRequest(items=items, params=params), call)
        for window, item in zip(part, answer.items, strict=True):
            for e in item.entities:
                if e.start is not None and e.end is not None and e.end > e.start and e.score >= request.threshold:
                    found.append(Span(window.start + e.start, window.start + e.end, e.label, MODEL))
    return found


def _fixed_spans(request: RedactPiiRequest) -> list[Span]:
    found = [
        Span(m.start(), m.end(), label, PATTERN) for label, rx in PATTERNS.items() for m in rx.finditer(request.text)
    ]
    for label, values in (request.known or {}).items():
        for value in values:
            if value.strip():
                rx = re.compile(rf"(?<!\w){re.escape(value.strip())}(?!\w)", re.IGNORECASE)
                found += [Span(m.start(), m.end(), label, KNOWN) for m in rx.finditer(request.text)]
    return found


def redact(text: str, spans: list[Span]) -> tuple[str, dict[str, int]]:
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.rank, s.start, -(s.end - s.start))):
        if all(span.end <= k.start or span.start >= k.end for k in kept):
            kept.append(span)
    placeholders: dict[tuple[str, str], str] = {}  # never leaves this function
    counts: dict[str, int] = {}
    out, at = [], 0
    for span in sorted(kept, key=lambda s: s.start):
        label = tag(span.label)
        key = (label, " ".join(text[span.start : span.end].split()).casefold())
        if key not in placeholders:
            counts[label] = counts.get(label, 0) + 1
            placeholders[key] = f"[{label}_{counts[label]}]"
        out += [text[at : span.start], placeholders[key]]
        at = span.end
    out.append(text[at:])
    return "".join(out), counts


async def run(svc: Service, request: RedactPiiRequest, call: CallOptions) -> RedactPiiResponse:
    check_text(request.text, "text")
    configs = await models_for(NAME, svc, STEPS, request.models, uses=STEPS)
    spans = _fixed_spans(request) + await _model_spans(svc, configs["ner"], request, call)
    redacted, counts = redact(request.text, spans)
    return RedactPiiResponse(redacted_text=redacted, counts=counts, models=used(configs))
