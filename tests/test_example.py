"""The README's pipeline script runs offline: what works prints results, what needs a download says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.catalog import REPO


def test_invoice_pipeline_offline(base_url: str) -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / "invoice_pipeline.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SIE_URL": base_url},
    )
    assert "Traceback" not in run.stderr
    assert run.returncode == 1
    encode_line = next(line for line in run.stdout.splitlines() if line.startswith("1. encode"))
    assert "('invoice', 0.69" in encode_line
    assert "best    : Invoice INV-2024-0117" in run.stdout
    # the reranker's weights are not here offline: the message says how to get them
    assert "hf download cross-encoder/ms-marco-MiniLM-L6-v2 --revision" in run.stderr
    assert "extract with urchade/gliner_multi-v2.1" in run.stderr
    answer = next(line for line in run.stdout.splitlines() if line.startswith("4. generate:"))
    assert "skipped" not in answer and len(answer) > len("4. generate: ")


@pytest.mark.parametrize(
    ("sample", "parser"),
    [("invoice_scan.png", "RapidAI/PP-OCRv6"), ("invoice_scan.pdf", "docling-project/docling")],  # docling: OCR inside
)
def test_invoice_pipeline_starts_from_a_scanned_invoice(
    base_url: str, tmp_path: Path, sample: str, parser: str
) -> None:
    made = subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_invoice_samples.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / "invoice_pipeline.py"), "--from", str(tmp_path / sample)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SIE_URL": base_url},
    )
    assert "Traceback" not in run.stderr, run.stderr
    parsed = next(line for line in run.stdout.splitlines() if line.startswith(f"0. parse   : {parser} read 5 lines"))
    assert parsed.endswith(
        "ACME CORP | Invoice INV-2024-0117 | 12 hours of consulting | Total due 4,250.00 EUR | Due by 31 March 2024"
    )
    # the parsed page is the passage the question finds first
    assert "best    : ACME CORP Invoice INV-2024-0117 12 hours of consulting Total due 4,250.00 EUR" in run.stdout
