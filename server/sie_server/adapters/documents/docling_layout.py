"""Docling's standard PDF pipeline: a layout model names each page's regions, TableFormer reads the tables.

PDFs go through docling's ``StandardPdfPipeline``: each page is rendered at 72 dpi, the layout model
(an RT-DETR detector, the config's weights: docling-project/docling-layout-heron) finds its titles,
section headers, paragraphs, list items, captions, footnotes, formulas, code, tables, pictures and page
headers and footers, the PDF's text cells are assigned to those regions and put in reading order, and
with ``tasks.extract.table_structure`` TableFormer (docling-project/docling-models at a pinned commit)
reads each table's rows, columns and cells. Page headers and footers are furniture, as in docling's
markdown. OCR is not docling's here: pages without a text layer are listed in ``scanned`` and read by
the config's ``ocr_model`` on the shared queue, as for the model-free parser. DOCX, PPTX, XLSX, HTML
and Markdown go through the same model-free pipelines as ``docling.py``. Blocks are labelled ``heading``
(title, section header), ``paragraph``, ``list_item``, ``table_cell``, or docling's own label
(``caption``, ``footnote``, ``formula``, ``code``, ...); boxes are in PDF points, as there.

What it needs beyond the ``documents`` extra: docling builds every table engine it knows when it
builds this pipeline, and its TableFormer v2 module imports torchvision, so torchvision must import
beside the installed torch (PyPI's torchvision wheels are CUDA builds; on a CPU machine, PyTorch's own
CPU wheels); tables also need ``docling-ibm-models``. Loading checks both and fails naming what is
missing, before any weights are read.
"""

from __future__ import annotations

import importlib
import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from sie_server.adapters.documents.docling import DOCUMENT_TIMEOUT_S, DoclingAdapter, build_converter
from sie_server.adapters.documents.parser import Document, document_tokens
from sie_server.adapters.runtime.options import DocumentOptions
from sie_server.errors import ModelLoadFailed

#: TableFormer's weights: docling 2.143 asks for this repository's tag v2.3.0, which is this commit
TABLEFORMER_REPO = "docling-project/docling-models"
TABLEFORMER_REVISION = "fc0f2d45e2218ea24bce5045f58a389aed16dc23"
TABLEFORMER_FILES = ["model_artifacts/tableformer/accurate/*"]
#: the folder names docling looks for under its artifacts path (a repository id with / as --)
LAYOUT_FOLDER = "sie--layout"
TABLEFORMER_FOLDER = "docling-project--docling-models"
#: the module through which docling's pipeline imports torchvision even with tables off
TABLE_ENGINES_MODULE = "docling.models.stages.table_structure.table_structure_model_v2"


class DoclingLayoutAdapter(DoclingAdapter):
    pdf_lines = False  # a PDF's blocks are the layout model's regions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._artifacts: tempfile.TemporaryDirectory[str] | None = None
        self._bytes = 0

    @property
    def tables(self) -> bool:
        extract = self.config.tasks.extract
        return bool(extract and extract.table_structure)

    def load(self, weights: Path) -> None:
        """The layout model from ``weights`` (a folder with config.json, preprocessor_config.json and
        model.safetensors), TableFormer from the hub or its cache when tables are on, and the PDF
        pipeline built now, so that a load fails here and not at the first PDF."""
        from docling.datamodel.base_models import InputFormat

        missing = missing_requirements(self.tables)
        if missing:
            raise ModelLoadFailed(
                f"model {self.config.id}: docling's layout pipeline needs {' and '.join(missing)}. Install a "
                "torchvision built for the installed torch (on CPU, from PyTorch's CPU wheels: PyPI's are CUDA "
                "builds) and docling-ibm-models, or use docling-project/docling, which needs neither"
            )
        tableformer = tableformer_folder(self.config.id) if self.tables else None
        # docling finds each model as <artifacts>/<repo id with / as -->: links to where they are
        artifacts = tempfile.TemporaryDirectory(prefix="sie-docling-")
        root = Path(artifacts.name)
        (root / LAYOUT_FOLDER).symlink_to(weights.resolve(), target_is_directory=True)
        size = weight_bytes(weights)
        if tableformer is not None:
            (root / TABLEFORMER_FOLDER).symlink_to(tableformer, target_is_directory=True)
            size += weight_bytes(tableformer / "model_artifacts" / "tableformer" / "accurate")
        try:
            self.converter = build_converter(self.pdf_option(root))
            self.converter.initialize_pipeline(InputFormat.PDF)
        except Exception as exc:  # docling and transformers raise many kinds for a folder they cannot read
            self.converter = None
            artifacts.cleanup()
            raise ModelLoadFailed(f"model {self.config.id}: the layout pipeline did not load: {exc}") from exc
        self._artifacts, self._bytes = artifacts, size

    def pdf_option(self, artifacts: Path) -> Any:
        """Docling's standard PDF pipeline over the layout model in ``artifacts``, on this adapter's device
        with the server's compute threads, offline, with no OCR, enrichment or picture model of its own."""
        import torch
        from docling.datamodel.accelerator_options import AcceleratorOptions
        from docling.datamodel.object_detection_engine_options import TransformersObjectDetectionEngineOptions
        from docling.datamodel.pipeline_options import LayoutObjectDetectionOptions, ThreadedPdfPipelineOptions
        from docling.datamodel.stage_model_specs import ObjectDetectionModelSpec
        from docling.document_converter import PdfFormatOption

        spec = ObjectDetectionModelSpec(name="layout", repo_id=LAYOUT_FOLDER.replace("--", "/"))
        engine = TransformersObjectDetectionEngineOptions()
        layout = LayoutObjectDetectionOptions(model_spec=spec, engine_options=engine)
        device = "cuda" if self.device.startswith("cuda") else "cpu"
        options = ThreadedPdfPipelineOptions(
            artifacts_path=artifacts,
            enable_remote_services=False,
            allow_external_plugins=False,
            document_timeout=DOCUMENT_TIMEOUT_S,
            do_ocr=False,  # scanned pages go to the config's OCR model on the shared queue
            do_table_structure=self.tables,
            layout_options=layout,
            # the transformers engine sets torch's threads to this: keep the server's (--threads)
            accelerator_options=AcceleratorOptions(device=device, num_threads=max(1, torch.get_num_threads())),
        )
        return PdfFormatOption(pipeline_options=options)

    def unload(self) -> None:
        super().unload()
        if self._artifacts is not None:
            self._artifacts.cleanup()
            self._artifacts = None
        self._bytes = 0

    def resident_bytes(self) -> int:
        return self._bytes  # float32 weights: in memory what they are on disk

    def warmup(self) -> None:
        super().warmup()
        self.run([document_tokens(Document(blank_pdf(), "pdf", pages=1))], DocumentOptions())


def missing_requirements(tables: bool) -> list[str]:
    """What the pipeline cannot be built without, as a user would install it."""
    missing = []
    try:
        importlib.import_module(TABLE_ENGINES_MODULE)
    except Exception as exc:  # ImportError, or a torchvision built for another torch raising on import
        missing.append(f"torchvision ({type(exc).__name__}: {exc})")
    if tables and importlib.util.find_spec("docling_ibm_models") is None:
        missing.append("docling-ibm-models (for tables)")
    return missing


def tableformer_folder(model_id: str) -> Path:
    """TableFormer's pinned snapshot: from the Hugging Face cache, or the hub unless HF_HUB_OFFLINE is set."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(TABLEFORMER_REPO, revision=TABLEFORMER_REVISION, allow_patterns=TABLEFORMER_FILES)
    except Exception as exc:  # the hub client raises many kinds; all mean "could not fetch"
        raise ModelLoadFailed(
            f"model {model_id}: TableFormer ({TABLEFORMER_REPO}@{TABLEFORMER_REVISION}) is not available: "
            f"{type(exc).__name__}: {exc}. Fetch it once with `hf download {TABLEFORMER_REPO} --revision "
            f"{TABLEFORMER_REVISION}` on a machine with network, or set tasks.extract.table_structure: false"
        ) from exc
    return Path(str(folder))


def weight_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.glob("*.safetensors"))


def blank_pdf() -> bytes:
    """A one-page Letter PDF with nothing on it: the layout model's first page at load, not a user's."""
    import io

    import pypdfium2

    pdf = pypdfium2.PdfDocument.new()
    pdf.new_page(612, 792)
    out = io.BytesIO()
    pdf.save(out)
    pdf.close()
    return out.getvalue()
