"""LlamaIndex adapters: SIEEmbedding in a VectorStoreIndex, SIENodePostprocessor, SIELLM (a
function-calling LLM: predict_and_call and structured_predict on the packaged SmolLM2)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Literal

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import FunctionTool

from sie_integrations_base import SIEBackend
from sie_llamaindex import SIELLM, SIEEmbedding, SIENodePostprocessor
from sie_llamaindex._tools import openai_messages, openai_tools
from sie_sdk import ModelNotFoundError, SIEClient
from tests.helpers.catalog import SMOLLM
from tests.integrations.corpus import CORPUS, EXPECTED_ID, QUERY
from tests.integrations.models import MINILM, TINY_EMBEDDER, TINY_LLM, TINY_RERANKER, require_model
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


# --- function calling (the packaged SmolLM2, greedy and short: a call fits in 96 tokens) -----------------


class Amount(BaseModel):
    value: int = Field(ge=0, le=100_000)
    currency: Literal["EUR", "USD"]


class Invoice(BaseModel):
    """An invoice's number, total and whether it is paid."""

    number: int = Field(ge=1, le=9999)
    total: Amount
    paid: bool


INVOICE = PromptTemplate("Invoice {text}\nExtract the invoice.")
INVOICE_TEXT = "number 117 from Acme Corp: total 420 EUR, not paid yet."
EXPECTED_INVOICE = Invoice(number=117, total=Amount(value=420, currency="EUR"), paid=False)


def _arithmetic() -> tuple[list[tuple[str, int, int]], FunctionTool, FunctionTool]:
    calls: list[tuple[str, int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append(("add", a, b))
        return a + b

    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        calls.append(("multiply", a, b))
        return a * b

    return calls, FunctionTool.from_defaults(fn=add), FunctionTool.from_defaults(fn=multiply)


@pytest.fixture
def smollm(base_url: str) -> SIELLM:
    require_model(base_url, SMOLLM)
    return SIELLM(model=SMOLLM, base_url=base_url, num_output=96, temperature=0.0)


def test_llm_is_function_calling_and_sends_tools_as_openai_functions() -> None:
    llm = SIELLM(model=SMOLLM, base_url="http://127.0.0.1:9")
    assert llm.metadata.is_function_calling_model
    _, add, multiply = _arithmetic()
    prepared = llm._prepare_chat_with_tools([add, multiply], "What is 2 plus 3?", tool_required=True)
    assert prepared["tool_choice"] == "required" and prepared["parallel_tool_calls"] is False
    assert [t["function"]["name"] for t in prepared["tools"]] == ["add", "multiply"]
    named = llm._prepare_chat_with_tools([add, multiply], "hi", tool_choice="multiply")
    assert named["tool_choice"] == {"type": "function", "function": {"name": "multiply"}}
    assert llm._prepare_chat_with_tools([add], "hi")["tool_choice"] == "auto"
    # a nested model's schema goes with its references resolved (the server nests it in its answer's grammar)
    (spec,) = openai_tools([FunctionTool.from_defaults(fn=lambda **kw: kw, name="Invoice", fn_schema=Invoice)])
    parameters = spec["function"]["parameters"]
    assert "$ref" not in json.dumps(parameters) and "$defs" not in parameters
    assert parameters["properties"]["total"]["properties"]["currency"]["enum"] == ["EUR", "USD"]


def test_a_conversation_with_calls_and_results_goes_in_openai_shape() -> None:
    call = ToolCallBlock(tool_call_id="call_1", tool_name="add", tool_kwargs={"a": 2, "b": 3})
    history = [
        ChatMessage(role=MessageRole.USER, content="What is 2 plus 3?"),
        ChatMessage(role=MessageRole.ASSISTANT, blocks=[call]),
        ChatMessage(role=MessageRole.TOOL, content="5", additional_kwargs={"tool_call_id": "call_1"}),
    ]
    assert openai_messages(history, "Be brief.") == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 plus 3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
            ],
        },
        {"role": "tool", "content": "5", "tool_call_id": "call_1"},
    ]


def test_predict_and_call_runs_the_function_with_parsed_arguments(smollm: SIELLM) -> None:
    calls, add, multiply = _arithmetic()
    answer = smollm.predict_and_call([add, multiply], "What is 6 times 7?", tool_required=True)
    assert len(calls) == 1
    name, a, b = calls[0]
    assert isinstance(a, int) and isinstance(b, int)
    expected = a + b if name == "add" else a * b
    assert answer.response == str(expected)
    assert [(s.tool_name, s.raw_output) for s in answer.sources] == [(name, expected)]


async def test_apredict_and_call_with_a_named_tool_calls_that_one(smollm: SIELLM) -> None:
    calls, add, multiply = _arithmetic()
    # the question asks for a sum; the named choice makes it a product anyway
    answer = await smollm.apredict_and_call([add, multiply], "What is 2 plus 3?", tool_choice="multiply")
    assert [name for name, _, _ in calls] == ["multiply"]
    _, a, b = calls[0]
    assert answer.response == str(a * b)


async def test_a_forced_tool_choice_always_gives_a_call(smollm: SIELLM) -> None:
    _, add, multiply = _arithmetic()
    # prompts that invite no arithmetic at all, sent together (the server batches them)
    unrelated = ["Tell me a joke.", "Who wrote Hamlet?", "Translate 'cat' into French."]
    responses = await asyncio.gather(
        *(smollm.achat_with_tools([add, multiply], prompt, tool_required=True) for prompt in unrelated)
    )
    streamed = list(smollm.stream_chat_with_tools([add], "Say hello.", tool_required=True))
    assert len(streamed) == 1
    for response in [*responses, streamed[-1]]:
        (selection,) = smollm.get_tool_calls_from_response(response)
        assert selection.tool_name in ("add", "multiply") and selection.tool_id.startswith("call_")
        assert set(selection.tool_kwargs) == {"a", "b"}
        assert all(isinstance(v, int) for v in selection.tool_kwargs.values())
        assert response.additional_kwargs["finish_reason"] == "tool_calls"
    assert streamed[-1].message.blocks and streamed[-1].delta == ""


def test_structured_predict_gives_a_validated_nested_model(smollm: SIELLM) -> None:
    invoice = smollm.structured_predict(Invoice, INVOICE, text=INVOICE_TEXT)
    assert isinstance(invoice, Invoice) and isinstance(invoice.total, Amount)
    assert invoice == EXPECTED_INVOICE  # greedy SmolLM2 reads this one right


async def test_astructured_predict_gives_the_same_model(smollm: SIELLM) -> None:
    invoice = await smollm.astructured_predict(Invoice, INVOICE, text=INVOICE_TEXT)
    assert isinstance(invoice, Invoice) and invoice == EXPECTED_INVOICE


def test_no_call_when_one_was_required_is_an_error_that_says_why(smollm: SIELLM) -> None:
    _, add, _ = _arithmetic()
    cut = smollm.chat_with_tools([add], "What is 2 plus 3?", tool_required=True, max_tokens=3)
    assert cut.additional_kwargs["finish_reason"] == "length"
    with pytest.raises(ValueError, match="max_tokens"):
        smollm.get_tool_calls_from_response(cut)
    assert smollm.get_tool_calls_from_response(cut, error_on_no_tool_call=False) == []
