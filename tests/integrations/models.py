"""Model ids the integration tests use, and the check that the shared server serves one as they need."""

from __future__ import annotations

from functools import cache

import httpx
import pytest

MINILM = "sentence-transformers/all-MiniLM-L6-v2"  # real packaged weights, 384 dims
TINY_EMBEDDER = "test/tiny-embedder"  # random weights, 32 dims
TINY_RERANKER = "test/tiny-reranker"  # random cross-encoder
TINY_SPLADE = "test/tiny-splade"  # sparse
TINY_COLBERT = "test/tiny-colbert"  # multivector
TINY_LLM = "test/tiny-llm"  # generate (random weights: gibberish, real token counts)
TINY_LLM_B = "test/tiny-llm-b"  # the same weights under another id: a model to switch to per call
TINY_BGE_M3 = "test/tiny-bge-m3"  # dense, sparse and multivector from one model

# What each model must offer: (encode outputs, task).
NEEDS: dict[str, tuple[tuple[str, ...], str | None]] = {
    TINY_SPLADE: (("sparse",), "encode"),
    TINY_COLBERT: (("multivector",), "encode"),
    TINY_BGE_M3: (("dense", "sparse", "multivector"), "encode"),
    TINY_LLM: ((), "generate"),
}


@cache
def served_models(base_url: str) -> dict[str, dict[str, object]]:
    """The shared server's ``GET /v1/models``, by id (asked once per server)."""
    answer = httpx.get(f"{base_url}/v1/models", timeout=30.0)
    answer.raise_for_status()
    return {info["id"]: info for info in answer.json()["models"]}


def missing_reason(base_url: str, model: str) -> str | None:
    """Why ``model`` cannot serve these tests on this server, or ``None`` when it can."""
    info = served_models(base_url).get(model)
    if info is None:
        return f"{model} is not in the test server's catalog"
    wanted, task = NEEDS.get(model, ((), None))
    outputs = info.get("outputs") or []
    tasks = info.get("tasks") or []
    for output in wanted:
        if output not in outputs:  # type: ignore[operator]
            return f"{model} does not serve {output} vectors (outputs: {outputs})"
    if task is not None and task not in tasks:  # type: ignore[operator]
        return f"{model} does not serve the {task} task (tasks: {tasks})"
    return None


def require_model(base_url: str, model: str) -> None:
    """Fail the calling test, with the reason, unless the live server serves ``model`` as it needs.

    The shared test server serves every model here (tests/conftest.py), so a missing one is a
    regression to see, not a reason to skip."""
    reason = missing_reason(base_url, model)
    if reason is not None:
        pytest.fail(reason)
