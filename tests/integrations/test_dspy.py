"""DSPy on SIE: ``dspy.Embedder`` and ``dspy.retrievers.Embeddings`` on the server's embedder, the reranking
module, and the RAG example whose ``dspy.Predict`` answers through ``dspy.LM`` on the OpenAI-compatible
chat completions (the packaged SmolLM2)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM's import would fetch a price list

import dspy
import numpy as np
import pytest

from sie_dspy import SIEEmbedder, SIEReranker, SIESparseEmbedder, sie_lm
from sie_sdk import ModelNotFoundError
from tests.helpers.catalog import SMOLLM, SPLADE_SMALL
from tests.integrations.corpus import CORPUS_TEXTS, EXPECTED_TEXT, QUERY
from tests.integrations.models import MINILM, TINY_LLM
from tests.integrations.test_examples import BEST, run_example


def test_dspy_embedder_gives_one_normalized_row_per_text(base_url: str) -> None:
    embedder = dspy.Embedder(SIEEmbedder(MINILM, base_url=base_url), batch_size=16, caching=False)
    matrix = embedder(CORPUS_TEXTS[:40])  # three batches of dspy's, each one request
    assert isinstance(matrix, np.ndarray) and matrix.shape == (40, 384) and matrix.dtype == np.float32
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    assert embedder(CORPUS_TEXTS[0]).shape == (384,)
    assert np.allclose(embedder(CORPUS_TEXTS[0]), matrix[0], atol=1e-6)


def test_retriever_and_reranker_put_the_invoice_first(base_url: str) -> None:
    search = dspy.retrievers.Embeddings(corpus=CORPUS_TEXTS, embedder=SIEEmbedder(MINILM, base_url=base_url), k=5)
    found = search(QUERY)
    assert found.passages[0] == EXPECTED_TEXT and len(found.passages) == 5
    ranked = SIEReranker(MINILM, base_url=base_url, k=3)(query=QUERY, passages=found.passages)
    assert ranked.passages[0] == EXPECTED_TEXT and len(ranked.passages) == 3
    assert ranked.scores == sorted(ranked.scores, reverse=True)
    assert [found.passages[i] for i in ranked.indices] == ranked.passages
    assert SIEReranker(MINILM, base_url=base_url)(query=QUERY, passages=[]).passages == []
    with pytest.raises(ModelNotFoundError):
        SIEEmbedder("no-such/model", base_url=base_url)(["x"])


def test_sparse_embedder(base_url: str) -> None:
    sparse = SIESparseEmbedder(SPLADE_SMALL, base_url=base_url)
    docs = sparse.embed_documents(CORPUS_TEXTS[:3])
    query = sparse.embed_query(QUERY)
    assert len(docs) == 3 and all(len(d["indices"]) == len(d["values"]) > 0 for d in docs)
    assert all(v > 0 for v in query["values"])


def test_lm_through_litellm_on_the_openai_routes(base_url: str) -> None:
    lm = sie_lm(SMOLLM, base_url=base_url, api_key="k")
    assert lm.model == f"openai/{SMOLLM}" and lm.kwargs["api_base"] == f"{base_url}/v1"
    # DSPy's LiteLLM engine (the example runs its default one): the tiny LLM, for a fast real round trip
    tiny = sie_lm(TINY_LLM, base_url=base_url, engine="litellm", cache=False, max_tokens=4, temperature=0.0)
    (text,) = tiny("Hello")
    assert isinstance(text, str) and tiny.history[-1]["usage"]["completion_tokens"] == 4


def test_rag_example_answers_with_dspy_predict(base_url: str) -> None:
    out = run_example("dspy_rag.py", base_url, SIE_GENERATOR=SMOLLM)
    assert BEST in out
    answer = next(line for line in out.splitlines() if line.startswith("answer   :"))
    assert answer.removeprefix("answer   :").strip()  # the JSON answer parsed into the signature's field
    assert "'completion_tokens':" in out


def test_rag_example_says_when_the_llm_is_not_served(base_url: str) -> None:
    out = run_example("dspy_rag.py", base_url, SIE_GENERATOR="no-such/llm", SIE_RERANKER="no-such/reranker")
    assert "rerank: skipped, no-such/reranker is not available" in out
    assert "answer: skipped, no-such/llm is not available on this server (LMUnsupportedModelError" in out
