"""A 20 MB PDF crosses JetStream (whose messages are 1 MiB by default) through the object store."""

from __future__ import annotations

from pathlib import Path

from sie_sdk import SIEClient
from tests.helpers.catalog import OCR
from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.documents import INVOICE_LINES, scanned_pdf, text_image, with_attachment
from tests.server.test_engine_server import metric


def test_a_20_mb_pdf_travels_by_reference_and_is_read(cluster_catalog: Path, tmp_path: Path) -> None:
    pdf = with_attachment(scanned_pdf([text_image(INVOICE_LINES, size=48)]), 20 * 2**20)
    assert len(pdf) > 20 * 2**20
    nats = Nats(tmp_path / "jetstream")  # nats-server's default max_payload: 1 MiB
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", env={"HOME": str(tmp_path / "home")})
    gateway = Gateway(cluster_catalog, nats.url, log=tmp_path / "gw.log")
    try:
        with running(w, gateway), SIEClient(gateway.url, timeout=300) as client:
            result = client.extract(OCR, {"id": "big", "document": {"data": pdf, "format": "pdf"}})
            assert "error" not in result, result
            assert [e["text"] for e in result["entities"]] == INVOICE_LINES
            assert result["data"]["pages"][0]["page"] == 1
            assert metric(gateway.url, "sie_gateway_payloads_by_reference_total", direction="request") == 1
    finally:
        nats.stop()
