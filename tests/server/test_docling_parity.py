"""The server's document extraction answers what docling itself gives for the same file.

Each DOCX, PPTX, XLSX, HTML and Markdown file of docling's own test data (tests/server/data/docling,
README.md there names their source), one of its Markdown files behind each byte-order mark, and a
workbook written here with a chart sheet and hidden sheets, goes to
``POST /v1/extract/docling-project/docling`` on the shared server; the markdown and text it answers
must equal, character for character, what docling gives in this process for the same bytes: a
``DocumentConverter`` with docling's defaults but for the options the server chooses on purpose
(``reference_converter``; the adapter's ``build_converter`` says why each is chosen), and docling's
export for the format (``docling_markdown``). The in-process conversions may not reach the network.
"""

from __future__ import annotations

import base64
import codecs
import io
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sie_server.adapters.documents.docling import build_converter
from tests.helpers.catalog import DOCLING

DATA = Path(__file__).parent / "data" / "docling"
GROUNDTRUTH = DATA / "groundtruth"
FORMATS = {".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx", ".xlsm": "xlsx", ".html": "html", ".md": "md"}
GENERATED = "generated_chartsheet_hidden.xlsx"  # written by ``chartsheet_and_hidden_sheets``


def chartsheet_and_hidden_sheets() -> bytes:
    """A workbook with a data sheet, a hidden and a very hidden sheet, a chart sheet (a sheet that is only a
    chart, ``xl/chartsheets/``) over the data, and a last visible sheet after them."""
    import openpyxl
    from openpyxl.chart import BarChart, Reference

    book = openpyxl.Workbook()
    sales = book.active
    assert sales is not None
    sales.title = "Sales"
    for row in (["Month", "Units"], ["Jan", 10], ["Feb", 12], ["Mar", 9]):
        sales.append(row)
    workings = book.create_sheet("Workings")
    workings.append(["Hidden workings", 1])
    workings.sheet_state = "hidden"
    lookup = book.create_sheet("Lookup")
    lookup.append(["Very hidden key", "value"])
    lookup.sheet_state = "veryHidden"
    chart = BarChart()
    chart.title = "Units by month"
    chart.add_data(Reference(sales, min_col=2, min_row=1, max_row=4), titles_from_data=True)
    chart.set_categories(Reference(sales, min_col=1, min_row=2, max_row=4))
    book.create_chartsheet("Units chart").add_chart(chart)
    book.create_sheet("Notes").append(["Shipped from the north depot"])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def marked_markdown() -> dict[str, bytes]:
    """Docling's nested.md (with CJK punctuation) behind each byte-order mark docling reads: the server
    decodes Markdown and passes it on as UTF-8, docling here reads the bytes as sent."""
    text = (DATA / "nested.md").read_text(encoding="utf-8")
    marks = {
        "utf-8": codecs.BOM_UTF8,
        "utf-16-le": codecs.BOM_UTF16_LE,
        "utf-16-be": codecs.BOM_UTF16_BE,
        "utf-32-le": codecs.BOM_UTF32_LE,
        "utf-32-be": codecs.BOM_UTF32_BE,
    }
    return {f"nested.{encoding}-bom.md": mark + text.encode(encoding) for encoding, mark in marks.items()}


def documents() -> dict[str, bytes]:
    found = {p.name: p.read_bytes() for p in sorted(DATA.iterdir()) if p.suffix in FORMATS and p.name != "README.md"}
    return found | marked_markdown() | {GENERATED: chartsheet_and_hidden_sheets()}


DOCUMENTS = documents()


def fmt(name: str) -> str:
    return FORMATS[Path(name).suffix]


# ----- docling in this process -------------------------------------------------------------------
def reference_converter() -> Any:
    """Docling's default converter but for the one option the server sets that changes an answer: an
    HTML page's content before its first heading stays content (``infer_furniture=False``). The rest
    the server sets is docling's default already, or refuses a document parsing for over 300 s."""
    from docling.datamodel.backend_options import HTMLBackendOptions
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter, HTMLFormatOption

    html = HTMLFormatOption(backend_options=HTMLBackendOptions.model_validate({"infer_furniture": False}))
    return DocumentConverter(format_options={InputFormat.HTML: html})


def docling_markdown(doc: Any, kind: str) -> str:
    """Docling's markdown export with its defaults; a workbook's through docling's Excel serializer, the
    export docling's own expected outputs use, which names each sheet (the generic one drops the names)."""
    if kind != "xlsx":
        return str(doc.export_to_markdown())
    from docling_core.transforms.serializer.markdown_excel import MsExcelMarkdownDocSerializer

    return str(MsExcelMarkdownDocSerializer(doc=doc).serialize().text)


@dataclass(frozen=True)
class Export:
    markdown: str
    text: str


@contextmanager
def offline() -> Iterator[None]:
    """Every lookup or connection refused and recorded (docling would swallow the error); fails if any."""
    attempts: list[object] = []

    def refuse(*args: object, **kwargs: object) -> None:
        attempts.append(args)
        raise OSError("tests never reach the network")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", refuse)
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket, "create_connection", refuse)
        yield
    assert attempts == [], f"docling tried to reach the network: {attempts}"


def convert(converter: Any, name: str, data: bytes) -> Any:
    from docling.datamodel.base_models import ConversionStatus, DocumentStream

    result = converter.convert(DocumentStream(name=name, stream=io.BytesIO(data)))
    assert result.status == ConversionStatus.SUCCESS, (name, result.errors)
    return result.document


@pytest.fixture(scope="module")
def docling() -> dict[str, Export]:
    """Docling's own markdown and text for each document, converted here (once for the module)."""
    converter = reference_converter()
    with offline():
        docs = {name: convert(converter, name, data) for name, data in DOCUMENTS.items()}
    return {name: Export(docling_markdown(doc, fmt(name)), doc.export_to_text()) for name, doc in docs.items()}


# ----- the server --------------------------------------------------------------------------------
def extract(base_url: str, name: str) -> Export:
    """The server's answer for one document (one request each: the shared server takes 256 KiB bodies)."""
    document = {"data": base64.b64encode(DOCUMENTS[name]).decode(), "format": fmt(name)}
    r = httpx.post(f"{base_url}/v1/extract/{DOCLING}", json={"items": [{"document": document}]}, timeout=180)
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    assert "error" not in item, item
    return Export(item["data"]["markdown"], item["data"]["text"])


def headings(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("## ")]


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_the_server_answers_the_markdown_and_text_docling_gives(
    base_url: str, docling: dict[str, Export], name: str
) -> None:
    answer = extract(base_url, name)
    assert answer.markdown == docling[name].markdown
    assert answer.text == docling[name].text
    assert answer.markdown.strip(), "a document of docling's test data gave no markdown at all"


def test_each_visible_sheet_is_named_above_its_tables_and_hidden_sheets_are_left_out(base_url: str) -> None:
    answer = extract(base_url, GENERATED)
    assert headings(answer.markdown) == ["## Sales", "## Units chart", "## Notes"]
    sales, chart, notes = (answer.markdown.index(h) for h in headings(answer.markdown))
    assert sales < answer.markdown.index("| Month") < chart < answer.markdown.index("Units by month") < notes
    assert notes < answer.markdown.index("Shipped from the north depot")
    for hidden in ("Workings", "Lookup", "Hidden workings", "Very hidden key"):
        assert hidden not in answer.markdown and hidden not in answer.text


@pytest.mark.parametrize("name", sorted(p.name.removesuffix(".md") for p in GROUNDTRUTH.glob("*.md")))
def test_the_sheet_headings_are_those_of_doclings_own_expected_outputs(base_url: str, name: str) -> None:
    """Docling's expected markdown for its workbooks (written by a later docling, with compact tables: only
    the headings are compared) names the same sheets in the same order."""
    expected = headings((GROUNDTRUTH / f"{name}.md").read_text(encoding="utf-8"))
    assert expected, f"docling's expected output for {name} names no sheet"
    assert headings(extract(base_url, name).markdown) == expected


def test_html_before_the_first_heading_is_kept_where_doclings_default_drops_it(
    base_url: str, docling: dict[str, Export]
) -> None:
    """The server's one deliberate difference: a picture or text before an HTML page's first heading is
    content; docling's default converter calls it furniture and leaves it out of the markdown and text."""
    from docling.document_converter import DocumentConverter

    name = "hyperlink_02.html"  # a logo (with its alt text), then the page's only heading
    answer = extract(base_url, name)
    assert answer.markdown == "Image alt text\n\n<!-- image -->\n\n## [Home](/home.html)" == docling[name].markdown
    assert answer.text == "Image alt text\n\nHome"
    with offline():
        default = convert(DocumentConverter(), name, DOCUMENTS[name])
    assert (default.export_to_markdown(), default.export_to_text()) == ("## [Home](/home.html)", "Home")


def test_the_server_sets_no_option_beyond_those_compared() -> None:
    """Against docling's defaults, the server's converter for these formats has the same pipelines and
    backends, and differs only by the document timeout and HTML's ``infer_furniture`` (which
    ``reference_converter`` reproduces): an option added to the adapter unnoticed fails here."""
    from docling.datamodel.base_models import InputFormat
    from docling.document_converter import DocumentConverter

    ours, theirs = build_converter().format_to_options, DocumentConverter().format_to_options
    for kind in (InputFormat.DOCX, InputFormat.PPTX, InputFormat.XLSX, InputFormat.HTML, InputFormat.MD):
        mine, default = ours[kind], theirs[kind]
        assert (mine.pipeline_cls, mine.backend) == (default.pipeline_cls, default.backend), kind
        pipeline = differences(options(mine.pipeline_options), options(default.pipeline_options))
        assert pipeline == {"document_timeout": 300.0}, kind
        # docling's default is no backend options: the backend then takes its options class's defaults
        backend = {} if mine.backend_options is None else options(mine.backend_options)
        defaults = {} if mine.backend_options is None else options(type(mine.backend_options)())
        assert differences(backend, defaults) == ({"infer_furniture": False} if kind == InputFormat.HTML else {}), kind


def options(model: Any) -> dict[str, Any]:
    assert model is not None
    dumped: dict[str, Any] = model.model_dump()
    return dumped


def differences(mine: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in mine.items() if default.get(key) != value}
