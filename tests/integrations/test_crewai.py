"""CrewAI on SIE: the embedder provider inside CrewAI's own Knowledge store (a Chroma collection), its
embedding function as CrewAI's factory builds it, and the rerank and extract tools as an agent calls them."""

from __future__ import annotations

import os
import tempfile

# CrewAI's telemetry would reach the internet. Not OTEL_SDK_DISABLED, which CrewAI also reads: set here it
# would switch off OpenTelemetry for the rest of the session and every server it starts (tests/server/test_tracing.py)
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
# CrewAI fixes its Chroma folder when it is imported: a temporary one (removed after the module's tests)
os.environ["CREWAI_STORAGE_DIR"] = tempfile.mkdtemp(prefix="sie-test-crewai-")

import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sie_sdk import ModelNotFoundError
from tests.helpers.catalog import SPLADE_SMALL
from tests.helpers.invoice import INVOICE_PASSAGES, INVOICE_QUERY
from tests.integrations.models import MINILM

with warnings.catch_warnings():  # crewai.rag refuses the attribute Python sets on it for each child module
    warnings.simplefilter("ignore", ImportWarning)
    from crewai.knowledge.knowledge import Knowledge
    from crewai.knowledge.source.string_knowledge_source import StringKnowledgeSource
    from crewai.rag.embeddings.factory import build_embedder
    from crewai.tools import BaseTool

    from sie_crewai import (
        SIEEmbeddingFunction,
        SIEEmbeddingProvider,
        SIEExtractorTool,
        SIERerankerTool,
        SIESparseEmbedder,
    )

STORAGE = Path(os.environ["CREWAI_STORAGE_DIR"])

TINY_GLINER = "test/tiny-gliner"  # random weights: spans and labels, not meaning
RANKED = re.compile(r"^(\d+)\. \[Score: (-?\d+\.\d{4})\] (.*)$")


@pytest.fixture(scope="module", autouse=True)
def _remove_storage() -> Iterator[None]:
    yield
    if STORAGE.name.startswith("sie-test-crewai-"):
        shutil.rmtree(STORAGE, ignore_errors=True)


def test_crewai_builds_the_embedding_function_from_the_provider(base_url: str) -> None:
    function = build_embedder(SIEEmbeddingProvider(model=MINILM, base_url=base_url))
    assert isinstance(function, SIEEmbeddingFunction)
    vectors = function(list(INVOICE_PASSAGES.values()))
    assert len(vectors) == 5 and all(v.shape == (384,) and v.dtype == np.float32 for v in vectors)
    (query,) = function.embed_query([INVOICE_QUERY])
    assert int(np.argmax([float(query @ v) for v in vectors])) == 0  # the invoice passage is nearest


def test_knowledge_search_finds_the_invoice(base_url: str) -> None:
    sources = [StringKnowledgeSource(content=text) for text in INVOICE_PASSAGES.values()]
    knowledge = Knowledge(
        collection_name="notes", sources=sources, embedder=SIEEmbeddingProvider(model=MINILM, base_url=base_url)
    )
    knowledge.add_sources()
    (best,) = knowledge.query([INVOICE_QUERY], results_limit=1)
    assert best["content"] == INVOICE_PASSAGES["invoice"]
    assert any(STORAGE.rglob("chroma.sqlite3"))  # the collection lives in the temporary folder


def test_reranker_tool_ranks_for_the_agent(base_url: str) -> None:
    tool = SIERerankerTool(model=MINILM, base_url=base_url)  # MiniLM scores as a bi-encoder
    assert isinstance(tool, BaseTool) and set(tool.args_schema.model_json_schema()["properties"]) == {
        "query",
        "documents",
        "top_k",
    }
    documents = list(INVOICE_PASSAGES.values())[::-1]  # the invoice last
    answer = tool.run(query=INVOICE_QUERY, documents=documents, top_k=3)
    header, *lines = answer.splitlines()
    assert header == "Ranked documents (most relevant first):" and len(lines) == 3
    parsed = [RANKED.match(line) for line in lines]
    assert all(parsed) and [int(m[1]) for m in parsed if m] == [1, 2, 3]
    scores = [float(m[2]) for m in parsed if m]
    assert scores == sorted(scores, reverse=True)
    assert parsed[0] is not None and parsed[0][3] == INVOICE_PASSAGES["invoice"]
    assert tool.run(query=INVOICE_QUERY, documents=[]) == "No documents provided to rerank."


def test_extractor_tool_lists_entities(base_url: str) -> None:
    tool = SIEExtractorTool(model=TINY_GLINER, base_url=base_url, labels=["person", "organization"], threshold=0.0)
    text = "Maria Lopez signed the contract with Acme Corp in Berlin."
    found = tool.extract(text)
    assert found["entities"], "threshold 0 keeps every span the model scores"
    assert all(e["label"] in ("person", "organization") and e["text"] in text for e in found["entities"])
    answer = tool.run(text=text)
    assert answer.splitlines()[0] == "Extracted entities:"
    assert len(answer.splitlines()) == 1 + len(found["entities"])
    strict = SIEExtractorTool(model=TINY_GLINER, base_url=base_url, threshold=1.0)
    assert strict.run(text=text, labels=["city"]) == "No extraction results found for labels: ['city']"
    with pytest.raises(ModelNotFoundError):
        SIEExtractorTool(model="no-such/model", base_url=base_url).run(text=text)


def test_sparse_embedder(base_url: str) -> None:
    sparse = SIESparseEmbedder(base_url=base_url, model=SPLADE_SMALL)
    docs = sparse.embed_documents(list(INVOICE_PASSAGES.values()))
    query = sparse.embed_query(INVOICE_QUERY)
    assert len(docs) == 5 and all(len(d["indices"]) == len(d["values"]) > 0 for d in docs)
    assert sparse.embed_documents([]) == [] and len(query["indices"]) > 0
