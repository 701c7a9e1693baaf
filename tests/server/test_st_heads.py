"""sentence-transformers heads (Dense, Normalize) after pooling, on a real server with tiny models.

What a user of LaBSE or EmbeddingGemma relies on: the vector is the pooled hidden state put through
every Dense layer modules.json lists (weights, bias, activation) and then normalised, so it equals
what sentence-transformers computes; Matryoshka cuts apply to the projected vector; and a folder
whose Dense modules do not match the config is refused with the reason, not served wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import write_config
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.tiny_architectures import Spec, build

LABSE, GEMMA, MISMATCH = "test/tiny-labse", "test/tiny-embeddinggemma", "test/dense-mismatch"
QUERY, DOC = "task: search result | query: ", "title: none | text: "
TEXTS = ["hello", "the invoice total is due at the cafeteria", "acme corp sent a long payment text to the server"]


def config(model_id: str, folder: Path, model_type: str, pooling: str, heads: list[int]) -> dict[str, Any]:
    runtime: dict[str, Any] = {"pooling": pooling, "dense_heads": heads}
    if model_type == "gemma3_text":
        runtime |= {"query_prefix": QUERY, "doc_prefix": DOC}
    return {
        "id": model_id,
        "source": {"path": str(folder)},
        "adapter": "embedding",
        "architecture": {"model_type": model_type, "hidden_size": 32},
        "tasks": {"encode": {"dense": {"dim": heads[-1], "matryoshka_dims": [8]}}, "score": {"mode": "bi_encoder"}},
        "max_sequence_length": 128,
        "runtime": runtime,
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 4096}},
    }


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {
        LABSE: build(Spec("embedding", "bert", 32, 128, dense_heads=(16,)), tmp_path_factory.mktemp("labse")),
        GEMMA: build(Spec("embedding", "gemma3_text", 32, 128, dense_heads=(64, 32)), tmp_path_factory.mktemp("eg")),
    }


@pytest.fixture(scope="module")
def server(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("st-heads-catalog")
    write_config(catalog, config(LABSE, folders[LABSE], "bert", "cls", [16]))
    write_config(catalog, config(GEMMA, folders[GEMMA], "gemma3_text", "mean", [64, 32]))
    write_config(catalog, config(MISMATCH, folders[LABSE], "bert", "cls", [24]))
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


def reference(folder: Path, pooling: str) -> Callable[[str], np.ndarray]:
    """The tiny model in this process, alone (no padding): pool, then each Dense folder's own
    ``tanh(W x + b)`` read straight from its files (the builder writes tanh), then L2 normalise."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    modules = json.loads((folder / "modules.json").read_text())
    layers = [load_file(str(folder / m["path"] / "model.safetensors")) for m in modules if m["type"].endswith("Dense")]

    def vector(text: str) -> np.ndarray:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.inference_mode():
            hidden = model(input_ids=ids).last_hidden_state[0]
            x = hidden[0] if pooling == "cls" else hidden.mean(dim=0)
            for state in layers:
                x = torch.tanh(state["linear.weight"] @ x + state["linear.bias"])
            out: np.ndarray = torch.nn.functional.normalize(x, dim=-1).numpy()
        return out

    return vector


def encode(url: str, model: str, texts: list[str], **params: Any) -> list[np.ndarray]:
    body = {"items": [{"text": t} for t in texts], "params": params}
    r = httpx.post(f"{url}/v1/encode/{model}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return [np.asarray(item["dense"]["values"], dtype=np.float32) for item in r.json()["items"]]


def test_labse_style_cls_then_dense_tanh_then_normalize(server: ServerProcess, folders: dict[str, Path]) -> None:
    expected = reference(folders[LABSE], "cls")
    vectors = encode(server.url, LABSE, TEXTS)
    for text, got in zip(TEXTS, vectors, strict=True):
        assert got.shape == (16,)  # the Dense layer's out_features, not the hidden size
        np.testing.assert_allclose(got, expected(text), atol=1e-5)


def test_embeddinggemma_style_two_dense_layers_and_the_role_prompts(
    server: ServerProcess, folders: dict[str, Path]
) -> None:
    expected = reference(folders[GEMMA], "mean")
    docs = encode(server.url, GEMMA, TEXTS)
    queries = encode(server.url, GEMMA, TEXTS, options={"is_query": True})
    for text, doc, query in zip(TEXTS, docs, queries, strict=True):
        assert doc.shape == (32,)
        np.testing.assert_allclose(doc, expected(DOC + text), atol=1e-5)
        np.testing.assert_allclose(query, expected(QUERY + text), atol=1e-5)


def test_matryoshka_cut_is_taken_from_the_projected_vector(server: ServerProcess, folders: dict[str, Path]) -> None:
    [full] = encode(server.url, GEMMA, [TEXTS[1]])
    [cut] = encode(server.url, GEMMA, [TEXTS[1]], dims=8)
    np.testing.assert_allclose(cut, full[:8] / np.linalg.norm(full[:8]), atol=1e-5)


def test_dense_modules_that_differ_from_the_config_fail_the_load_with_the_reason(server: ServerProcess) -> None:
    r = httpx.post(f"{server.url}/v1/encode/{MISMATCH}", json={"items": [{"text": "hello"}]}, timeout=120)
    assert r.status_code == 502, r.text
    assert r.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED"
    assert "[16]" in r.json()["detail"]["message"] and "[24]" in r.json()["detail"]["message"]
