"""Tokenize and detokenize on a model's own text tokenizer (``adapters/runtime/text_tokens.py``): the
model loaded on first use, as for any work, then the calls run on the service's tokenizer thread (off
the event loop, in turns with every other request's tokenization). Nothing is queued for the device."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol, TypeVar, cast

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.text_tokens import TextTokenizer, check_ids
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.tokenize_wire import (
    DetokenizedItem,
    DetokenizeRequest,
    DetokenizeResponse,
    Token,
    TokenizedItem,
    TokenizeRequest,
    TokenizeResponse,
    check_reads_text,
    no_tokenizer,
)
from sie_server.engine.tokenizing import TokenizerThread
from sie_server.memory.pool import ModelPool

In = TypeVar("In")
Out = TypeVar("Out")


class TokenizerHost(Protocol):
    """What these calls need of the engine's service: its pool and its tokenizer thread."""

    pool: ModelPool
    load_timeout_s: float
    tokenizer: TokenizerThread


async def _tokenizer(host: TokenizerHost, model: ModelConfig, call: CallOptions) -> TextTokenizer:
    check_reads_text(model)  # (the routes checked already; a direct caller too)
    adapter = await host.pool.acquire(model, wait=call.wait_for_load, timeout_s=host.load_timeout_s)
    if not isinstance(adapter, TextTokenizer):
        raise no_tokenizer(model)
    return adapter


async def _off_loop(thread: TokenizerThread, fn: Callable[[list[In]], list[Out]], inputs: list[In]) -> list[Out]:
    """``fn`` over ``inputs`` on the tokenizer thread, in chunks (it hands back whatever ``fn`` answers;
    its signature names the encoders' ``Tokens``)."""
    done = await thread.run(cast(Callable[[list[In]], list[Tokens]], fn), inputs)
    return cast(list[Out], done)


async def tokenize(
    host: TokenizerHost, model: ModelConfig, request: TokenizeRequest, call: CallOptions
) -> TokenizeResponse:
    adapter = await _tokenizer(host, model, call)
    texts = [item.text for item in request.items]
    found = await _off_loop(
        host.tokenizer, partial(adapter.token_spans, add_special_tokens=request.add_special_tokens), texts
    )
    items = [
        TokenizedItem.model_construct(
            tokens=[
                Token.model_construct(id=s.id, text=s.text, special=s.special, start=s.start, stop=s.stop)
                for s in spans
            ]
        )
        for spans in found
    ]  # built as the adapter gave them (a long text has tens of thousands of tokens)
    return TokenizeResponse.model_construct(model=model.id, items=items)


async def detokenize(
    host: TokenizerHost, model: ModelConfig, request: DetokenizeRequest, call: CallOptions
) -> DetokenizeResponse:
    adapter = await _tokenizer(host, model, call)
    ids = [list(item.ids) for item in request.items]
    check_ids(ids, adapter.vocabulary_size())
    texts = await _off_loop(
        host.tokenizer, partial(adapter.detokenize, skip_special_tokens=request.skip_special_tokens), ids
    )
    return DetokenizeResponse(model=model.id, items=[DetokenizedItem(text=t) for t in texts])
