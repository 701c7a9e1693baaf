"""The ecosystem examples run end to end against the test server (and the Weaviate fake)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.server import REPO
from tests.integrations.models import MINILM, TINY_LLM, missing_reason
from tests.integrations.reopen import fresh_env
from tests.integrations.weaviate_fake import FakeWeaviateServer

BEST = "best     : Invoice INV-2024-0117 from Acme Corp"


def run_example(name: str, base_url: str, **env: str) -> str:
    settings = {"SIE_URL": base_url, "SIE_EMBEDDER": MINILM, "SIE_RERANKER": MINILM, "SIE_GENERATOR": TINY_LLM}
    run = subprocess.run(
        [sys.executable, str(REPO / "examples" / name)],
        capture_output=True,
        text=True,
        timeout=180,
        env=fresh_env(**{**settings, **env}),
        check=False,
    )
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    return run.stdout


@pytest.mark.parametrize("name", ["langchain_rag.py", "llamaindex_rag.py"])
def test_framework_examples_answer(name: str, base_url: str) -> None:
    out = run_example(name, base_url)
    assert BEST in out
    if missing_reason(base_url, TINY_LLM) is None:
        assert "answer   :" in out and "usage    :" in out
    else:
        assert f"answer: skipped, {TINY_LLM} is not available" in out


def test_example_says_when_the_llm_is_not_served(base_url: str) -> None:
    out = run_example("langchain_rag.py", base_url, SIE_GENERATOR="no-such/llm")
    assert BEST in out
    assert "answer: skipped, no-such/llm is not available on this server (ModelNotFoundError" in out


@pytest.mark.parametrize("name", ["chroma_rag.py", "qdrant_rag.py", "lancedb_rag.py"])
def test_store_examples_find_the_invoice(name: str, base_url: str) -> None:
    assert BEST in run_example(name, base_url)


def test_rerank_step_is_skipped_when_its_model_is_not_served(base_url: str) -> None:
    out = run_example("chroma_rag.py", base_url, SIE_RERANKER="no-such/reranker")
    assert "rerank: skipped, no-such/reranker is not available" in out
    assert BEST in out  # the nearest passage stands in


def test_weaviate_example_against_the_fake(base_url: str) -> None:
    with FakeWeaviateServer() as fake:
        out = run_example(
            "weaviate_rag.py",
            base_url,
            WEAVIATE_URL=f"http://127.0.0.1:{fake.http_port}",
            WEAVIATE_GRPC_PORT=str(fake.grpc_port),
        )
    assert BEST in out
    assert "POST /v1/schema" in fake.state.calls and "grpc Search" in fake.state.calls
