"""LangChain adapters beyond the standard suites: retrieval, reranking, the LLM, errors."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.vectorstores import InMemoryVectorStore

from sie_langchain import SIELLM, SIEChatModel, SIEEmbeddings, SIEReranker, to_sie_messages
from sie_sdk import InvalidInputError, ModelNotFoundError
from tests.integrations.corpus import CORPUS, CORPUS_TEXTS, EXPECTED_ID, QUERY
from tests.integrations.models import MINILM, TINY_EMBEDDER, TINY_LLM, TINY_RERANKER

DOCS = [Document(page_content=text, metadata={"key": key}, id=key) for key, text in CORPUS.items()]


def test_retrieval_puts_the_invoice_first(base_url: str) -> None:
    store = InMemoryVectorStore(SIEEmbeddings(model=MINILM, base_url=base_url))
    store.add_documents(DOCS)
    assert store.similarity_search(QUERY, k=1)[0].metadata["key"] == EXPECTED_ID


async def test_async_retrieval_puts_the_invoice_first(base_url: str) -> None:
    store = InMemoryVectorStore(SIEEmbeddings(model=MINILM, base_url=base_url))
    await store.aadd_documents(DOCS)
    assert (await store.asimilarity_search(QUERY, k=1))[0].metadata["key"] == EXPECTED_ID


def test_embeddings_batch_past_the_server_item_limit(base_url: str) -> None:
    # The test server takes at most 64 items per request; 150 texts need three.
    embeddings = SIEEmbeddings(model=TINY_EMBEDDER, base_url=base_url)
    vectors = embeddings.embed_documents([f"text {i}" for i in range(150)])
    assert len(vectors) == 150 and len(vectors[0]) == 32
    with pytest.raises(ValueError):
        SIEEmbeddings(model=MINILM, batch_sze=8)  # type: ignore[call-arg]  # typos are refused


def test_reranker_orders_by_relevance(base_url: str) -> None:
    reranker = SIEReranker(model=MINILM, base_url=base_url, top_n=3)  # MiniLM scores as a bi-encoder
    ranked = reranker.compress_documents(DOCS, QUERY)
    assert ranked[0].metadata["key"] == EXPECTED_ID
    scores = [doc.metadata["relevance_score"] for doc in ranked]
    assert len(ranked) == 3 and scores == sorted(scores, reverse=True)
    assert ranked[0].id == EXPECTED_ID
    assert reranker.rerank(QUERY, CORPUS_TEXTS)[0][0] == 0
    assert reranker.compress_documents([], QUERY) == []


async def test_async_reranker_matches_sync(base_url: str) -> None:
    reranker = SIEReranker(model=TINY_RERANKER, base_url=base_url, top_n=None)
    sync = reranker.compress_documents(DOCS, QUERY)
    asynchronous = await reranker.acompress_documents(DOCS, QUERY)
    assert len(sync) == len(DOCS)
    assert [d.metadata["key"] for d in asynchronous] == [d.metadata["key"] for d in sync]


def test_errors_pass_through_typed(base_url: str) -> None:
    with pytest.raises(ModelNotFoundError):
        SIEEmbeddings(model="no-such/model", base_url=base_url).embed_query("x")
    with pytest.raises(ModelNotFoundError):
        SIEReranker(model="no-such/model", base_url=base_url).compress_documents(DOCS[:2], QUERY)
    with pytest.raises(InvalidInputError):  # an embedder cannot generate
        SIEChatModel(model=MINILM, base_url=base_url).invoke("hi")


def test_messages_map_to_roles_and_instruction() -> None:
    messages = [SystemMessage("be brief"), HumanMessage("hi"), AIMessage("hello")]
    assert to_sie_messages(messages) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    assert to_sie_messages([HumanMessage("hi")], "be brief")[0] == {"role": "system", "content": "be brief"}
    assert to_sie_messages(messages, "ignored")[0]["content"] == "be brief"


def test_chat_usage_and_streaming(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_LLM)
    chat = SIEChatModel(model=TINY_LLM, base_url=base_url, max_tokens=8, temperature=0.0)
    answer = chat.invoke("Hello there")
    usage = answer.usage_metadata
    assert usage is not None and usage["input_tokens"] > 0
    assert 0 < usage["output_tokens"] <= 8
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert answer.response_metadata["model_name"] == TINY_LLM
    chunks = list(chat.stream("Hello there"))
    assert chunks[-1].chunk_position == "last" and chunks[-1].usage_metadata == usage
    assert "".join(str(chunk.content) for chunk in chunks) == answer.content  # greedy: same text
    with pytest.raises(TypeError, match="does not take"):
        chat.invoke("hi", logprobs=True)  # a call argument it has no use for (tools it takes: test_tool_calls)


def test_llm_invoke_stream_and_async(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_LLM)
    llm = SIELLM(model=TINY_LLM, base_url=base_url, max_tokens=8, temperature=0.0)
    text = llm.invoke("Once upon a time")
    assert isinstance(text, str) and text
    assert "".join(llm.stream("Once upon a time")) == text
    assert (
        SIELLM(model=TINY_LLM, base_url=base_url, max_tokens=8, temperature=0.0, streaming=True).invoke(
            "Once upon a time"
        )
        == text
    )


async def test_llm_async(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_LLM)
    llm = SIELLM(model=TINY_LLM, base_url=base_url, max_tokens=8, temperature=0.0)
    text = await llm.ainvoke("Once upon a time")
    assert text == llm.invoke("Once upon a time")
    assert "".join([piece async for piece in llm.astream("Once upon a time")]) == text
    with pytest.raises(ModelNotFoundError):
        await SIELLM(model="no-such/model", base_url=base_url).ainvoke("hi")
