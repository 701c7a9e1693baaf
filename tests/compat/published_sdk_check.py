"""Run with the published `sie-sdk` 0.10.1 (Python 3.12) against a running server: prints one JSON report.

Usage: python published_sdk_check.py BASE_URL EMBED_MODEL RERANK_MODEL [OCR_MODEL PNG_PATH PDF_PATH]
"""

import json
import sys

import numpy as np

from sie_sdk import SIEClient
from sie_sdk.types import Item

base_url, embed_model, rerank_model = sys.argv[1:4]
media = sys.argv[4:7]
report = {}
with SIEClient(base_url, timeout_s=120) as client:
    one = client.encode(embed_model, Item(text="hello"))
    report["encode_single_shape"] = list(np.asarray(one["dense"]).shape)
    report["encode_single_dtype"] = str(np.asarray(one["dense"]).dtype)
    many = client.encode(embed_model, [Item(id="a", text="hello"), Item(id="b", text="world")], is_query=True)
    report["encode_list_ids"] = [r.get("id") for r in many]
    report["encode_list_norms"] = [round(float(np.linalg.norm(r["dense"])), 4) for r in many]
    report["encode_timing_keys"] = sorted(one.get("timing", {}))
    scored = client.score(
        rerank_model,
        Item(id="q", text="invoice total"),
        [Item(id="lunch", text="lunch is at noon"), Item(id="inv", text="the invoice total is 5 EUR")],
    )
    report["score_query_id"] = scored.get("query_id")
    report["score_ranks"] = [(s["item_id"], s["rank"]) for s in scored["scores"]]
    report["list_models"] = sorted(m["name"] for m in client.list_models())
    report["get_model_dims"] = client.get_model(embed_model).get("dims")
    try:
        client.encode("nobody/nothing", Item(text="x"))
        report["not_found"] = "no error"
    except Exception as exc:  # the published SDK's own exception type and code
        report["not_found"] = [
            type(exc).__name__,
            getattr(exc, "code", None),
            getattr(exc, "status_code", None),
        ]
    try:
        client.encode(embed_model, [])
        report["empty_items"] = "no error"
    except Exception as exc:
        report["empty_items"] = [
            type(exc).__name__,
            getattr(exc, "code", None),
            getattr(exc, "status_code", None),
        ]
    if media:  # extract from an image and a document, as the published SDK sends them
        ocr_model, png_path, pdf_path = media
        image = client.extract(ocr_model, Item(id="img", images=[png_path]))
        document = client.extract(ocr_model, Item(id="doc", document=pdf_path))
        for name, result in (("image", image), ("document", document)):
            report[f"{name}_id"] = result.get("id")
            report[f"{name}_lines"] = [e["text"] for e in result["entities"]]
            report[f"{name}_boxes"] = [e["bbox"] for e in result["entities"]]
            report[f"{name}_keys"] = sorted(k for k in result if k not in ("model", "request", "timing"))
        report["document_text"] = document["data"].get("text")
print(json.dumps(report))
