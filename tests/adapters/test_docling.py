"""The docling adapter on documents the tests write: what a user reads back from each format.

The catalog's own config is loaded (no weights: docling's model-free pipelines), the documents go
through the service's screening first, as they would in a request, and no socket may be opened.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sie_server.adapters import create_adapter
from sie_server.adapters.documents.parser import Document, PageSize, ParsedDocument, document_tokens
from sie_server.adapters.runtime.options import DocumentOptions
from sie_server.catalog.loader import parse_config_file
from sie_server.engine.document_inputs import screen
from sie_server.errors import InvalidInput
from tests.helpers.catalog import REAL_CATALOG
from tests.helpers.document_files import (
    HEADING_LINE,
    INVOICE_LINE,
    docx_bytes,
    invoice_pdf,
    pdf_bytes,
    pptx_bytes,
    replace_member,
    xlsx_bytes,
)

CONFIG = REAL_CATALOG / "docling-project__docling.yaml"
#: docling may never reach the network (tests/adapters/conftest.py)
pytestmark = pytest.mark.usefixtures("no_network")


@pytest.fixture(scope="module")
def parser() -> Iterator[Any]:
    config = parse_config_file(CONFIG)
    adapter = create_adapter(config, config.profile("cpu"), "cpu")
    adapter.load(Path("."))
    adapter.warmup()
    yield adapter
    adapter.unload()


def parse(parser: Any, data: bytes, hint: str | None = None) -> ParsedDocument:
    document = screen(data, hint, max_pages=100, index_name="item-0")
    [parsed] = parser.run([document_tokens(document)], DocumentOptions(max_pages=100))
    assert isinstance(parsed, ParsedDocument)
    return parsed


def blocks(parsed: ParsedDocument) -> list[tuple[str, str]]:
    return [(e["text"], e["label"]) for e in parsed.entities]


def test_a_pdf_gives_its_text_lines_with_boxes_and_lists_its_scanned_page(parser: Any) -> None:
    parsed = parse(parser, invoice_pdf(), "pdf")
    assert parsed.pages == [PageSize(1, 612, 792), PageSize(2, 612, 792)]  # Letter, in points
    assert blocks(parsed) == [("ACME Invoice", "line"), ("Invoice total 42.00", "line")]
    assert parsed.scanned == [2]  # page 2 is only a picture: the OCR model reads it
    assert "Invoice total 42.00" in parsed.markdown and "ACME Invoice" in parsed.markdown
    assert "Invoice total 42.00" in parsed.text
    line = parsed.entities[1]
    assert line["page"] == 1 and line["score"] == 1.0 and line["start"] is None
    x, y, w, h = line["bbox"] or [0, 0, 0, 0]
    # drawn at x=72 with its baseline 700 points up from the bottom: 92 from the top; 12 pt Helvetica
    baseline = 792 - 700
    assert abs(x - 72) <= 2
    assert abs(y - (baseline - 9)) <= 3  # the cap height of 12 pt Helvetica is about 9 points
    assert abs((y + h) - baseline) <= 4  # the box ends at the baseline (plus the descent)
    assert 90 <= w <= 105  # "Invoice total 42.00" is 97 points wide in 12 pt Helvetica
    heading = parsed.entities[0]["bbox"] or [0, 0, 0, 0]
    assert heading[1] + heading[3] <= y  # the heading (baseline 52 from the top) is above the line


def test_a_pdf_without_any_text_layer_is_all_scanned(parser: Any) -> None:
    parsed = parse(parser, pdf_bytes([None, None, None]))
    assert parsed.entities == [] and parsed.scanned == [1, 2, 3]
    assert [p.page for p in parsed.pages] == [1, 2, 3]


def test_a_scan_with_a_stamped_line_of_text_is_still_scanned(parser: Any) -> None:
    """A page-sized picture with only "Page 2 of 2" as text is a scan; a page of text beside a small
    picture is not."""
    scan = b"q 612 0 0 792 0 0 cm /Im1 Do Q\nBT /F1 8 Tf 500 20 Td (Page 2 of 2) Tj ET"
    figure = b"q 100 0 0 80 400 600 cm /Im1 Do Q\n" + INVOICE_LINE
    parsed = parse(parser, pdf_bytes([figure, scan]))
    assert [(e["text"], e["page"]) for e in parsed.entities] == [("Invoice total 42.00", 1), ("Page 2 of 2", 2)]
    assert parsed.scanned == [2]


def test_a_pdf_page_size_other_than_letter(parser: Any) -> None:
    parsed = parse(parser, pdf_bytes([HEADING_LINE, INVOICE_LINE], size=(595, 842)))  # A4
    assert parsed.pages == [PageSize(1, 595, 842), PageSize(2, 595, 842)]
    assert [(e["text"], e["page"]) for e in parsed.entities] == [("ACME Invoice", 1), ("Invoice total 42.00", 2)]
    assert parsed.scanned == []
    [_, box] = [e["bbox"] or [] for e in parsed.entities]
    assert abs(box[1] + box[3] - (842 - 700)) <= 4  # top-left origin on the taller page


def test_a_docx_gives_headings_paragraphs_lists_and_table_cells(parser: Any) -> None:
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", 1)
    document.add_paragraph("Revenue grew by 12 percent.")
    document.add_paragraph("first point", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for (row, col), text in {(0, 0): "Item", (0, 1): "Price", (1, 0): "Widget", (1, 1): "4.00"}.items():
        table.cell(row, col).text = text
    buffer = io.BytesIO()
    document.save(buffer)
    parsed = parse(parser, buffer.getvalue())
    assert blocks(parsed) == [
        ("Quarterly report", "heading"),
        ("Revenue grew by 12 percent.", "paragraph"),
        ("first point", "list_item"),
        ("Item", "table_cell"),
        ("Price", "table_cell"),
        ("Widget", "table_cell"),
        ("4.00", "table_cell"),
    ]
    assert re.search(r"^#+ Quarterly report$", parsed.markdown, re.MULTILINE)
    assert re.search(r"^\| Widget\s+\|\s+4\.00 \|$", parsed.markdown, re.MULTILINE)
    assert "- first point" in parsed.markdown
    assert all(e["bbox"] is None and e["page"] is None for e in parsed.entities)  # no layout in a DOCX
    assert parsed.pages == [] and parsed.scanned == []


def test_a_pptx_gives_slides_in_points_and_boxes(parser: Any) -> None:
    parsed = parse(parser, pptx_bytes())
    assert parsed.pages == [PageSize(1, 720, 540)]  # 10 x 7.5 inches
    assert blocks(parsed) == [("Roadmap", "heading"), ("Ship the parser", "list_item")]
    title = parsed.entities[0]
    # the default title placeholder: 0.5 inch from the left, 648 x 90 points
    assert title["page"] == 1 and title["bbox"] == [36, 21, 648, 91]
    assert re.search(r"^# Roadmap$", parsed.markdown, re.MULTILINE)


def test_an_xlsx_gives_its_cells_by_sheet(parser: Any) -> None:
    parsed = parse(parser, xlsx_bytes())
    assert blocks(parsed) == [("Item", "table_cell"), ("Cost", "table_cell"), ("Paper", "table_cell"),
                              ("3", "table_cell")]  # fmt: skip
    assert all(e["page"] == 1 and e["bbox"] is None for e in parsed.entities)
    assert re.search(r"^\| Paper\s+\|\s+3 \|$", parsed.markdown, re.MULTILINE)


def test_html_gives_headings_and_whole_paragraphs_and_fetches_nothing(parser: Any) -> None:
    html = (
        b"<!doctype html><html><head><title>Page title</title></head><body>"
        b"<p>An intro before any heading.</p><h1>Hello</h1>"
        b"<p>World <b>bold</b> words</p><ul><li>one</li><li>two</li></ul>"
        b"<img src='http://example.invalid/pixel.png'><img src='file:///etc/passwd'></body></html>"
    )
    parsed = parse(parser, html)
    assert blocks(parsed) == [  # the <title> is furniture, the intro is content
        ("An intro before any heading.", "paragraph"),
        ("Hello", "heading"),
        ("World bold words", "paragraph"),  # inline runs are one block
        ("one", "list_item"),
        ("two", "list_item"),
    ]
    assert re.search(r"^# Hello$", parsed.markdown, re.MULTILINE) and "World **bold** words" in parsed.markdown
    assert "root:" not in parsed.markdown + parsed.text


def test_html_in_a_legacy_encoding_is_read_by_its_meta_charset(parser: Any) -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><p>Caf\u00e9 cr\u00e8me</p></body></html>'
    parsed = parse(parser, html.encode("latin-1"))
    assert blocks(parsed) == [("Caf\u00e9 cr\u00e8me", "paragraph")]


def test_markdown_gives_its_blocks_and_keeps_its_markdown(parser: Any) -> None:
    source = b"# Title\n\nSome *text* here.\n\n## Part two\n\n- a\n- b\n\n| x | y |\n|---|---|\n| 1 | 2 |\n"
    parsed = parse(parser, source)
    assert blocks(parsed) == [
        ("Title", "heading"),
        ("Some text here.", "paragraph"),
        ("Part two", "heading"),
        ("a", "list_item"),
        ("b", "list_item"),
        ("x", "table_cell"),
        ("y", "table_cell"),
        ("1", "table_cell"),
        ("2", "table_cell"),
    ]
    assert parsed.markdown.startswith("# Title\n\nSome *text* here.")
    assert "Some text here." in parsed.text and "*" not in parsed.text.split("\n")[2]


def test_a_batch_answers_each_document_in_order(parser: Any) -> None:
    documents = [
        screen(b"# One", None, max_pages=10, index_name="a"),
        screen(invoice_pdf(), None, max_pages=10, index_name="b"),
        screen(docx_bytes(), None, max_pages=10, index_name="c"),
    ]
    answers = parser.run([document_tokens(d) for d in documents], DocumentOptions())
    assert [a.entities[0]["text"] for a in answers] == ["One", "ACME Invoice", "Quarterly report"]


def test_a_document_docling_cannot_read_is_invalid_input(parser: Any) -> None:
    broken = replace_member(docx_bytes(), "word/document.xml", b"<w:document>not closed")
    with zipfile.ZipFile(io.BytesIO(broken)) as archive:
        assert archive.read("word/document.xml") == b"<w:document>not closed"
    document = screen(broken, None, max_pages=10, index_name="a")  # screening passes: no bomb, sizes fine
    with pytest.raises(InvalidInput, match="docx document could not be parsed"):
        parser.run([document_tokens(document)], DocumentOptions())
    with pytest.raises(InvalidInput, match="more than the limit of 1"):
        parser.run([document_tokens(Document(invoice_pdf(), "pdf", 2))], DocumentOptions(max_pages=1))
