"""Haystack components inside real Haystack pipelines: files parsed by the server, embedded, written to the
in-memory store, retrieved and reranked; sparse embeddings; the chat generator (text, stream, tool calls)."""

from __future__ import annotations

import os

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # Haystack's telemetry would reach the internet

from pathlib import Path

import numpy as np
import pytest
from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever
from haystack.components.writers import DocumentWriter
from haystack.dataclasses import ByteStream, ChatMessage, SparseEmbedding, StreamingChunk
from haystack.document_stores.in_memory import InMemoryDocumentStore
from haystack.tools import Tool

from sie_haystack import (
    SIEChatGenerator,
    SIEDocumentConverter,
    SIEDocumentEmbedder,
    SIERanker,
    SIESparseDocumentEmbedder,
    SIESparseTextEmbedder,
    SIETextEmbedder,
)
from sie_sdk import InvalidInputError, ModelNotFoundError
from tests.helpers.catalog import DOCLING, SMOLLM, SPLADE_SMALL
from tests.helpers.invoice import INVOICE_PASSAGES, INVOICE_QUERY
from tests.integrations.corpus import DISTRACTORS
from tests.integrations.models import MINILM


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path | ByteStream]:
    """The invoice passages as Markdown files, and two distractors as in-memory bytes."""
    folder = tmp_path_factory.mktemp("haystack-files")
    files: list[Path | ByteStream] = []
    for key, text in INVOICE_PASSAGES.items():
        path = folder / f"{key}.md"
        path.write_text(f"# {key.title()}\n\n{text}\n")
        files.append(path)
    for k, text in enumerate(DISTRACTORS[:2]):
        files.append(ByteStream(data=f"# Note {k}\n\n{text}\n".encode(), meta={"file_path": f"note-{k}.md"}))
    return files


def indexing(store: InMemoryDocumentStore, base_url: str) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("convert", SIEDocumentConverter(DOCLING, base_url=base_url))
    pipeline.add_component("embed", SIEDocumentEmbedder(MINILM, base_url=base_url, meta_fields_to_embed=["title"]))
    pipeline.add_component("write", DocumentWriter(store))
    pipeline.connect("convert", "embed")
    pipeline.connect("embed", "write")
    return pipeline


def querying(store: InMemoryDocumentStore, base_url: str) -> Pipeline:
    pipeline = Pipeline()
    pipeline.add_component("embed", SIETextEmbedder(MINILM, base_url=base_url))
    pipeline.add_component("retrieve", InMemoryEmbeddingRetriever(store, top_k=6))
    pipeline.add_component("rank", SIERanker(MINILM, base_url=base_url, top_k=3))  # MiniLM scores as a bi-encoder
    pipeline.connect("embed.embedding", "retrieve.query_embedding")
    pipeline.connect("retrieve.documents", "rank.documents")
    return pipeline


def test_files_to_store_to_reranked_answer_in_pipelines(base_url: str, sources: list[Path | ByteStream]) -> None:
    store = InMemoryDocumentStore()
    written = indexing(store, base_url).run({"convert": {"sources": sources, "meta": {"title": "office"}}})
    assert written["write"]["documents_written"] == 7 == store.count_documents()
    stored = {doc.meta["file_path"]: doc for doc in store.filter_documents()}
    invoice = stored[str(sources[0])]
    assert invoice.content is not None and INVOICE_PASSAGES["invoice"] in invoice.content  # docling's markdown
    assert invoice.meta["model"] == DOCLING and invoice.meta["title"] == "office"
    assert invoice.embedding is not None and len(invoice.embedding) == 384
    assert stored["note-0.md"].content is not None and DISTRACTORS[0] in stored["note-0.md"].content

    # the query pipeline, rebuilt from its own YAML (Haystack loads only the modules a caller trusts)
    pipeline = Pipeline.loads(querying(store, base_url).dumps(), allowed_modules=["sie_haystack"])
    ranked = pipeline.run({"embed": {"text": INVOICE_QUERY}, "rank": {"query": INVOICE_QUERY}})["rank"]["documents"]
    assert len(ranked) == 3 and ranked[0].meta["file_path"] == str(sources[0])
    scores = [doc.score for doc in ranked]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_async_embedders_and_ranker_match_sync(base_url: str) -> None:
    docs = [Document(content=text, id=key) for key, text in INVOICE_PASSAGES.items()]
    embedder, ranker = SIEDocumentEmbedder(MINILM, base_url=base_url), SIERanker(MINILM, base_url=base_url, top_k=2)
    sync = embedder.run(documents=docs)["documents"]
    asynchronous = (await embedder.run_async(documents=docs))["documents"]
    assert np.allclose([d.embedding for d in asynchronous], [d.embedding for d in sync], atol=1e-6)
    query = (await SIETextEmbedder(MINILM, base_url=base_url).run_async(text=INVOICE_QUERY))["embedding"]
    assert query == pytest.approx(SIETextEmbedder(MINILM, base_url=base_url).run(text=INVOICE_QUERY)["embedding"])
    best = (await ranker.run_async(query=INVOICE_QUERY, documents=docs))["documents"]
    assert [d.id for d in best] == [d.id for d in ranker.run(query=INVOICE_QUERY, documents=docs)["documents"]]
    assert best[0].id == "invoice" and len(best) == 2
    assert ranker.run(query=INVOICE_QUERY, documents=docs, score_threshold=2.0)["documents"] == []
    assert docs[0].embedding is None and docs[0].score is None  # inputs are left as they were


def test_sparse_embedders_give_haystack_sparse_embeddings(base_url: str) -> None:
    query = SIESparseTextEmbedder(SPLADE_SMALL, base_url=base_url).run(text=INVOICE_QUERY)["sparse_embedding"]
    assert isinstance(query, SparseEmbedding) and len(query.indices) == len(query.values) > 0
    docs = [Document(content=text, id=key) for key, text in INVOICE_PASSAGES.items()]
    embedded = SIESparseDocumentEmbedder(SPLADE_SMALL, base_url=base_url).run(documents=docs)["documents"]
    assert all(isinstance(d.sparse_embedding, SparseEmbedding) and d.embedding is None for d in embedded)

    def dot(a: SparseEmbedding, b: SparseEmbedding) -> float:
        weights = dict(zip(a.indices, a.values, strict=True))
        return sum(weights.get(i, 0.0) * v for i, v in zip(b.indices, b.values, strict=True))

    best = max(embedded, key=lambda d: dot(query, d.sparse_embedding))  # type: ignore[arg-type]
    assert best.id == "invoice"


def test_chat_generator_answers_streams_and_calls_tools(base_url: str) -> None:
    chat = SIEChatGenerator(SMOLLM, base_url=base_url, generation_kwargs={"max_tokens": 8, "temperature": 0.0})
    messages = [ChatMessage.from_system("Answer briefly."), ChatMessage.from_user("What is the capital of France?")]
    (reply,) = chat.run(messages=messages)["replies"]
    assert reply.role.value == "assistant" and reply.text
    usage = reply.meta["usage"]
    assert reply.meta["model"] == SMOLLM and reply.meta["finish_reason"] in ("stop", "length")
    assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 8

    chunks: list[StreamingChunk] = []
    (streamed,) = chat.run(messages=messages, streaming_callback=chunks.append)["replies"]
    assert len(chunks) > 1 and "".join(c.content for c in chunks) == streamed.text == reply.text  # greedy: same text

    weather = Tool(
        name="get_weather",
        description="The weather in a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        function=lambda city: f"sunny in {city}",
    )
    asked = [ChatMessage.from_user("What is the weather in Paris?")]
    (call,) = chat.run(asked, {"max_tokens": 32, "tool_choice": "required"}, tools=[weather])["replies"]
    assert call.tool_call is not None and call.tool_call.tool_name == "get_weather"
    assert isinstance(call.tool_call.arguments["city"], str)


def test_errors_pass_through_typed(base_url: str, tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError):
        SIETextEmbedder("no-such/model", base_url=base_url).run(text="x")
    with pytest.raises(TypeError, match="one string"):
        SIETextEmbedder(MINILM, base_url=base_url).run(text=["a", "b"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):  # an embedder cannot generate
        SIEChatGenerator(MINILM, base_url=base_url).run(messages=[ChatMessage.from_user("hi")])
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.7 this is not really a pdf")
    with pytest.raises(InvalidInputError, match=r"broken\.pdf"):
        SIEDocumentConverter(DOCLING, base_url=base_url).run(sources=[broken])
    with pytest.raises(ValueError, match="one per source"):
        SIEDocumentConverter(DOCLING, base_url=base_url).run(sources=[broken], meta=[{}, {}])
