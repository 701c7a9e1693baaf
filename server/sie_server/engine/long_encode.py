"""Encode with ``truncation`` error or chunk, or late chunking: the items over the model's token
limit (or with spans) are tokenized again with every token kept, then refused, cut into windows
or pooled over their spans; the others run as usual. All share the engine's queue."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from functools import partial
from typing import Any

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import LongTextEncoder, TextEncoder
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.engine.extract.queue import Tokenizing, run, tokenize
from sie_server.engine.long_inputs import mean, token_ranges, windows
from sie_server.engine.outcomes import TextInput, Timing
from sie_server.errors import InvalidInput


class LongInputs:
    def __init__(
        self,
        engine: Tokenizing,
        model: ModelConfig,
        adapter: TextEncoder,
        options: EncodeOptions,
        instruction: str | None,
        call: CallOptions,
        timing: Timing,
    ):
        self.engine, self.model, self.adapter, self.options = engine, model, adapter, options
        self.instruction, self.call, self.timing = instruction, call, timing

    async def encode(
        self, items: list[TextInput], truncation: str, spans: list[list[list[int]] | None]
    ) -> tuple[list[dict[str, Any]], list[str], int]:
        """Each item's outputs, the ids of items cut at the limit, and the tokens encoded."""
        if any(i.image is not None for i in items):
            raise InvalidInput("params.truncation error or chunk and items[].spans take text items only")
        texts = [i.text for i in items]
        is_query, instruction = self.options.is_query, self.instruction
        tokens = await self._tokenize(
            partial(self.adapter.encode_tokens, is_query=is_query, instruction=instruction), texts
        )
        over = [k for k, t in enumerate(tokens) if t.truncated and spans[k] is None]
        if truncation == "error" and over and not self._sees_long_texts():
            limit = self.model.max_sequence_length
            raise InvalidInput(f"items[{over[0]}] is longer than model {self.model.id}'s limit of {limit} tokens")
        long_at = [k for k in range(len(items)) if spans[k] is not None or (k in over and truncation != "end")]
        if not long_at:
            plain_results = await self._run(tokens, self.options)
            return plain_results, [items[k].id for k in over], sum(t.length for t in tokens)
        adapter = self._long_encoder()
        every_token = partial(adapter.long_tokens, is_query=is_query, instruction=instruction)
        whole = dict(zip(long_at, await self._tokenize(every_token, [texts[k] for k in long_at]), strict=True))
        if truncation == "error" and over:
            k = over[0]
            raise InvalidInput(
                f"items[{k}] has {whole[k].length} tokens; model {self.model.id} takes at most {adapter.max_length} "
                "(params.truncation is error: shorten it, or ask for end or chunk)"
            )
        plain: list[Tokens] = []  # what runs as usual: whole items and chunk windows
        parts: list[tuple[int, int] | None] = []  # per item: its range in ``plain``, None for spanned items
        spanned: list[Tokens] = []
        for k, t in enumerate(tokens):
            if spans[k] is not None:
                spanned.append(self._spanned(k, whole[k], spans[k] or []))
                parts.append(None)
                continue
            pieces = windows(whole[k], adapter.max_length) if k in whole else [t]
            parts.append((len(plain), len(plain) + len(pieces)))
            plain.extend(pieces)
        late = replace(self.options, late_chunks=True)
        done, pooled = await asyncio.gather(self._run(plain, self.options), self._run(spanned, late))
        normalize = self.model.runtime.normalize
        results: list[dict[str, Any]] = []
        left = iter(pooled)
        for part in parts:
            if part is None:
                results.append(next(left))
            elif part[1] - part[0] == 1:
                results.append(done[part[0]])
            else:
                results.append({"dense": mean([r["dense"] for r in done[part[0] : part[1]]], normalize)})
        truncated = [items[k].id for k in over if k not in whole]
        return results, truncated, sum(t.length for t in plain) + sum(t.length for t in spanned)

    def _sees_long_texts(self) -> bool:
        return isinstance(self.adapter, LongTextEncoder) and self.adapter.sees_long_texts

    def _long_encoder(self) -> LongTextEncoder:
        if not isinstance(self.adapter, LongTextEncoder) or not self.adapter.sees_long_texts:
            raise InvalidInput(
                f"model {self.model.id} (adapter {self.model.adapter}) cannot chunk long inputs or pool spans; "
                "use params.truncation end or error"
            )
        return self.adapter

    def _spanned(self, k: int, tokens: Tokens, spans: list[list[int]]) -> Tokens:
        adapter = self._long_encoder()
        if not adapter.pools_spans:
            raise InvalidInput(
                f"late chunking (items[{k}].spans) needs a mean-pooling model; model {self.model.id} pools "
                f"{self.model.runtime.pooling}"
            )
        if tokens.length > adapter.max_length:
            raise InvalidInput(
                f"items[{k}] has {tokens.length} tokens; late chunking takes one pass of at most "
                f"{adapter.max_length} tokens for model {self.model.id}"
            )
        return replace(tokens, data=token_ranges(tokens, spans, f"items[{k}]"))

    async def _tokenize(self, fn: Any, texts: list[str]) -> list[Tokens]:
        return await tokenize(self.engine, self.timing, fn, texts, split=True)

    async def _run(self, tokens: list[Tokens], options: EncodeOptions) -> list[Any]:
        return await run(self.engine, self.model, tokens, options, self.call, self.timing)
