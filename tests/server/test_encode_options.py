"""Encode options every embedder user expects, on a real server: Matryoshka dims (native
``params.dims`` and OpenAI ``dimensions``), ``params.truncation`` (end, error, chunk) and late
chunking (``items[].spans``: one vector per character span from one pass over the text)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import WORDS

MRL = "test/mrl"  # dim 32, Matryoshka dims 16 and 8, a 16-token limit, a "passage: " document prefix
CLS = "test/mrl-cls"  # the same weights with cls pooling and no Matryoshka dims
LIMIT = 16
PREFIX = "passage: "


def mrl_config(model_id: str, path: Path, **runtime: Any) -> dict[str, Any]:
    config = tiny_embedder(model_id, path, max_len=LIMIT, **runtime)
    config["tasks"]["encode"]["dense"]["matryoshka_dims"] = [16, 8]
    return config


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("options-catalog")
    write_config(folder, mrl_config(MRL, tiny_models["embedder"], doc_prefix=PREFIX))
    write_config(folder, tiny_embedder(CLS, tiny_models["embedder"], max_len=LIMIT, pooling="cls"))
    return folder


@pytest.fixture(scope="module")
def url(catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc = ServerProcess(catalog, "--offline", "--threads", "1", "--cpu-precision", "fp32",
                         log=tmp_path_factory.mktemp("logs") / "server.log")  # fmt: skip
    proc.wait_ready()
    try:
        yield proc.url
    finally:
        proc.stop()


def encode(url: str, items: list[dict[str, Any]], model: str = MRL, **params: Any) -> httpx.Response:
    return httpx.post(f"{url}/v1/encode/{model}", json={"items": items, "params": params}, timeout=60)


def dense(url: str, texts: list[str], **params: Any) -> np.ndarray:
    r = encode(url, [{"text": t} for t in texts], **params)
    assert r.status_code == 200, r.text
    return np.array([item["dense"]["values"] for item in r.json()["items"]], np.float32)


def unit(v: np.ndarray) -> np.ndarray:
    out: np.ndarray = v / np.linalg.norm(v)
    return out


def refused(r: httpx.Response, *fragments: str) -> None:
    assert r.status_code == 400, r.text
    assert r.headers["x-sie-error-code"] == "INVALID_INPUT"
    body = r.json()
    message = body["error"]["message"] if "error" in body else body["detail"]["message"]
    for fragment in fragments:
        assert fragment in message, message


def words(n: int, offset: int = 0) -> list[str]:
    return [WORDS[(offset + k) % len(WORDS)] for k in range(n)]


# Matryoshka


@pytest.mark.parametrize("dims", [16, 8])
def test_native_dims_are_the_renormalised_prefix_of_the_full_vector(url: str, dims: int) -> None:
    texts = ["invoice total due", "lunch in the cafeteria"]
    full = dense(url, texts)
    r = encode(url, [{"text": t} for t in texts], dims=dims)
    assert r.status_code == 200, r.text
    for item, whole in zip(r.json()["items"], full, strict=True):
        assert item["dense"]["dims"] == dims
        cut = np.array(item["dense"]["values"], np.float32)
        assert cut.shape == (dims,)
        assert abs(np.linalg.norm(cut) - 1) < 1e-5
        np.testing.assert_allclose(cut, unit(whole[:dims]), atol=1e-5)


def test_openai_dimensions_match_native_dims(url: str) -> None:
    r = httpx.post(f"{url}/v1/embeddings", json={"model": MRL, "input": ["hello world"], "dimensions": 8}, timeout=60)
    assert r.status_code == 200, r.text
    vector = np.array(r.json()["data"][0]["embedding"], np.float32)
    assert vector.shape == (8,)
    np.testing.assert_allclose(vector, dense(url, ["hello world"], dims=8)[0], atol=1e-6)
    np.testing.assert_allclose(vector, unit(dense(url, ["hello world"])[0][:8]), atol=1e-5)


def test_a_dim_the_model_was_not_trained_for_names_the_allowed_ones(url: str) -> None:
    refused(encode(url, [{"text": "hello"}], dims=12), "params.dims 12", "[32, 16, 8]")
    r = httpx.post(f"{url}/v1/embeddings", json={"model": MRL, "input": "hello", "dimensions": 12}, timeout=60)
    refused(r, "dimensions 12", "[32, 16, 8]")
    refused(encode(url, [{"text": "hello"}], model=CLS, dims=16), "params.dims 16", "[32]")  # no Matryoshka dims
    assert dense(url, ["hello"], dims=32).shape == (1, 32)  # the full dim is always allowed


# truncation


def test_truncation_end_cuts_and_names_the_item(url: str) -> None:
    long = " ".join(words(3 * LIMIT))
    for params in ({}, {"truncation": "end"}):
        r = encode(url, [{"id": "long", "text": long}, {"id": "short", "text": "hello"}], **params)
        assert r.status_code == 200, r.text
        assert r.json()["truncated_items"] == ["long"]


def test_truncation_error_names_the_first_long_item_and_its_token_count(url: str) -> None:
    long = " ".join(words(3 * LIMIT))  # [CLS] passage : 48 words [SEP]
    items = [{"text": "hello"}, {"text": long}, {"text": long}]
    refused(encode(url, items, truncation="error"), "items[1]", f"{3 * LIMIT + 4} tokens", f"at most {LIMIT}")
    assert encode(url, [{"text": "hello"}], truncation="error").status_code == 200


def test_truncation_chunk_is_the_normalised_mean_of_the_windows(url: str) -> None:
    text = words(3 * LIMIT)
    # a window holds LIMIT - 4 words ([CLS], "passage", ":" and [SEP] around them), windows overlap by 1/8
    width = LIMIT - 4
    step = width - width // 8
    starts = list(range(0, len(text) - width + step, step))
    windows = [" ".join(text[s : s + width]) for s in starts]
    assert len(windows) == 5
    r = encode(url, [{"id": "long", "text": " ".join(text)}, {"text": "hello"}], truncation="chunk")
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["truncated_items"] == []
    assert answer["usage"]["prompt_tokens"] == len(starts) * 4 + sum(len(w.split()) for w in windows) + 5
    chunked = np.array(answer["items"][0]["dense"]["values"], np.float32)
    expected = unit(dense(url, windows).mean(axis=0))
    np.testing.assert_allclose(chunked, expected, atol=1e-5)
    np.testing.assert_allclose(answer["items"][1]["dense"]["values"], dense(url, ["hello"])[0], atol=1e-5)
    # chunk and Matryoshka: the mean is cut like any dense vector
    cut = dense(url, [" ".join(text)], truncation="chunk", dims=8)[0]
    np.testing.assert_allclose(cut, unit(expected[:8]), atol=1e-5)


def test_chunk_is_for_dense_output_only(url: str) -> None:
    r = encode(url, [{"text": "hello"}], model=CLS, truncation="chunk", output_types=["dense", "sparse"])
    refused(r, "chunk", "dense")


# late chunking


def reference_spans(model_dir: Path, text: str, spans: list[tuple[int, int]]) -> np.ndarray:
    """Each span's vector computed here: the normalised mean of the token vectors that start in it,
    from one forward pass of the model over the prefixed text."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    batch = tokenizer(PREFIX + text, return_offsets_mapping=True, return_tensors="pt")
    offsets = batch.pop("offset_mapping")[0].tolist()
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state[0].numpy()
    vectors = []
    for start, end in spans:
        rows = [
            k
            for k, (a, b) in enumerate(offsets)
            if b > a and a >= len(PREFIX) and start <= a - len(PREFIX) < end  # not special, not the prefix
        ]
        vectors.append(unit(hidden[rows].mean(axis=0)))
    return np.stack(vectors)


def test_late_chunking_pools_each_span_from_one_pass(url: str, tiny_models: dict[str, Path]) -> None:
    first, second = "acme corp sent the invoice.", "payment is due"
    text = f"{first} {second}"
    spans = [(0, len(first)), (len(first) + 1, len(text)), (5, 9)]  # the last: "corp"
    r = encode(url, [{"id": "doc", "text": text, "spans": [list(s) for s in spans]}, {"text": "hello"}])
    assert r.status_code == 200, r.text
    item = r.json()["items"][0]
    assert [(c["start"], c["end"]) for c in item["chunks"]] == spans
    got = np.array([c["dense"]["values"] for c in item["chunks"]], np.float32)
    assert all(c["dense"]["dims"] == 32 for c in item["chunks"])
    np.testing.assert_allclose(got, reference_spans(tiny_models["embedder"], text, spans), atol=1e-5)
    # the item's own dense vector is the whole text's, as without spans; other items get no chunks
    np.testing.assert_allclose(item["dense"]["values"], dense(url, [text])[0], atol=1e-5)
    assert "chunks" not in r.json()["items"][1]
    # with Matryoshka dims each span vector is cut and renormalised
    r = encode(url, [{"text": text, "spans": [list(s) for s in spans]}], dims=8)
    cut = np.array([c["dense"]["values"] for c in r.json()["items"][0]["chunks"]], np.float32)
    np.testing.assert_allclose(cut, np.stack([unit(v[:8]) for v in got]), atol=1e-5)


def test_late_chunking_refusals_name_the_item_and_span(url: str) -> None:
    text = "acme corp sent the invoice"
    refused(encode(url, [{"text": text, "spans": [[0, 99]]}]), "items[0].spans[0]", f"<= {len(text)}")
    refused(encode(url, [{"text": text, "spans": [[4, 4]]}]), "items[0].spans[0]")
    # [4, 5) is the space after "acme": no token starts there
    refused(encode(url, [{"text": text, "spans": [[4, 5]]}]), "items[0].spans[0]", "no token")
    refused(encode(url, [{"text": text, "spans": [[0, 4]]}], model=CLS), "mean-pooling", "cls")
    long = " ".join(words(2 * LIMIT))
    refused(encode(url, [{"text": "hi"}, {"text": long, "spans": [[0, 4]]}]), "items[1]", f"at most {LIMIT}")
    r = encode(url, [{"text": text, "spans": [[0, 4]]}], output_types=["dense", "sparse"])
    refused(r, "items[0].spans", "dense")


def test_the_sdk_sends_dims_truncation_and_spans(url: str) -> None:
    from sie_sdk import SIEClient

    text = "acme corp sent the invoice"
    long = " ".join(words(3 * LIMIT))
    with SIEClient(url) as client:
        cut = client.encode(MRL, "hello world", dims=8)
        chunked = client.encode(MRL, long, truncation="chunk")
        spanned = client.encode(MRL, {"text": text, "spans": [(0, 4), (5, 9)]})
    np.testing.assert_allclose(cut["dense"], dense(url, ["hello world"], dims=8)[0], atol=1e-6)
    np.testing.assert_allclose(chunked["dense"], dense(url, [long], truncation="chunk")[0], atol=1e-6)
    assert [(c["start"], c["end"]) for c in spanned["chunks"]] == [(0, 4), (5, 9)]
    assert all(c["dense"].shape == (32,) for c in spanned["chunks"])
