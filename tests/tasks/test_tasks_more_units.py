"""The parts of summarize_document, extract_entities and describe_image that need no server: windows that
overlap and index the text, duplicates merged, summaries grouped so each round halves them, image sizes read
from headers, and the caps refused before the service does any work."""

from __future__ import annotations

import asyncio
import io
import itertools
import random
from typing import Any

import pytest
from PIL import Image

from sie_server.contract.headers import call_options
from sie_server.contract.tasks_wire import (
    AnswerQuestionsRequest,
    DescribeImageRequest,
    DocsToMarkdownRequest,
    EntityFound,
    ExtractEntitiesRequest,
    ExtractStructuredRequest,
    RedactPiiRequest,
    SummarizeDocumentRequest,
)
from sie_server.errors import InvalidInput, PayloadTooLarge
from sie_server.tasks import (
    answer_questions,
    describe_image,
    docs_to_markdown,
    extract_entities,
    extract_structured,
    redact_pii,
    summarize_document,
)
from sie_server.tasks.extract_entities import Span, merge, table, windows
from sie_server.tasks.image_size import declared_size
from sie_server.tasks.summarize_document import groups
from tests.helpers.catalog import MINILM, SMOLLM
from tests.helpers.documents import png_declaring
from tests.tasks.helpers import MODELS, b64, text_pdf
from tests.tasks.test_task_units import Recorder

WORDS = ["Acme", "Corp", "invoice", "total", "due", "March", "Alice", "Martin", "Paris", "a", "of", "and"]


def sample_text(words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + ("." if rng.random() < 0.1 else "") for _ in range(words))


@pytest.mark.parametrize("size", [60, 100, 333])
def test_windows_overlap_cover_the_text_and_index_it(size: int) -> None:
    text = sample_text(400) + " " + "x" * (size + 7) + " end"  # a token longer than a window is cut
    found = windows(text, size, size // 5)
    assert all(text[w.start : w.end] == w.text and 0 < len(w.text) <= size for w in found)
    assert found[0].start == 0 and found[-1].end == len(text)
    for before, after in itertools.pairwise(found):
        assert before.start < after.start < before.end  # each overlaps the one before, and moves on
    starts_mid_word = [w for w in found[1:] if not text[w.start - 1].isspace() and not text[w.start].isspace()]
    assert all("x" * 5 in w.text for w in starts_mid_word)  # only inside the over-long token
    assert windows("", size, 10) == [] and windows("   \n ", size, 10) == []


def test_duplicates_from_overlapping_windows_are_merged_and_whole_entities_win() -> None:
    spans = [
        Span(10, 22, "person", 0.7, edge=False),
        Span(10, 22, "person", 0.9, edge=True),  # the same entity seen again: one, at the best score
        Span(17, 22, "person", 0.99, edge=True),  # part of it, cut at a window's edge: dropped
        Span(30, 35, "city", 0.6, edge=False),
        Span(33, 40, "person", 0.8, edge=False),  # overlaps the city: the higher score wins
        Span(50, 55, "city", 0.4, edge=True),  # at an edge, but nothing better there: kept
    ]
    assert merge(spans) == [
        Span(10, 22, "person", 0.9, edge=False),
        Span(33, 40, "person", 0.8, edge=False),
        Span(50, 55, "city", 0.4, edge=True),
    ]


def test_the_table_has_a_row_per_entity_and_escapes_cells() -> None:
    entities = [EntityFound(text="A|B\nCo", label="org", score=0.876, start=3, end=9)]
    assert table(entities).splitlines() == [
        "| entity | label | score | start | end |",
        "|---|---|---:|---:|---:|",
        "| A\\|B Co | org | 0.88 | 3 | 9 |",
    ]
    assert table([]) == "No entities found."


def test_each_reduce_round_groups_at_least_two_summaries() -> None:
    assert groups(["a" * 50] * 5, 120) == [["a" * 50] * 2, ["a" * 50] * 3]  # the last one alone joins a group
    assert groups(["a" * 500] * 4, 100) == [["a" * 500] * 2, ["a" * 500] * 2]  # two even when over the size
    assert groups(["ab", "cd", "ef"], 1000) == [["ab", "cd", "ef"]]
    notes = ["n" * 300] * 64
    for _ in range(6):
        notes = ["n" * 300 for _ in groups(notes, 300)]
    assert len(notes) == 1  # 64 chunks are combined in at most six rounds


def saved(fmt: str, size: tuple[int, int], mode: str = "RGB", **options: Any) -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, "red" if mode != "L" else 128).save(buffer, format=fmt, **options)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("fmt", "mode", "options"),
    [
        ("PNG", "RGB", {}),
        ("JPEG", "RGB", {}),
        ("JPEG", "L", {"progressive": True}),
        ("GIF", "RGB", {}),
        ("BMP", "RGB", {}),
        ("TIFF", "RGB", {}),
        ("TIFF", "RGB", {"compression": "tiff_deflate"}),
        ("WEBP", "RGB", {"lossless": True}),
        ("WEBP", "RGB", {"quality": 80}),
        ("WEBP", "RGBA", {"quality": 80}),
    ],
)
def test_image_sizes_are_read_from_the_header(fmt: str, mode: str, options: dict[str, Any]) -> None:
    assert declared_size(saved(fmt, (37, 23), mode, **options)) == (37, 23)


def test_a_header_that_declares_a_huge_image_is_read_without_decoding_it() -> None:
    assert declared_size(png_declaring(40_000, 40_000)) == (40_000, 40_000)
    assert declared_size(b"not an image at all") is None and declared_size(b"") is None
    assert declared_size(b"\xff\xd8\xff\xe0\x00") is None  # a JPEG cut inside its first segment


def run_on_nothing(task: Any, request: Any) -> tuple[BaseException, Recorder]:
    """Run a task on a service that does no work (every work call fails the test); the error it raised."""
    service = Recorder()
    with pytest.raises((InvalidInput, PayloadTooLarge)) as refused:
        asyncio.run(task.run(service, request, call_options({})))
    assert service.work == []
    return refused.value, service


def test_an_image_over_the_pixel_limit_or_no_image_is_refused_before_any_model() -> None:
    huge = DescribeImageRequest(image={"data": b64(png_declaring(10_000, 9_000))})
    error, _ = run_on_nothing(describe_image, huge)
    assert isinstance(error, PayloadTooLarge) and "10000 x 9000 pixels" in str(error)
    junk = DescribeImageRequest(image={"data": b64(b"GIF8 but not really")})
    error, _ = run_on_nothing(describe_image, junk)
    assert isinstance(error, InvalidInput) and "not a PNG, JPEG" in str(error)


def test_too_many_chunks_are_refused_before_any_generation() -> None:
    request = SummarizeDocumentRequest(text="A sentence of some length here. " * 700, chunk_chars=200)
    error, _ = run_on_nothing(summarize_document, request)
    assert "chunks in one task; the limit is 64" in str(error)


def test_the_same_label_twice_is_refused_before_any_model() -> None:
    request = ExtractEntitiesRequest(text="Acme Corp", labels=["Company", " company "])
    error, _ = run_on_nothing(extract_entities, request)
    assert "labels must be unique" in str(error)
    nothing = DescribeImageRequest(image={"data": b64(png_declaring(8, 8))}, caption="none", top_k=0)
    error, _ = run_on_nothing(describe_image, nothing)
    assert "ask for nothing" in str(error)


TEXT = {"text": "Acme Corp sells widgets."}
LONG = "x" * 200_001
# a page tree that declares 150 pages (the cap is 100)
PAGES = {"data": b64(text_pdf(["one"]).replace(b"/Count 1", b"/Count 150")), "format": "pdf"}
LABELS = [f"label {i}" for i in range(25)]  # the most the default entity model takes: the narrowest windows
# name: (task, request type, request, status, what the refusal says); each refused before the first work call
BEFORE_WORK: dict[str, tuple[Any, Any, dict[str, Any], int, str]] = {
    "qa questions": (
        answer_questions,
        AnswerQuestionsRequest,
        {"documents": [TEXT], "questions": ["q?"] * 9},
        400,
        "9 questions in one task; the limit is 8",
    ),
    "qa documents": (
        answer_questions,
        AnswerQuestionsRequest,
        {"documents": [TEXT] * 17, "questions": ["q?"]},
        400,
        "17 documents in one task; the limit is 16",
    ),
    "qa characters": (
        answer_questions,
        AnswerQuestionsRequest,
        {"documents": [TEXT, {"text": LONG}], "questions": ["q?"]},
        413,
        "documents[1].text is 200001 characters",
    ),
    "qa passages": (
        answer_questions,
        AnswerQuestionsRequest,
        {"documents": [{"text": "A short sentence here. " * 3000}], "questions": ["q?"], "chunk_chars": 100},
        400,
        "passages in one task; the limit is 512",
    ),
    "qa pages": (
        answer_questions,
        AnswerQuestionsRequest,
        {"documents": [TEXT, {"file": PAGES}], "questions": ["q?"]},
        413,
        "documents[1].file has 150 pages",
    ),
    "redaction characters": (redact_pii, RedactPiiRequest, {"text": LONG}, 413, "text is 200001 characters"),
    "markdown pages": (docs_to_markdown, DocsToMarkdownRequest, {"file": PAGES}, 413, "file has 150 pages"),
    "markdown bytes": (
        docs_to_markdown,
        DocsToMarkdownRequest,
        {"file": {"data": b64(bytes(20 * 2**20 + 1))}},
        413,
        "file is 20971521 bytes",
    ),
    "structured characters": (
        extract_structured,
        ExtractStructuredRequest,
        {"text": LONG, "schema": {"type": "object"}},
        413,
        "text is 200001 characters",
    ),
    "summary characters": (summarize_document, SummarizeDocumentRequest, {"text": LONG}, 413, "200001 characters"),
    "summary chunks": (
        summarize_document,
        SummarizeDocumentRequest,
        {"text": "A sentence of some length here. " * 700, "chunk_chars": 200},
        400,
        "chunks in one task; the limit is 64",
    ),
    "summary pages": (summarize_document, SummarizeDocumentRequest, {"file": PAGES}, 413, "file has 150 pages"),
    "entity characters": (
        extract_entities,
        ExtractEntitiesRequest,
        {"text": LONG, "labels": ["person"]},
        413,
        "text is 200001 characters",
    ),
    "entity windows": (
        extract_entities,
        ExtractEntitiesRequest,
        {"text": "Acme Corp " * 19_000, "labels": LABELS},
        400,
        "windows in one task; the limit is 512",
    ),
    "entity pages": (
        extract_entities,
        ExtractEntitiesRequest,
        {"file": PAGES, "labels": ["person"]},
        413,
        "file has 150 pages",
    ),
    "image pixels": (
        describe_image,
        DescribeImageRequest,
        {"image": {"data": b64(png_declaring(10_000, 9_000))}},
        413,
        "10000 x 9000 pixels",
    ),
}


@pytest.mark.parametrize("cap", list(BEFORE_WORK))
def test_each_cap_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch, cap: str) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the default reranker is not cached here
    task, kind, body, status, said = BEFORE_WORK[cap]
    chosen = {"models": MODELS} if task is answer_questions else {}
    error, _ = run_on_nothing(task, kind.model_validate({**body, **chosen}))
    assert isinstance(error, InvalidInput) and error.status == status and said in str(error), str(error)


PICTURE = {"data": b64(png_declaring(8, 8))}
# task: (its module, request type, request, the fields refused); each names a model for a step the task never runs
UNUSED: dict[str, tuple[Any, Any, dict[str, Any], str]] = {
    "redact_pii": (redact_pii, RedactPiiRequest, {"text": "Ann", "models": {"caption": "x"}}, "models.caption"),
    "answer_questions": (
        answer_questions,
        AnswerQuestionsRequest,
        {"documents": [TEXT], "questions": ["q?"], "models": {**MODELS, "ocr": "x", "ner": "y"}},
        "models.ocr, models.ner",
    ),
    "docs_to_markdown": (
        docs_to_markdown,
        DocsToMarkdownRequest,
        {"file": {"data": b64(text_pdf(["one"]))}, "models": {"generate": SMOLLM}},
        "models.generate",
    ),
    "extract_structured": (
        extract_structured,
        ExtractStructuredRequest,
        {"text": "Ann", "schema": {"type": "object"}, "models": {"generate": SMOLLM, "embed": MINILM}},
        "models.embed",
    ),
    "summarize_document": (
        summarize_document,
        SummarizeDocumentRequest,
        {**TEXT, "models": {"rerank": "x"}},
        "models.rerank",
    ),
    "extract_entities": (
        extract_entities,
        ExtractEntitiesRequest,
        {**TEXT, "labels": ["company"], "models": {"tags": "x"}},
        "models.tags",
    ),
    "describe_image": (describe_image, DescribeImageRequest, {"image": PICTURE, "models": {"ner": "x"}}, "models.ner"),
}


@pytest.mark.parametrize("name", list(UNUSED))
def test_a_model_for_a_step_the_task_never_runs_is_refused_by_name(name: str) -> None:
    task, kind, body, fields = UNUSED[name]
    error, _ = run_on_nothing(task, kind.model_validate(body))
    assert error.status == 400 and f"{fields}: task {name} has no such step" in str(error), str(error)
