"""describe_image end to end on a server of its own (offline): a tiny random Florence-2 captions (its
caption task passed in the extract options, as a caller would) while the tiny CLIP ranks tags, in one call;
the shipped Florence-2 config, never cached here, is named with the command that fetches it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.helpers.catalog import copy_real, tiny_clip, write_config
from tests.helpers.documents import png
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_florence2 import build_florence2
from tests.tasks.helpers import b64

FLORENCE, CLIP, SHIPPED = "test/tiny-florence2", "test/tiny-clip", "microsoft/Florence-2-base"
MODELS = {"caption": FLORENCE, "tags": CLIP}
LABELS = ["a red square", "a blue circle", "a cat", "an invoice"]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("describe-image")
    catalog = folder / "catalog"
    catalog.mkdir()
    florence = {
        "id": FLORENCE,
        "source": {"path": str(build_florence2(folder / "tiny-florence2"))},
        "adapter": "florence2",
        "architecture": {"model_type": "florence2", "hidden_size": 32},
        "tasks": {"extract": {"options": {"task": "<OCR_WITH_REGION>"}}},
        "max_sequence_length": 1024,
        "profiles": {"cpu": {"max_batch_tokens": 4096}, "cuda": {}},
    }
    write_config(catalog, florence)
    write_config(catalog, tiny_clip(CLIP, tiny_models["clip"]))
    copy_real(catalog, SHIPPED)  # not cached in the empty HF_HOME: offline it cannot load
    env = {"HF_HOME": str(folder / "empty-hf-home"), "HOME": str(folder / "home")}
    serving = ("--offline", "--threads", "1", "--cpu-precision", "fp32")
    proc = ServerProcess(catalog, *serving, env=env, log=folder / "s.log")
    proc.wait_ready()
    try:
        yield proc.url
    finally:
        proc.stop()


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    r = httpx.post(f"{url}{path}", json=body, timeout=300)
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()
    return found


def picture() -> bytes:
    image = Image.new("RGB", (64, 40), "white")
    image.paste((220, 20, 20), (8, 8, 40, 32))
    return png(image)


@pytest.mark.parametrize(("detail", "task"), [("brief", "<CAPTION>"), ("detailed", "<DETAILED_CAPTION>")])
def test_a_caption_and_tags_in_one_call(url: str, detail: str, task: str) -> None:
    image = picture()
    body = {"image": {"data": b64(image), "format": "png"}, "caption": detail, "labels": LABELS, "top_k": 2}
    found = post(url, "/v1/tasks/describe_image", {**body, "models": MODELS})
    assert found["models"] == MODELS and (found["width"], found["height"]) == (64, 40)
    assert found["source_bytes"] == len(image)
    # the caption is what the captioning model answers for that caption task through the extract primitive
    options = {"task": task, "max_new_tokens": 40 if detail == "brief" else 96}
    extract = {"items": [{"images": [{"data": b64(image), "format": "png"}]}], "params": {"options": options}}
    (item,) = post(url, f"/v1/extract/{FLORENCE}", extract)["items"]
    assert item["data"]["task"] == task and found["caption"] == item["data"]["caption"].strip()
    # and the tags are the labels nearest the image in the encoder's space
    tags = post(url, "/v1/tasks/describe_image", {**body, "caption": "none", "top_k": 4, "models": MODELS})["tags"]
    assert found["tags"] == tags[:2] and sorted(t["label"] for t in tags) == sorted(LABELS)


def test_the_default_captioning_model_that_cannot_load_is_named(url: str) -> None:
    r = httpx.post(f"{url}/v1/tasks/describe_image", json={"image": {"data": b64(picture())}}, timeout=120)
    assert r.status_code == 502 and r.json()["detail"]["code"] == "MODEL_LOAD_FAILED", r.text
    message = r.json()["detail"]["message"]
    assert SHIPPED in message and f"sie-server models pull {SHIPPED}" in message and "caption step" in message


def test_a_model_without_images_is_refused_for_the_caption(url: str) -> None:
    body = {"image": {"data": b64(picture())}, "models": {"caption": CLIP, "tags": CLIP}}
    r = httpx.post(f"{url}/v1/tasks/describe_image", json=body, timeout=120)
    assert r.status_code == 400 and r.json()["detail"]["code"] == "INVALID_INPUT", r.text
    assert CLIP in r.json()["detail"]["message"]
