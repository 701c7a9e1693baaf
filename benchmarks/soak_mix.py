"""The soak's traffic (``benchmarks/soak.py``): its catalog, the request kinds and how each one is sent.

Six models in one server: the real MiniLM (encode, score), the packaged SmolLM2 (generate), a tiny random
GLiNER (extract), docling (a 2-page PDF: the invoice's text page and a scanned page that PP-OCRv6 reads),
PP-OCRv6 alone (a rendered PNG) and faster-whisper tiny.en (espeak-ng speaking a sentence; a tone when
espeak-ng is missing). The document, scan and speech payloads are built once, as
``benchmarks/memory_cycles.py`` builds them, and sent with the exact cache bypassed so each one reaches
its model.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.memory_cycles import FAMILIES
from tests.helpers.catalog import DOCLING, MINILM, OCR, SMOLLM, WHISPER_TINY, copy_real, tiny_gliner, write_config
from tests.helpers.tiny_models import build_bert_embedder, build_tiny_gliner

GLINER = "bench/tiny-gliner"
BYPASS = {"X-SIE-Cache": "bypass"}  # the same document, scan and speech every time: each must reach its model
HUNG_UP = 0  # the client hung up on purpose
DROPPED = -1  # the server dropped a connection it should have answered
ITEM_ERROR = 1  # a 200 whose items carried an error
WRONGLY_ACCEPTED = 1000  # + the status: a bad request that was not refused with a 4xx
BAD = (  # (route, body): each must be refused with a 4xx
    (f"/v1/encode/{MINILM}", b'{"items": [{"text": "\\ud800"}]}'),
    (f"/v1/encode/{MINILM}", b'{"items": [{"text": NaN}]}'),
    (f"/v1/encode/{MINILM}", b"{not json"),
    (f"/v1/encode/{MINILM}", b'{"items": []}'),
    (f"/v1/encode/{MINILM}", b'{"items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}'),
    ("/v1/encode/no/such-model", b'{"items": [{"text": "x"}]}'),
    (f"/v1/score/{MINILM}", b'{"query": {"text": "q"}}'),
    (f"/v1/generate/{SMOLLM}", b'{"prompt": "x", "seed": 1180591620717411303424}'),
    (f"/v1/generate/{SMOLLM}", b'{"prompt": "x", "temperature": 1e-300}'),
    (f"/v1/generate/{SMOLLM}", b'{"prompt": "x", "stop": [""]}'),
    (f"/v1/extract/{GLINER}", b'{"items": [{"text": "x"}]}'),
    (f"/v1/extract/{DOCLING}", b'{"items": [{"document": {"data": "%%%", "format": "pdf"}}]}'),
    (f"/v1/extract/{OCR}", b'{"items": [{"text": "read me"}]}'),
    (f"/v1/extract/{OCR}", b'{"items": [{"images": [{"data": "%%%", "format": "png"}]}]}'),
    (f"/v1/extract/{WHISPER_TINY}", b'{"items": [{"text": "x"}]}'),
)
KINDS = (  # (kind, weight)
    ("encode1", 25),
    ("encodeN", 15),
    ("score", 12),
    ("extract", 10),
    ("document", 3),
    ("scan", 4),
    ("speech", 4),
    ("generate", 5),
    ("stream", 5),
    ("disconnect", 8),
    ("bad", 20),
)
MEDIA = {"document": DOCLING, "scan": OCR, "speech": WHISPER_TINY}  # kind -> model (docling's scans go to OCR)
FAMILY_OF = {"document": "docling", "scan": "ppocr", "speech": "whisper"}


@dataclass(frozen=True)
class Payloads:
    texts: list[str]
    media: dict[str, dict[str, Any]]  # kind -> its request body, built once


def payloads(texts: list[str]) -> Payloads:
    return Payloads(texts, {kind: FAMILIES[family].body() for kind, family in FAMILY_OF.items()})


def build_catalog(root: Path, gliner: Path | None = None) -> Path:
    """The six models' catalog under ``root`` (a tiny GLiNER built there unless ``gliner`` is given)."""
    catalog, weights = root / "catalog", root / "weights"
    catalog.mkdir()
    copy_real(catalog, MINILM)
    copy_real(catalog, SMOLLM)
    if gliner is None:
        gliner = build_tiny_gliner(root / "gliner", build_bert_embedder(root / "bert"))
    write_config(catalog, tiny_gliner(GLINER, gliner))
    for family in FAMILY_OF.values():
        FAMILIES[family].write(catalog, weights)  # docling's writer adds PP-OCRv6; whisper's sets beam 1
    return catalog


def warm_up(url: str, load: Payloads) -> None:
    """One request to every model, so that the traffic starts with all of them loaded."""
    bodies: list[tuple[str, dict[str, Any]]] = [
        (f"/v1/encode/{MINILM}", {"items": [{"text": "warm"}]}),
        (f"/v1/generate/{SMOLLM}", {"prompt": "warm", "max_new_tokens": 2}),
        (f"/v1/extract/{GLINER}", {"items": [{"text": "warm"}], "params": {"labels": ["x"]}}),
        *((f"/v1/extract/{MEDIA[kind]}", body) for kind, body in load.media.items()),
    ]
    with httpx.Client(base_url=url, timeout=600.0, headers=BYPASS) as client:
        for route, body in bodies:
            client.post(route, json=body).raise_for_status()


def _answered(answer: httpx.Response) -> int:
    """The status of an extract, or ``ITEM_ERROR`` when a 200 carries an item's error."""
    if answer.status_code != 200:
        return answer.status_code
    return ITEM_ERROR if any("error" in item for item in answer.json().get("items", [])) else 200


def one_request(client: httpx.Client, kind: str, rng: random.Random, load: Payloads) -> int:
    """Sends one request of ``kind``; its status (``HUNG_UP`` when the client hung up on purpose)."""
    texts = load.texts
    if kind == "encode1":
        return client.post(f"/v1/encode/{MINILM}", json={"items": [{"text": rng.choice(texts)}]}).status_code
    if kind == "encodeN":
        items = [{"text": rng.choice(texts)} for _ in range(rng.randint(2, 64))]
        return client.post(f"/v1/encode/{MINILM}", json={"items": items}).status_code
    if kind == "score":
        docs = [{"text": rng.choice(texts)} for _ in range(rng.randint(1, 20))]
        return client.post(
            f"/v1/score/{MINILM}", json={"query": {"text": rng.choice(texts)}, "items": docs}
        ).status_code
    if kind == "extract":
        body = {"items": [{"text": rng.choice(texts)[:300]}], "params": {"labels": ["person", "place"]}}
        return _answered(client.post(f"/v1/extract/{GLINER}", json=body))
    if kind in MEDIA:
        return _answered(client.post(f"/v1/extract/{MEDIA[kind]}", json=load.media[kind], headers=BYPASS))
    prompt = {"prompt": rng.choice(texts)[:200], "max_new_tokens": 16}
    if kind == "generate":
        return client.post(f"/v1/generate/{SMOLLM}", json=prompt).status_code
    if kind == "stream":
        with client.stream("POST", f"/v1/generate/{SMOLLM}", json={**prompt, "stream": True}) as answer:
            for _ in answer.iter_bytes():
                pass
            return answer.status_code
    if kind == "disconnect":
        if rng.random() < 0.5:
            with client.stream("POST", f"/v1/generate/{SMOLLM}", json={**prompt, "stream": True}) as answer:
                if answer.status_code >= 500:
                    return answer.status_code
                next(answer.iter_bytes(), None)  # the first event, then hang up
            return HUNG_UP
        items = [{"text": rng.choice(texts)} for _ in range(32)]
        try:
            return client.post(f"/v1/encode/{MINILM}", json={"items": items}, timeout=0.05).status_code
        except httpx.TimeoutException:
            return HUNG_UP
    route, raw = rng.choice(BAD)
    status = client.post(route, content=raw, headers={"content-type": "application/json"}).status_code
    return status if 400 <= status < 500 else 599 if status >= 500 else WRONGLY_ACCEPTED + status


def is_error(status: int) -> bool:
    """A 5xx, a dropped connection, an item's error or a bad request accepted."""
    return status >= 500 or status < 0 or status == ITEM_ERROR
