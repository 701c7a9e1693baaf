"""Files into documents through the server: LangChain's SIEDocumentLoader and LlamaIndex's SIEReader,
on the real PP-OCRv6 (an image and a scanned PDF), in one-per-file and one-per-page modes."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.document_loaders import BaseLoader
from llama_index.core.readers.base import BaseReader
from llama_index.core.schema import MetadataMode

from sie_langchain import SIEDocumentLoader
from sie_llamaindex import SIEReader
from sie_sdk import InvalidInputError
from tests.helpers.catalog import OCR
from tests.helpers.documents import INVOICE_LINES, png, scanned_pdf, text_image

SECOND_PAGE = ["Page two", "Thank you"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("files")
    paths = {"png": folder / "invoice.png", "pdf": folder / "scan.pdf", "bad": folder / "broken.pdf"}
    paths["png"].write_bytes(png(text_image(INVOICE_LINES)))
    paths["pdf"].write_bytes(scanned_pdf([text_image(INVOICE_LINES, size=48), text_image(SECOND_PAGE, size=48)]))
    paths["bad"].write_bytes(b"%PDF-1.7 this is not really a pdf")
    return paths


def test_the_langchain_loader_gives_one_document_per_file_with_its_boxes(base_url: str, files: dict[str, Path]) -> None:
    loader = SIEDocumentLoader([files["png"], files["pdf"]], model=OCR, base_url=base_url)
    assert isinstance(loader, BaseLoader)
    image, scan = loader.load()
    assert image.page_content == "\n".join(INVOICE_LINES)
    assert image.metadata["source"] == str(files["png"]) and image.metadata["model"] == OCR
    assert [b["text"] for b in image.metadata["blocks"]] == INVOICE_LINES
    assert all(len(b["bbox"]) == 4 and b["page"] == 1 for b in image.metadata["blocks"])
    assert scan.page_content == "\n".join(INVOICE_LINES) + "\n\n" + "\n".join(SECOND_PAGE)
    assert scan.metadata["pages"] == 2


async def test_the_langchain_loader_by_page_sync_and_async(base_url: str, files: dict[str, Path]) -> None:
    loader = SIEDocumentLoader(files["pdf"], model=OCR, base_url=base_url, mode="page")
    pages = list(loader.lazy_load())
    assert [(d.metadata["page"], d.page_content) for d in pages] == [
        (1, "\n".join(INVOICE_LINES)),
        (2, "\n".join(SECOND_PAGE)),
    ]
    assert [d.page_content async for d in loader.alazy_load()] == [d.page_content for d in pages]


def test_a_file_the_server_cannot_open_raises_naming_it(base_url: str, files: dict[str, Path]) -> None:
    with pytest.raises(InvalidInputError, match=r"broken\.pdf"):
        SIEDocumentLoader(files["bad"], model=OCR, base_url=base_url).load()
    with pytest.raises(ValueError, match="mode must be"):
        SIEDocumentLoader(files["png"], model=OCR, mode="chapters")  # type: ignore[arg-type]


async def test_the_llamaindex_reader_keeps_boxes_out_of_what_is_embedded(base_url: str, files: dict[str, Path]) -> None:
    reader = SIEReader(OCR, base_url=base_url, mode="page")
    assert isinstance(reader, BaseReader)
    pages = reader.load_data(files["pdf"], extra_info={"customer": "acme"})
    assert [(d.metadata["page"], d.text) for d in pages] == [(1, "\n".join(INVOICE_LINES)), (2, "\n".join(SECOND_PAGE))]
    first = pages[0]
    assert first.metadata["customer"] == "acme" and first.metadata["file_path"] == str(files["pdf"])
    assert [b["text"] for b in first.metadata["blocks"]] == INVOICE_LINES
    embedded = first.get_content(metadata_mode=MetadataMode.EMBED)
    assert "bbox" not in embedded and "INVOICE 2024-017" in embedded
    (whole,) = await SIEReader(OCR, base_url=base_url).aload_data(files["png"])
    assert whole.text == "\n".join(INVOICE_LINES)
