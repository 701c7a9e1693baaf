"""LLM rerankers (adapter llm_reranker) on a real server with a tiny random Qwen3 causal LM.

What a user of Qwen3-Reranker / bge-reranker-v2-gemma relies on: ``score`` returns, for each
document, P(yes) from the yes/no logits after the model's prompt (or the yes logit through the
activation), ranks by it, and a pair scores the same whatever it is batched with.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from sie_server.adapters.runtime.options import ScoreOptions
from tests.helpers.catalog import write_config
from tests.helpers.server import ServerProcess, offline_server
from tests.helpers.tiny_architectures import Spec, build

TEMPLATE = (
    "<|im_start|>system\njudge the document<|im_end|>\n<|im_start|>user\n<Instruct>: {instruction}\n"
    "<Query>: {query}\n<Document>: {document}<|im_end|>\n<|im_start|>assistant\n"
)
DEFAULT = "find the invoice"
QWEN_STYLE, YES_ONLY, BAD_TOKEN = "test/tiny-qwen3-reranker", "test/tiny-yes-logit", "test/two-token-yes"
QUERY = "invoice total"
DOCS = [
    "hello",
    "the invoice total is due at the cafeteria",
    "acme corp sent a long payment text to the server about lunch and the total",
    "a short test",
]


def config(model_id: str, folder: Path, **runtime: Any) -> dict[str, Any]:
    return {
        "id": model_id,
        "source": {"path": str(folder)},
        "adapter": "llm_reranker",
        "architecture": {"model_type": "qwen3", "hidden_size": 32},
        "tasks": {"score": {"mode": "cross_encoder"}},
        "max_sequence_length": 256,
        "runtime": {"prompt_template": TEMPLATE, "default_instruction": DEFAULT, **runtime},
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 8192}},
    }


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(Spec("llm_reranker", "qwen3", 32, 256, extra_tokens=("no", "yes")), tmp_path_factory.mktemp("q3r"))


@pytest.fixture(scope="module")
def server(weights: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("llm-reranker-catalog")
    write_config(catalog, config(QWEN_STYLE, weights, yes_token="yes", no_token="no"))
    write_config(catalog, config(YES_ONLY, weights, yes_token="yes", activation="sigmoid"))
    write_config(catalog, config(BAD_TOKEN, weights, yes_token="acme corp", no_token="no"))
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


@pytest.fixture(scope="module")
def logits(weights: Path) -> Any:
    """The tiny model in this process, one prompt alone: the (no, yes) logits after it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(weights))
    model = AutoModelForCausalLM.from_pretrained(str(weights)).eval()
    no, yes = tokenizer.convert_tokens_to_ids("no"), tokenizer.convert_tokens_to_ids("yes")

    def of(query: str, document: str, instruction: str = DEFAULT) -> tuple[float, float]:
        prompt = TEMPLATE.format(instruction=instruction, query=query, document=document)
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            last = model(input_ids=torch.tensor([ids])).logits[0, -1]
        return float(last[no]), float(last[yes])

    return of


def score(url: str, model: str, query: str, docs: list[str]) -> list[tuple[str, float]]:
    body = {"query": {"text": query}, "items": [{"id": str(i), "text": d} for i, d in enumerate(docs)]}
    r = httpx.post(f"{url}/v1/score/{model}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return [(s["item_id"], s["score"]) for s in r.json()["scores"]]


def p_yes(no: float, yes: float) -> float:
    return float(np.exp(yes) / (np.exp(no) + np.exp(yes)))


def test_the_score_is_p_yes_from_the_prompt_and_ranks_the_documents(server: ServerProcess, logits: Any) -> None:
    ranked = score(server.url, QWEN_STYLE, QUERY, DOCS)
    expected = {str(i): p_yes(*logits(QUERY, d)) for i, d in enumerate(DOCS)}
    assert len(ranked) == len(DOCS)
    for item_id, value in ranked:
        assert abs(value - expected[item_id]) < 1e-5, (item_id, value, expected[item_id])
    assert [item_id for item_id, _ in ranked] == sorted(expected, key=lambda k: -expected[k])


def test_the_requests_instruction_replaces_the_default_in_the_prompt(server: ServerProcess, logits: Any) -> None:
    instruction = "judge whether the text is about lunch"
    body = {"query": {"text": QUERY}, "items": [{"text": d} for d in DOCS], "instruction": instruction}
    r = httpx.post(f"{server.url}/v1/score/{QWEN_STYLE}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    got = {s["item_id"]: s["score"] for s in r.json()["scores"]}
    for i, doc in enumerate(DOCS):
        wanted, default = p_yes(*logits(QUERY, doc, instruction)), p_yes(*logits(QUERY, doc))
        assert abs(got[f"item-{i}"] - wanted) < 1e-5 and abs(wanted - default) > 1e-6, (i, got, wanted, default)


def test_pairs_score_the_same_alone_as_in_a_padded_batch(server: ServerProcess) -> None:
    together = dict(score(server.url, QWEN_STYLE, QUERY, DOCS))
    for i, doc in enumerate(DOCS):
        [(_, alone)] = score(server.url, QWEN_STYLE, QUERY, [doc])
        assert abs(alone - together[str(i)]) < 1e-5


def test_without_a_no_token_the_score_is_the_yes_logit_through_the_activation(
    server: ServerProcess, logits: Any
) -> None:
    for item_id, value in score(server.url, YES_ONLY, QUERY, DOCS):
        _, yes = logits(QUERY, DOCS[int(item_id)])
        assert abs(value - 1 / (1 + np.exp(-yes))) < 1e-5


def test_a_yes_word_of_two_tokens_is_model_load_failed(server: ServerProcess) -> None:
    body = {"query": {"text": QUERY}, "items": [{"text": "hello"}]}
    r = httpx.post(f"{server.url}/v1/score/{BAD_TOKEN}", json=body, timeout=120)
    assert r.status_code == 502, r.text
    assert r.headers["x-sie-error-code"] == "MODEL_LOAD_FAILED"
    assert "'acme corp' is 2 tokens" in r.json()["detail"]["message"]


def load_reranker(weights: Path, max_length: int) -> Any:
    from sie_server.adapters.scorers.llm_reranker import LlmRerankerAdapter
    from sie_server.catalog.schema import ModelConfig

    settings = {**config(QWEN_STYLE, weights, no_token="no"), "max_sequence_length": max_length}
    model = ModelConfig.model_validate(settings)
    adapter = LlmRerankerAdapter(model, model.profile("cpu"), "cpu")
    adapter.load(weights)
    return adapter


def test_a_long_document_loses_its_tail_and_the_prompt_keeps_its_end(weights: Path) -> None:
    probe = load_reranker(weights, 256)
    [empty] = probe.tokenize_pairs(QUERY, [""])  # the template and the query, no document
    probe.unload()
    limit = empty.length + 8
    adapter = load_reranker(weights, limit)
    try:
        [short] = adapter.tokenize_pairs(QUERY, ["hello"])
        [long] = adapter.tokenize_pairs(QUERY, ["the invoice total " * 40])
        assert not short.truncated and long.truncated
        assert long.length == limit
        tail = 12  # the template's end, after the document: kept whole
        assert long.input_ids[-tail:] == empty.input_ids[-tail:]
        assert long.input_ids[:20] == empty.input_ids[:20]  # system prompt, instruction and query kept
        assert adapter.run([long], ScoreOptions())[0] > 0.0
    finally:
        adapter.unload()
