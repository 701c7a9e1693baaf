"""The published `sie-sdk` 0.10.1 client works against this server unchanged (encode, score, models, errors).

It needs Python 3.12, so it runs from its own virtual environment, `.venv-compat`, which
`make test` creates; without that environment the test is skipped and says why.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.catalog import MINILM, OCR, REPO, SMOLLM
from tests.helpers.documents import INVOICE_LINES, png, scanned_pdf, text_image

COMPAT_PYTHON = REPO / ".venv-compat" / "bin" / "python"
SCRIPT = Path(__file__).with_name("published_sdk_check.py")


@pytest.mark.skipif(not COMPAT_PYTHON.exists(), reason="no .venv-compat with sie-sdk 0.10.1 (make test creates it)")
def test_published_sdk_0_10_1(base_url: str, tmp_path: Path) -> None:
    image, scan = tmp_path / "invoice.png", tmp_path / "scan.pdf"
    image.write_bytes(png(text_image(INVOICE_LINES)))
    scan.write_bytes(scanned_pdf([text_image(INVOICE_LINES, size=48)]))
    run = subprocess.run(
        [str(COMPAT_PYTHON), str(SCRIPT), base_url, MINILM, "test/tiny-reranker", OCR, str(image), str(scan)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["encode_single_shape"] == [384] and report["encode_single_dtype"] == "float32"
    assert report["encode_list_ids"] == ["a", "b"] and report["encode_list_norms"] == [1.0, 1.0]
    # the native timing (cache_hits: the result cache, issue 44; the published SDK passes the dict through)
    assert report["encode_timing_keys"] == ["cache_hits", "inference_ms", "queue_ms", "tokenization_ms", "total_ms"]
    assert report["score_query_id"] == "q"
    assert sorted(rank for _, rank in report["score_ranks"]) == [0, 1]
    assert MINILM in report["list_models"]
    assert report["get_model_dims"] == {"dense": 384}
    assert report["not_found"] == ["RequestError", "MODEL_NOT_FOUND", 404]
    assert report["empty_items"] == ["RequestError", "INVALID_INPUT", 400]
    # extract from an image and a scanned PDF: the same lines, with pixel boxes, every list present
    assert report["image_id"] == "img" and report["document_id"] == "doc"
    assert report["image_lines"] == report["document_lines"] == INVOICE_LINES
    assert report["document_text"] == "\n".join(INVOICE_LINES)
    for boxes in (report["image_boxes"], report["document_boxes"]):
        assert all(len(box) == 4 and all(isinstance(v, int) and v >= 0 for v in box) for box in boxes)
    for kind in ("image", "document"):
        assert report[f"{kind}_keys"] == ["classifications", "data", "entities", "id", "objects", "relations"]


GENERATE_SCRIPT = Path(__file__).with_name("published_generate_check.py")


@pytest.mark.skipif(not COMPAT_PYTHON.exists(), reason="no .venv-compat with sie-sdk 0.10.1 (make test creates it)")
def test_published_sdk_0_10_1_generates_and_chats(base_url: str) -> None:
    """Its generate, stream_generate, chat_completions and stream_chat_completions on the packaged SmolLM2."""
    run = subprocess.run(
        [str(COMPAT_PYTHON), str(GENERATE_SCRIPT), base_url, SMOLLM],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    plain, streamed = report["generate"], report["stream_generate"]
    assert plain["text"].strip() and plain["finish_reason"] in ("length", "stop")
    usage = plain["usage"]
    assert 1 <= usage["completion_tokens"] <= 6
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert streamed["text"] == plain["text"] and streamed["chunks"] >= 2  # greedy: the same words, in pieces
    assert streamed["last"] == {"done": True, "finish_reason": plain["finish_reason"], "usage": usage}
    assert streamed["done"] == 1  # only the last chunk says done
    assert report["generate_grammar"] in ("yes", "no")
    chat = report["chat"]
    assert chat["object"] == "chat.completion" and chat["role"] == "assistant" and chat["content"].strip()
    assert chat["usage"]["completion_tokens"] <= 8
    assert json.loads(report["chat_json"])["colour"] in ("red", "green", "blue")
    assert report["stream_chat"]["text"] == chat["content"] and report["stream_chat"]["objects"] == [
        "chat.completion.chunk"
    ]
    assert report["stream_chat"]["finish"] == [chat["finish_reason"]]
