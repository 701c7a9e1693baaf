"""SigLIP2 NaFlex (model_type siglip2) on the clip adapter, on a real server with a tiny random model.

NaFlex keeps an image's aspect ratio: the processor gives the tower a patch mask and the patch grid's
shape besides the pixels. The server's vectors must be the model's own for those inputs (whatever else
shares the batch), and texts are lowercased as SigLIP2 was trained.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image

from tests.helpers.catalog import write_config
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.tiny_architectures import Spec, build

MODEL, FIXRES, HIDDEN = "test/tiny-siglip2-naflex", "test/tiny-siglip2-fixres", 32


def png(size: tuple[int, int], color: tuple[int, int, int]) -> bytes:
    image = Image.new("RGB", size, color)
    image.paste((10, 10, 10), (0, 0, size[0] // 2, size[1] // 3))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


IMAGES = {
    "wide": png((96, 24), (220, 40, 40)),
    "tall": png((24, 96), (40, 40, 220)),
    "square": png((40, 40), (9, 99, 9)),
}


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(Spec("clip", "siglip2", HIDDEN, 64, projection=HIDDEN), tmp_path_factory.mktemp("siglip2"))


@pytest.fixture(scope="module")
def fixres(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A FixRes SigLIP2 stand-in (a SigLIP model) whose tokenizer is case-sensitive, as Gemma's is:
    lowercasing is then the adapter's job (runtime.lowercase)."""
    folder = build(Spec("clip", "siglip", HIDDEN, 64, projection=HIDDEN), tmp_path_factory.mktemp("siglip2-fixres"))
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["normalizer"]["lowercase"] = False
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    return folder


def config(model_id: str, model_type: str, folder: Path) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(folder)},
        "adapter": "clip",
        "architecture": {"model_type": model_type, "hidden_size": HIDDEN},
        "tasks": {"encode": {"dense": {"dim": HIDDEN}}, "score": {"mode": "bi_encoder"}},
        "max_sequence_length": 64,
        "runtime": {"normalize": True, "pad_to_max_length": True, "lowercase": True},
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 4096}},
    }


@pytest.fixture(scope="module")
def server(weights: Path, fixres: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("siglip2-catalog")
    write_config(catalog, config(MODEL, "siglip2", weights))
    write_config(catalog, config(FIXRES, "siglip", fixres))
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


def encode(server: ServerProcess, items: list[dict[str, Any]], model: str = MODEL) -> list[np.ndarray]:
    r = httpx.post(f"{server.url}/v1/encode/{model}", json={"items": items}, timeout=120)
    assert r.status_code == 200, r.text
    return [np.asarray(i["dense"]["values"], dtype=np.float32) for i in r.json()["items"]]


def image_item(data: bytes) -> dict[str, Any]:
    return {"images": [{"data": base64.b64encode(data).decode(), "format": "png"}]}


def test_image_vectors_are_the_models_own_with_mask_and_grid(server: ServerProcess, weights: Path) -> None:
    import torch
    from transformers import AutoImageProcessor, AutoModel

    model = AutoModel.from_pretrained(str(weights)).eval()
    processor = AutoImageProcessor.from_pretrained(str(weights))
    together = encode(server, [image_item(data) for data in IMAGES.values()])  # one batch, three shapes
    for vector, data in zip(together, IMAGES.values(), strict=True):
        with Image.open(io.BytesIO(data)) as picture:
            inputs = processor(images=picture.convert("RGB"), return_tensors="pt")
        assert set(inputs) >= {"pixel_attention_mask", "spatial_shapes"}
        with torch.inference_mode():
            features = model.get_image_features(**inputs)
        features = features if isinstance(features, torch.Tensor) else features.pooler_output
        expected = torch.nn.functional.normalize(features[0], dim=-1).numpy()
        np.testing.assert_allclose(vector, expected, atol=1e-5)
    wide, tall, _ = together
    assert not np.allclose(wide, tall, atol=1e-3)


def test_texts_are_lowercased_and_share_the_image_space(server: ServerProcess) -> None:
    texts = [{"text": "INVOICE Total"}, {"text": "invoice total"}, {"text": "cafeteria lunch"}]
    upper, lower, other = encode(server, texts, FIXRES)
    np.testing.assert_allclose(upper, lower, atol=1e-6)
    assert not np.allclose(lower, other, atol=1e-3)
    [picture] = encode(server, [image_item(IMAGES["square"])], FIXRES)
    assert upper.shape == picture.shape == (HIDDEN,)
    assert abs(float(np.linalg.norm(picture)) - 1) < 1e-5
