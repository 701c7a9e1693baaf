"""Task LoRA adapters (jina-embeddings-v3) through remote code, on a real server.

The tiny model's folder carries its own modelling code (config.json ``auto_map``), as the hub repo
does, so the server loads it with ``trust_remote_code`` offline. Its forward takes ``adapter_mask``
(one adapter index per row) as jina v3's XLMRobertaLoRA does. What a user relies on: a query runs
with retrieval.query and the task's instruction, a document with retrieval.passage,
``params.options.task`` picks another adapter, and a task the model lacks is a 400 naming the ones
it has.
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
from tests.helpers.tiny_architectures import save_tokenizer, tokens

MODEL, PLAIN = "test/tiny-jina-v3", "test/tiny-plain"
TASKS = ["retrieval.query", "retrieval.passage", "separation", "classification", "text-matching"]
PREFIXES = {"retrieval.query": "represent the query: ", "retrieval.passage": "represent the document: "}
TEXTS = ["hello", "the invoice total is due at the cafeteria"]

CONFIGURATION = """
from transformers import PretrainedConfig


class TinyLoraConfig(PretrainedConfig):
    model_type = "tiny_lora"

    def __init__(self, vocab_size=64, hidden_size=16, lora_adaptations=None, max_position_embeddings=128, **kwargs):
        kwargs.setdefault("pad_token_id", 1)
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.lora_adaptations = list(lora_adaptations or [])
        self.max_position_embeddings = max_position_embeddings
"""

MODELING = '''
import torch
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from .configuration_tiny_lora import TinyLoraConfig


class TinyLoraModel(PreTrainedModel):
    """Embeddings, one tanh layer, and per task a learned shift of the hidden states (a stand-in for LoRA)."""

    config_class = TinyLoraConfig

    def __init__(self, config):
        super().__init__(config)
        self.embeddings = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.dense = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.lora = torch.nn.Parameter(torch.zeros(len(config.lora_adaptations), config.hidden_size))
        self.post_init()

    def _init_weights(self, module):
        pass

    def forward(self, input_ids, attention_mask=None, adapter_mask=None, **kwargs):
        hidden = self.embeddings(input_ids)
        if adapter_mask is not None:
            hidden = hidden + self.lora[adapter_mask.long()][:, None, :]
        return BaseModelOutput(last_hidden_state=torch.tanh(self.dense(hidden)))
'''


def build_remote_code_model(folder: Path) -> Path:
    """A tokenizer, the modelling code, and random weights saved through the code's own class."""
    import torch
    from transformers import AutoConfig, AutoModel

    folder.mkdir(parents=True, exist_ok=True)
    vocab = tokens("xlm-roberta")
    save_tokenizer(folder, vocab, "xlm-roberta")
    (folder / "configuration_tiny_lora.py").write_text(CONFIGURATION)
    (folder / "modeling_tiny_lora.py").write_text(MODELING)
    config = {
        "model_type": "tiny_lora",
        "vocab_size": len(vocab),
        "hidden_size": 16,
        "lora_adaptations": TASKS,
        "auto_map": {
            "AutoConfig": "configuration_tiny_lora.TinyLoraConfig",
            "AutoModel": "modeling_tiny_lora.TinyLoraModel",
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    torch.manual_seed(0)
    model = AutoModel.from_config(
        AutoConfig.from_pretrained(str(folder), trust_remote_code=True), trust_remote_code=True
    )
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(std=0.5)
    model.save_pretrained(folder)
    return folder


def config(model_id: str, folder: Path, lora: bool) -> dict[str, Any]:
    runtime: dict[str, Any] = {"pooling": "mean"}
    if lora:
        runtime |= {"lora_tasks": TASKS, "task_prefixes": PREFIXES}
        runtime |= {"query_lora_task": "retrieval.query", "doc_lora_task": "retrieval.passage"}
    return {
        "id": model_id,
        "source": {"path": str(folder)},
        "adapter": "embedding",
        "architecture": {"model_type": "tiny_lora", "hidden_size": 16, "trust_remote_code": True},
        "tasks": {"encode": {"dense": {"dim": 16}}, "score": {"mode": "bi_encoder"}},
        "max_sequence_length": 64,
        "runtime": runtime,
        # remote code brings its own attention: transformers' sdpa switch is refused for classes that do not declare it
        "profiles": {"cpu": {"dtype": "float32", "max_batch_tokens": 4096, "attn": "eager"}},
    }


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_remote_code_model(tmp_path_factory.mktemp("tiny-lora"))


@pytest.fixture(scope="module")
def server(weights: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    catalog = tmp_path_factory.mktemp("jina-catalog")
    write_config(catalog, config(MODEL, weights, lora=True))
    write_config(catalog, config(PLAIN, weights, lora=False))
    with offline_server(catalog, tmp_path_factory.mktemp("logs")) as proc:
        yield proc


@pytest.fixture(scope="module")
def reference(weights: Path) -> Callable[[str, str | None], np.ndarray]:
    """The remote-code model in this process, one text alone: mean of the hidden states with the task's
    adapter index as ``adapter_mask`` (None: no adapter), L2-normalised."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(weights))
    model = AutoModel.from_pretrained(str(weights), trust_remote_code=True).eval()

    def vector(text: str, task: str | None) -> np.ndarray:
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        mask = None if task is None else torch.tensor([TASKS.index(task)], dtype=torch.int32)
        with torch.inference_mode():
            hidden = model(input_ids=ids, adapter_mask=mask).last_hidden_state[0].mean(dim=0)
        out: np.ndarray = torch.nn.functional.normalize(hidden, dim=-1).numpy()
        return out

    return vector


def post(url: str, model: str, texts: list[str], **options: Any) -> httpx.Response:
    body = {"items": [{"text": t} for t in texts], "params": {"options": options}}
    return httpx.post(f"{url}/v1/encode/{model}", json=body, timeout=120)


def vectors(response: httpx.Response) -> list[np.ndarray]:
    assert response.status_code == 200, response.text
    return [np.asarray(item["dense"]["values"], dtype=np.float32) for item in response.json()["items"]]


def test_documents_and_queries_run_with_their_retrieval_adapters_and_instructions(
    server: ServerProcess, reference: Callable[[str, str | None], np.ndarray]
) -> None:
    docs = vectors(post(server.url, MODEL, TEXTS))
    queries = vectors(post(server.url, MODEL, TEXTS, is_query=True))
    for text, doc, query in zip(TEXTS, docs, queries, strict=True):
        expected_doc = reference(PREFIXES["retrieval.passage"] + text, "retrieval.passage")
        np.testing.assert_allclose(doc, expected_doc, atol=1e-5)
        np.testing.assert_allclose(query, reference(PREFIXES["retrieval.query"] + text, "retrieval.query"), atol=1e-5)
        assert not np.allclose(doc, query, atol=1e-3)


def test_a_requested_task_picks_its_adapter(
    server: ServerProcess, reference: Callable[[str, str | None], np.ndarray]
) -> None:
    for task in ("classification", "text-matching", "separation"):
        got = vectors(post(server.url, MODEL, TEXTS, task=task))
        for text, vector in zip(TEXTS, got, strict=True):
            np.testing.assert_allclose(vector, reference(text, task), atol=1e-5)  # these tasks have no instruction
    [passage_as_query] = vectors(post(server.url, MODEL, [TEXTS[1]], is_query=True, task="retrieval.passage"))
    expected = reference(PREFIXES["retrieval.passage"] + TEXTS[1], "retrieval.passage")
    np.testing.assert_allclose(passage_as_query, expected, atol=1e-5)


def test_an_unknown_task_is_a_400_naming_the_models_tasks(server: ServerProcess) -> None:
    r = post(server.url, MODEL, TEXTS, task="summarization")
    assert r.status_code == 400, r.text
    message = r.json()["detail"]["message"]
    assert "summarization" in message and all(task in message for task in TASKS)
    r = post(server.url, PLAIN, TEXTS, task="retrieval.query")
    assert r.status_code == 400 and "no task adapters" in r.json()["detail"]["message"]


def test_a_model_without_lora_tasks_runs_the_remote_code_without_an_adapter(
    server: ServerProcess, reference: Callable[[str, str | None], np.ndarray]
) -> None:
    for text, vector in zip(TEXTS, vectors(post(server.url, PLAIN, TEXTS)), strict=True):
        np.testing.assert_allclose(vector, reference(text, None), atol=1e-5)


def test_bi_encoder_score_uses_the_retrieval_adapters(
    server: ServerProcess, reference: Callable[[str, str | None], np.ndarray]
) -> None:
    body = {"query": {"text": TEXTS[0]}, "items": [{"id": "d", "text": TEXTS[1]}]}
    r = httpx.post(f"{server.url}/v1/score/{MODEL}", json=body, timeout=120)
    assert r.status_code == 200, r.text
    query = reference(PREFIXES["retrieval.query"] + TEXTS[0], "retrieval.query")
    doc = reference(PREFIXES["retrieval.passage"] + TEXTS[1], "retrieval.passage")
    assert r.json()["scores"][0]["score"] == pytest.approx(float(query @ doc), abs=1e-4)
