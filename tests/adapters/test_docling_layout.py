"""Docling's layout pipeline (adapter docling_layout) on a tiny RT-DETR v2 whose answer is known: every
query says "title" over the page's top-left quarter (tests/helpers/tiny_layout.py). What a user reads
back is the layout model's region, with its label, its box in PDF points and its text; the scanned page
is still left to the OCR model; the weights are charged; and the catalog's config says what it needs
where it cannot run. No socket may be opened.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sie_server.adapters import create_adapter
from sie_server.adapters.documents.docling_layout import (
    TABLE_ENGINES_MODULE,
    TABLEFORMER_REPO,
    TABLEFORMER_REVISION,
    missing_requirements,
)
from sie_server.adapters.documents.parser import ParsedDocument, document_tokens
from sie_server.adapters.runtime.options import DocumentOptions
from sie_server.catalog.loader import parse_config_file
from sie_server.catalog.schema import ModelConfig
from sie_server.engine.document_inputs import screen
from sie_server.errors import ModelLoadFailed
from tests.helpers.catalog import REAL_CATALOG
from tests.helpers.document_files import docx_bytes, invoice_pdf, pdf_bytes
from tests.helpers.fake_hub import FakeHub
from tests.helpers.server import pythonpath
from tests.helpers.tiny_layout import build_layout, table_engines_stand_in

CONFIG = REAL_CATALOG / "docling-project__docling-layout-heron.yaml"
#: docling may never reach the network (tests/adapters/conftest.py)
pytestmark = pytest.mark.usefixtures("no_network")


def config(tables: bool) -> ModelConfig:
    data = parse_config_file(CONFIG).model_dump(mode="json", exclude_none=True)
    data["tasks"]["extract"]["table_structure"] = tables
    return ModelConfig.model_validate(data)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_layout(tmp_path_factory.mktemp("layout") / "heron", title_everywhere=True)


@pytest.fixture(scope="module")
def parser(weights: Path) -> Iterator[Any]:
    with table_engines_stand_in():
        local = config(tables=False)
        adapter = create_adapter(local, local.profile("cpu"), "cpu")
        adapter.load(weights)
        adapter.warmup()
        yield adapter
        adapter.unload()


def parse(parser: Any, data: bytes) -> ParsedDocument:
    document = screen(data, None, max_pages=100, index_name="item-0")
    [parsed] = parser.run([document_tokens(document)], DocumentOptions(max_pages=100))
    assert isinstance(parsed, ParsedDocument)
    return parsed


def test_a_pdfs_blocks_are_the_layout_models_regions(parser: Any) -> None:
    """The model-free parser gives the same page two lines (tests/adapters/test_docling.py); the layout
    model's title region holds both, so they come back as one heading with the region's box."""
    parsed = parse(parser, invoice_pdf())
    assert [(e["text"], e["label"], e["page"]) for e in parsed.entities] == [
        ("ACME Invoice Invoice total 42.00", "heading", 1)
    ]
    x, y, w, h = parsed.entities[0]["bbox"] or [0, 0, 0, 0]
    # the region shrinks to the text it holds: the heading's left edge at 72 points, from its cap height
    # (baseline 52 from the top) to the invoice line's baseline (92 from the top), in PDF points
    assert abs(x - 72) <= 2 and abs(y - (52 - 13)) <= 3 and abs(y + h - 92) <= 4
    assert 100 <= w <= 130  # "ACME Invoice" in 18 pt Helvetica-Bold is the wider line
    assert re.search(r"^#+ ACME Invoice Invoice total 42\.00$", parsed.markdown, re.MULTILINE)
    assert parsed.scanned == [2]  # the picture-only page is still the OCR model's
    assert [(p.page, p.width, p.height) for p in parsed.pages] == [(1, 612, 792), (2, 612, 792)]


def test_a_page_outside_every_region_keeps_its_text(parser: Any) -> None:
    """Text the layout model puts in no region is kept as a paragraph of its own (docling's orphan
    clusters): the region covers the top-left quarter, the line at the bottom right is outside it."""
    far = b"BT /F1 12 Tf 400 40 Td (Signed at the bottom) Tj ET"
    parsed = parse(parser, pdf_bytes([far]))
    assert [(e["text"], e["label"]) for e in parsed.entities] == [("Signed at the bottom", "paragraph")]
    x, y, _, _ = parsed.entities[0]["bbox"] or [0, 0, 0, 0]
    assert abs(x - 400) <= 2 and y > 700


def test_other_formats_go_through_the_model_free_pipelines(parser: Any) -> None:
    parsed = parse(parser, docx_bytes())
    assert parsed.entities and all(e["bbox"] is None for e in parsed.entities)
    assert parsed.entities[0]["label"] == "heading"


def test_the_layout_weights_are_charged(parser: Any, weights: Path) -> None:
    assert parser.resident_bytes() == (weights / "model.safetensors").stat().st_size > 0


def test_the_catalog_config_says_what_it_needs_where_it_cannot_run(weights: Path) -> None:
    """Here PyPI's torchvision does not import beside this CPU torch, and docling-ibm-models is not
    installed: loading names both, and where to get them, before reading any weights."""
    if importlib.util.find_spec("torchvision") is not None and importlib.util.find_spec("docling_ibm_models"):
        pytest.skip("torchvision and docling-ibm-models are installed here: the catalog config can load")
    catalog = parse_config_file(CONFIG)
    adapter = create_adapter(catalog, catalog.profile("cpu"), "cpu")
    with pytest.raises(ModelLoadFailed) as refused:
        adapter.load(weights)
    message = str(refused.value)
    assert "docling-ibm-models" in message and "docling-project/docling" in message
    assert adapter.converter is None and adapter.resident_bytes() == 0


def test_tables_need_docling_ibm_models(weights: Path) -> None:
    if importlib.util.find_spec("docling_ibm_models") is not None:
        pytest.skip("docling-ibm-models is installed here")
    with table_engines_stand_in():
        assert missing_requirements(tables=False) == []
        assert missing_requirements(tables=True) == ["docling-ibm-models (for tables)"]
        local = config(tables=True)
        adapter = create_adapter(local, local.profile("cpu"), "cpu")
        with pytest.raises(ModelLoadFailed, match="docling-ibm-models"):
            adapter.load(weights)


def test_without_torchvision_the_pipeline_is_refused_by_name() -> None:
    try:
        importlib.import_module(TABLE_ENGINES_MODULE)
    except Exception:  # what the adapter sees here
        [needed] = missing_requirements(tables=False)
        assert needed.startswith("torchvision (")
    else:
        assert missing_requirements(tables=False) == []


def fetch_tableformer(hf_home: Path, endpoint: str, offline: bool) -> subprocess.CompletedProcess[str]:
    """``tableformer_folder`` in a process of its own (the hub client reads its endpoint when imported)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update({"HF_HOME": str(hf_home), "HF_ENDPOINT": endpoint, "PYTHONPATH": pythonpath()})
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    code = (
        "from sie_server.adapters.documents.docling_layout import tableformer_folder\n"
        "from sie_server.errors import ModelLoadFailed\n"
        "try:\n    print(tableformer_folder('docling-project/docling-layout-heron'))\n"
        "except ModelLoadFailed as exc:\n    print('REFUSED', exc)\n"
    )
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_tableformer_comes_at_its_pinned_commit_and_then_offline_from_the_cache(tmp_path: Path) -> None:
    """Only the accurate model's files are fetched, at the pinned commit, into the Hugging Face cache;
    with the network off the same call answers from there; with an empty cache it says how to fetch it."""
    remote = tmp_path / "remote"
    accurate = remote / "model_artifacts" / "tableformer" / "accurate"
    fast = remote / "model_artifacts" / "tableformer" / "fast"
    for folder, size in ((accurate, 4096), (fast, 2048)):
        folder.mkdir(parents=True)
        (folder / "tm_config.json").write_text('{"model": {"type": "TableModel04_rs"}}')
        (folder / f"tableformer_{folder.name}.safetensors").write_bytes(os.urandom(size))
    hub = FakeHub(TABLEFORMER_REPO, remote, TABLEFORMER_REVISION)
    try:
        hf_home = tmp_path / "hf"
        fetched = fetch_tableformer(hf_home, hub.url, offline=False)
        assert fetched.returncode == 0, fetched.stderr
        folder = Path(fetched.stdout.strip())
        assert folder.name == TABLEFORMER_REVISION and folder.parent.name == "snapshots"
        got = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        assert got == [
            "model_artifacts/tableformer/accurate/tableformer_accurate.safetensors",
            "model_artifacts/tableformer/accurate/tm_config.json",
        ]
        assert (folder / "model_artifacts/tableformer/accurate/tableformer_accurate.safetensors").stat().st_size == 4096
        assert {name for name, _ in hub.ranges} == set(got)
    finally:
        hub.stop()
    again = fetch_tableformer(hf_home, hub.url, offline=True)
    assert again.returncode == 0 and Path(again.stdout.strip()) == folder
    empty = fetch_tableformer(tmp_path / "empty", hub.url, offline=True)
    assert (
        empty.stdout.startswith("REFUSED")
        and f"hf download {TABLEFORMER_REPO} --revision {TABLEFORMER_REVISION}" in empty.stdout
    )


def test_a_layout_folder_it_cannot_read_fails_the_load_and_leaves_nothing_behind(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "rt_detr_v2"}')  # no weights, no image processor
    before = set(Path(tempfile.gettempdir()).glob("sie-docling-*"))
    with table_engines_stand_in():
        local = config(tables=False)
        adapter = create_adapter(local, local.profile("cpu"), "cpu")
        with pytest.raises(ModelLoadFailed, match="the layout pipeline did not load"):
            adapter.load(broken)
    assert adapter.converter is None and adapter.resident_bytes() == 0
    assert set(Path(tempfile.gettempdir()).glob("sie-docling-*")) == before
