"""Decoder embedders (adapter decoder_embedding) on a real server with a tiny random Qwen3.

What a user of Qwen3-Embedding / gte-Qwen2 / e5-mistral relies on: the vector is the normalised
hidden state of the text's last token, the appended EOS; a query is wrapped in the instruction
template (the model's default instruction, or the request's); a document is not; and a text's
vector does not depend on the other texts of its batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import write_config
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.tiny_architectures import Spec, build

EOS = "<|endoftext|>"
TEMPLATE = "Instruct: {instruction}\nQuery:{text}"
DEFAULT = "find the invoice"
MODEL, BROKEN = "test/tiny-qwen3-embedding", "test/eos-missing"
TEXTS = ["hello", "the invoice total is due at the cafeteria", "acme corp sent a long payment text to the server"]


def config(model_id: str, folder: Path, append_token: str) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(folder)},
        "adapter": "decoder_embedding",
        "architecture": {"model_type": "qwen3", "hidden_size": 32},
        "tasks": {"encode": {"dense": {"dim": 32}}, "score": {"mode": "bi_encoder"}},
        "max_sequence_length": 128,
        "runtime": {
            "pooling": "last_token",
            "append_token": append_token,
            "instruction_template": TEMPLATE,
            "default_instruction": DEFAULT,
        },
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 4096}},
    }


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(Spec("decoder_embedding", "qwen3", 32, 128, extra_tokens=(EOS,)), tmp_path_factory.mktemp("q3e"))


@pytest.fixture(scope="module")
def server(weights: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("decoder-embedding-catalog")
    write_config(catalog, config(MODEL, weights, EOS))
    write_config(catalog, config(BROKEN, weights, "<|not-in-vocab|>"))
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


@pytest.fixture(scope="module")
def reference(weights: Path) -> Any:
    """The tiny model in this process: the normalised last hidden state of ``text`` + EOS, alone (no padding)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(weights))
    model = AutoModel.from_pretrained(str(weights)).eval()
    eos = tokenizer.convert_tokens_to_ids(EOS)

    def vector(text: str) -> np.ndarray:
        ids = [*tokenizer(text)["input_ids"], eos]
        with torch.inference_mode():
            hidden = model(input_ids=torch.tensor([ids])).last_hidden_state[0, -1]
        out: np.ndarray = torch.nn.functional.normalize(hidden, dim=-1).numpy()
        return out

    return vector


def encode(url: str, texts: list[str], **params: Any) -> list[np.ndarray]:
    body = {"items": [{"text": t} for t in texts], "params": params}
    r = httpx.post(f"{url}/v1/encode/{MODEL}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return [np.asarray(item["dense"]["values"], dtype=np.float32) for item in r.json()["items"]]


def test_a_document_is_the_last_token_state_of_the_text_and_eos(server: ServerProcess, reference: Any) -> None:
    vectors = encode(server.url, TEXTS)  # one batch, rows of different lengths
    for text, vector in zip(TEXTS, vectors, strict=True):
        assert vector.shape == (32,)
        np.testing.assert_allclose(vector, reference(text), atol=1e-5)


def test_a_batch_gives_each_text_the_vector_it_gets_alone(server: ServerProcess) -> None:
    together = encode(server.url, TEXTS)
    for text, vector in zip(TEXTS, together, strict=True):
        np.testing.assert_allclose(encode(server.url, [text])[0], vector, atol=1e-5)


def test_a_query_gets_the_default_instruction_and_a_document_none(server: ServerProcess, reference: Any) -> None:
    text = TEXTS[1]
    [query] = encode(server.url, [text], options={"is_query": True})
    np.testing.assert_allclose(query, reference(TEMPLATE.format(instruction=DEFAULT, text=text)), atol=1e-5)
    [document] = encode(server.url, [text])
    assert float(np.dot(query, document)) < 0.9999  # the roles are encoded differently


def test_the_request_instruction_replaces_the_default(server: ServerProcess, reference: Any) -> None:
    text, instruction = TEXTS[2], "match the payment"
    [query] = encode(server.url, [text], instruction=instruction, options={"is_query": True})
    np.testing.assert_allclose(query, reference(TEMPLATE.format(instruction=instruction, text=text)), atol=1e-5)


def test_bi_encoder_score_is_the_cosine_of_query_and_document(server: ServerProcess, reference: Any) -> None:
    body = {"query": {"text": "invoice total"}, "items": [{"id": "a", "text": TEXTS[1]}, {"id": "b", "text": TEXTS[0]}]}
    r = httpx.post(f"{server.url}/v1/score/{MODEL}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    query = reference(TEMPLATE.format(instruction=DEFAULT, text="invoice total"))
    for entry in r.json()["scores"]:
        document = reference(TEXTS[1] if entry["item_id"] == "a" else TEXTS[0])
        assert abs(entry["score"] - float(np.dot(query, document))) < 1e-4


def test_an_append_token_the_tokenizer_lacks_is_model_load_failed(server: ServerProcess) -> None:
    r = httpx.post(f"{server.url}/v1/encode/{BROKEN}", json={"items": [{"text": "hello"}]}, timeout=120)
    assert r.status_code == 502, r.text
    assert r.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED"
    assert "<|not-in-vocab|>" in r.json()["detail"]["message"]


def test_chunking_keeps_the_eos_at_the_end_of_every_window(server: ServerProcess, weights: Path) -> None:
    from sie_server.adapters.encoders.decoder_embedding import DecoderEmbeddingAdapter
    from sie_server.catalog.schema import ModelConfig
    from sie_server.engine.long_inputs import windows

    [plain] = encode(server.url, [TEXTS[1]])
    [chunked] = encode(server.url, [TEXTS[1]], truncation="chunk")  # fits: one window, the same vector
    np.testing.assert_allclose(chunked, plain, atol=1e-5)
    model = ModelConfig.model_validate(config(MODEL, weights, EOS))
    adapter = DecoderEmbeddingAdapter(model, model.profile("cpu"), "cpu")
    adapter.load(weights)
    try:
        eos = adapter.tokenizer.token_to_id(EOS)
        [long] = adapter.long_tokens([TEXTS[2] * 12], is_query=True, instruction=None)
        parts = windows(long, adapter.max_length)
        assert len(parts) > 1 and all(p.input_ids[-1] == eos and p.length <= adapter.max_length for p in parts)
    finally:
        adapter.unload()
