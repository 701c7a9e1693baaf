"""Docling pages per second: documents through the server vs bare docling in-process, side by side.

    .venv/bin/python -m benchmarks.docling_parse [--threads 2] [--documents 8] [--pages 5] [--rounds 3]

The documents: ``--documents`` PDFs of ``--pages`` pages each, every page 40 lines of Helvetica text
(a text layer; written by hand, tests/helpers/document_files.pdf_bytes), the same in both set-ups.
Bare: docling's ``DocumentConverter`` with the server's own options (the model-free native PDF
pipeline, ``adapters/documents/docling.build_converter``) converting each document and exporting its
markdown, one after another. Server: ``sie-server`` on 127.0.0.1 with ``docling-project/docling``, one
client sending one document a request. The two take turns for ``--rounds`` rounds; printed: the
median of the per-round ratios server / bare.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import cpu_flags_line, machine_line
from sie_sdk import SIEClient
from tests.helpers.catalog import DOCLING, copy_real
from tests.helpers.document_files import pdf_bytes
from tests.helpers.server import ServerProcess

RAW = argparse.RawDescriptionHelpFormatter


def document(index: int, pages: int) -> bytes:
    def page(p: int) -> bytes:
        lines = [
            b"BT /F1 11 Tf 72 %d Td (Document %d page %d line %d: the invoice total is due by the end of March.) Tj ET"
            % (740 - 16 * k, index, p, k)
            for k in range(40)
        ]
        return b"\n".join(lines)

    return pdf_bytes([page(p) for p in range(pages)])


def run_bare(converter: Any, documents: list[bytes], pages: int) -> float:
    from docling.datamodel.base_models import DocumentStream

    started = time.perf_counter()
    for k, data in enumerate(documents):
        result = converter.convert(DocumentStream(name=f"d{k}.pdf", stream=io.BytesIO(data)))
        if len(result.document.export_to_markdown()) < 100:
            raise RuntimeError("docling read no text")
    return len(documents) * pages / (time.perf_counter() - started)


def run_server(url: str, documents: list[bytes], pages: int) -> float:
    started = time.perf_counter()
    with SIEClient(url, timeout=600) as client:
        for data in documents:
            result = client.extract(DOCLING, {"document": {"data": data, "format": "pdf"}})
            if "error" in result or len(result["data"]["markdown"]) < 100:
                raise RuntimeError(f"bad answer: {result.get('error')}")
    return len(documents) * pages / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--pages", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print(cpu_flags_line())
    import torch

    from sie_server.adapters.documents.docling import build_converter

    torch.set_num_threads(args.threads)
    documents = [document(k, args.pages) for k in range(args.documents)]
    converter = build_converter()
    run_bare(converter, documents[:1], args.pages)  # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "catalog").mkdir()
        copy_real(root / "catalog", DOCLING)
        server = ServerProcess(root / "catalog", "--offline", "--threads", str(args.threads), "--preload", DOCLING,
                               env={"HOME": str(root / "home")}, log=root / "server.log")  # fmt: skip
        server.wait_ready()
        try:
            run_server(server.url, documents[:1], args.pages)  # warm-up
            rows = []
            for round_ in range(args.rounds):
                bare = run_bare(converter, documents, args.pages)
                served = run_server(server.url, documents, args.pages)
                rows.append(served / bare)
                print(f"round {round_ + 1}: bare docling {bare:.1f} pages/s, server {served:.1f} pages/s", flush=True)
        finally:
            server.stop()
    print(f"\nmedian server / bare docling: {statistics.median(rows):.2f}x")


if __name__ == "__main__":
    main()
