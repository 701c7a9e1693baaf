"""LlamaIndex adapters: SIEEmbedding in a VectorStoreIndex, SIENodePostprocessor, SIELLM."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from sie_integrations_base import SIEBackend
from sie_llamaindex import SIELLM, SIEEmbedding, SIENodePostprocessor
from sie_sdk import ModelNotFoundError, SIEClient
from tests.integrations.corpus import CORPUS, EXPECTED_ID, QUERY
from tests.integrations.models import MINILM, TINY_EMBEDDER, TINY_LLM, TINY_RERANKER
from tests.integrations.recording import Recording

NODES = [TextNode(text=text, id_=key) for key, text in CORPUS.items()]


def test_index_retrieves_the_invoice_first(base_url: str) -> None:
    index = VectorStoreIndex(NODES, embed_model=SIEEmbedding(model=MINILM, base_url=base_url))
    hits = index.as_retriever(similarity_top_k=3).retrieve(QUERY)
    assert hits[0].node.node_id == EXPECTED_ID


async def test_async_index_retrieves_the_invoice_first(base_url: str) -> None:
    embed = SIEEmbedding(model=MINILM, base_url=base_url)
    index = VectorStoreIndex(NODES, embed_model=embed, use_async=True)
    hits = await index.as_retriever(similarity_top_k=3).aretrieve(QUERY)
    assert hits[0].node.node_id == EXPECTED_ID


def test_batches_go_through_get_text_embeddings(base_url: str) -> None:
    embed = SIEEmbedding(model=TINY_EMBEDDER, base_url=base_url, embed_batch_size=64)
    transport = Recording()
    with SIEClient(base_url, transport=transport) as client:
        embed._backend = SIEBackend(TINY_EMBEDDER, client=client)  # the same backend, watched
        vectors = embed.get_text_embedding_batch([f"text {i}" for i in range(150)])
    assert len(vectors) == 150 and len(vectors[0]) == 32
    assert [len(b["items"]) for b in transport.bodies("/v1/encode/")] == [64, 64, 22]


async def test_query_and_text_roles(base_url: str) -> None:
    embed = SIEEmbedding(model="test/tiny-cls", base_url=base_url)
    query = embed.get_query_embedding("hello")
    text = embed.get_text_embedding("hello")
    assert not np.allclose(query, text)
    np.testing.assert_allclose(await embed.aget_query_embedding("hello"), query, atol=1e-6)
    np.testing.assert_allclose((await embed.aget_text_embedding_batch(["hello"]))[0], text, atol=1e-6)


def test_postprocessor_reranks_nodes(base_url: str) -> None:
    nodes = [NodeWithScore(node=node, score=0.0) for node in NODES]
    rerank = SIENodePostprocessor(model=MINILM, base_url=base_url, top_n=2)
    ranked = rerank.postprocess_nodes(nodes, query_str=QUERY)
    assert ranked[0].node.node_id == EXPECTED_ID and len(ranked) == 2
    assert ranked[0].score is not None and ranked[1].score is not None and ranked[0].score >= ranked[1].score
    with pytest.raises(ValueError, match="needs the query"):
        rerank.postprocess_nodes(nodes)


async def test_postprocessor_async_and_in_a_query_pipeline(base_url: str) -> None:
    nodes = [NodeWithScore(node=node, score=0.0) for node in NODES]
    rerank = SIENodePostprocessor(model=TINY_RERANKER, base_url=base_url, top_n=None)
    sync = rerank.postprocess_nodes(nodes, QueryBundle(QUERY))
    asynchronous = await rerank.apostprocess_nodes(nodes, query_str=QUERY)
    assert [n.node.node_id for n in asynchronous] == [n.node.node_id for n in sync]
    assert len(sync) == len(NODES)
    index = VectorStoreIndex(NODES, embed_model=SIEEmbedding(model=MINILM, base_url=base_url))
    retriever = index.as_retriever(similarity_top_k=10)
    hits = SIENodePostprocessor(model=MINILM, base_url=base_url, top_n=1).postprocess_nodes(
        retriever.retrieve(QUERY), query_str=QUERY
    )
    assert hits[0].node.node_id == EXPECTED_ID


def test_errors_pass_through_typed(base_url: str) -> None:
    with pytest.raises(ModelNotFoundError):
        SIEEmbedding(model="no-such/model", base_url=base_url).get_query_embedding("x")
    with pytest.raises(ModelNotFoundError):
        SIENodePostprocessor(model="no-such/model", base_url=base_url).postprocess_nodes(
            [NodeWithScore(node=NODES[0])], query_str="x"
        )


def test_llm_complete_stream_chat(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_LLM)
    llm = SIELLM(model=TINY_LLM, base_url=base_url, num_output=8, temperature=0.0)
    assert llm.metadata.model_name == TINY_LLM and llm.metadata.num_output == 8
    done = llm.complete("Once upon a time")
    assert done.text and done.additional_kwargs["usage"]["completion_tokens"] <= 8
    streamed = list(llm.stream_complete("Once upon a time"))
    assert streamed[-1].text == done.text
    assert "".join(part.delta or "" for part in streamed) == done.text
    messages = [ChatMessage(role=MessageRole.USER, content="Hello")]
    reply = llm.chat(messages)
    assert reply.message.role == MessageRole.ASSISTANT and reply.message.content
    assert list(llm.stream_chat(messages))[-1].message.content == reply.message.content


async def test_llm_async(base_url: str, needs_model: Callable[[str], None]) -> None:
    needs_model(TINY_LLM)
    llm = SIELLM(model=TINY_LLM, base_url=base_url, num_output=8, temperature=0.0)
    done = await llm.acomplete("Once upon a time")
    assert done.text == llm.complete("Once upon a time").text
    parts = [part async for part in await llm.astream_complete("Once upon a time")]
    assert parts[-1].text == done.text
    messages = [ChatMessage(role=MessageRole.USER, content="Hello")]
    reply = await llm.achat(messages)
    chunks = [chunk async for chunk in await llm.astream_chat(messages)]
    assert chunks[-1].message.content == reply.message.content
