"""One real server for the Batch API tests: tiny embedder, reranker and LLM, plus a slow embedder
(every batch 0.25 s) for the share bound; API keys on, small caps so the refusals are cheap to reach."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.helpers.catalog import tiny_cross_encoder, tiny_embedder, tiny_llm, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import build_bert_embedder, build_cross_encoder, build_tiny_llm

KEY_A, KEY_B, ADMIN = "sk-batch-a", "sk-batch-b", "sk-batch-admin"
EMBEDDER, RERANKER, LLM, SLOW = "test/tiny-embedder", "test/tiny-reranker", "test/tiny-llm", "test/slow-embedder"
MAX_LINES = 60
MAX_FILE_BYTES = 200_000
MAX_BODY_BYTES = 32 * 1024
INFLIGHT = 2


@pytest.fixture(scope="session")
def batch_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("batch-models")
    folder = tmp_path_factory.mktemp("batch-catalog")
    embedder = build_bert_embedder(root / "bert-embedder")
    write_config(folder, tiny_embedder(EMBEDDER, embedder))
    slow = tiny_embedder(SLOW, embedder)
    slow["adapter"] = "tests.helpers.fault_adapters:SlowEmbedding"
    write_config(folder, slow)
    write_config(folder, tiny_cross_encoder(RERANKER, build_cross_encoder(root / "bert-cross-encoder")))
    write_config(folder, tiny_llm(LLM, build_tiny_llm(root / "tiny-llm")))
    return folder


@pytest.fixture(scope="module")
def batch_server(batch_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    logs = tmp_path_factory.mktemp("batch-server")
    args = [
        "--offline", "--threads", "1", "--data-dir", str(logs / "data"),
        "--api-key", KEY_A, "--api-key", KEY_B, "--admin-key", ADMIN,
        "--batch-max-lines", str(MAX_LINES), "--batch-max-file-bytes", str(MAX_FILE_BYTES),
        "--max-body-bytes", str(MAX_BODY_BYTES), "--batch-inflight", str(INFLIGHT),
    ]  # fmt: skip
    with ServerProcess(batch_catalog, *args, log=logs / "s.log") as server:
        yield server


def make_client(server: ServerProcess, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def client(batch_server: ServerProcess) -> Iterator[openai.OpenAI]:
    with make_client(batch_server) as c:
        yield c
