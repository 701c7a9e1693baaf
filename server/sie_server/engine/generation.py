"""Generation: a request's prompt rendered, bounded and tokenized, its sequence started on its model's decode
loop (engine/decode_loop.py) or on a runtime that decodes on its own (SGLang), and its text streamed back."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import torch

from sie_server.adapters.runtime.generator import Generator, StreamingGenerator
from sie_server.catalog.schema import ModelConfig
from sie_server.compute_thread import ComputeThread
from sie_server.contract.tools_wire import ToolRequest
from sie_server.engine import prompt_bounds
from sie_server.engine.decode_loop import DecodeLoop, generator
from sie_server.engine.grammar import Constraint, GrammarSpec, check_grammar
from sie_server.engine.sequences import SamplingParams, Sequence
from sie_server.engine.tool_prompts import prompt_for
from sie_server.errors import InferenceError, InvalidInput
from sie_server.memory.pool import ModelPool

log = logging.getLogger(__name__)


def constraint_for(model: ModelConfig, adapter: Generator, spec: GrammarSpec) -> Constraint:
    """A new sequence's grammar state; InvalidInput (400, this request only) for a grammar the engine refuses
    or a model whose backend cannot be constrained."""
    try:
        vocabulary = None if isinstance(adapter, StreamingGenerator) else adapter.grammar_tokenizer()
    except Exception as exc:  # a vocabulary the engine cannot read (no byte-level decoder, a slow tokenizer)
        log.warning("%s: the grammar engine cannot read the vocabulary (%r)", model.id, exc)
        raise InvalidInput(
            f"model {model.id} cannot constrain its output: the grammar engine cannot read its tokenizer ({exc})"
        ) from None
    if vocabulary is None:
        raise InvalidInput(f"model {model.id} cannot constrain its output to a grammar on its backend")
    return Constraint(vocabulary, check_grammar(spec, vocabulary), int(vocabulary.vocab_size))


class GenerationService:
    """Starts sequences on their model's decode loop and streams their text back."""

    def __init__(self, pool: ModelPool, load_timeout_s: float):
        self.pool = pool
        self.load_timeout_s = load_timeout_s
        self.loops: dict[str, DecodeLoop] = {}
        self.executor = ComputeThread("sie-decode")
        self._native_tasks: set[asyncio.Task[None]] = set()

    def busy(self, model_id: str) -> bool:
        loop = self.loops.get(model_id)
        return loop is not None and loop.holds_model  # not unloaded under cells still being freed

    async def start(
        self,
        model: ModelConfig,
        *,
        prompt: str | None,
        messages: list[dict[str, Any]] | None,
        params: SamplingParams,
        wait_for_load: bool,
        tools: ToolRequest | None = None,
    ) -> tuple[Sequence, Generator]:
        adapter = generator(model, await self.pool.acquire(model, wait=wait_for_load, timeout_s=self.load_timeout_s))
        prompt_bounds.check(adapter, model.id, prompt, messages, params.max_new_tokens, tools=tools is not None)
        ids, params, tool_format = await asyncio.to_thread(prompt_for, model, adapter, prompt, messages, tools, params)
        if not ids:
            raise InvalidInput("the prompt is empty")
        budget = model.profile(self.pool.device_kind).max_batch_tokens
        total = len(ids) + params.max_new_tokens
        if len(ids) + params.max_new_tokens > adapter.context_length:
            raise prompt_bounds.too_long(
                model.id, adapter.context_length, f"prompt ({len(ids)} tokens)", params.max_new_tokens
            )
        if total > budget:
            raise InvalidInput(
                f"prompt + max_new_tokens is {total} tokens; model {model.id} serves at most {budget} per sequence"
            )
        seq = Sequence(ids, params, tool_format=tool_format)
        if params.grammar is not None:
            seq.constraint = await asyncio.to_thread(constraint_for, model, adapter, params.grammar)
        if isinstance(adapter, StreamingGenerator):  # SGLang batches and decodes on its own
            task = asyncio.get_running_loop().create_task(self._native(adapter, seq))
            self._native_tasks.add(task)
            task.add_done_callback(self._native_tasks.discard)
            return seq, adapter
        if params.seed is not None:
            seq.generator = torch.Generator().manual_seed(params.seed)
        loop = self.loops.get(model.id)
        if loop is None:
            loop = self.loops[model.id] = DecodeLoop(
                model, self.pool, self.executor, budget, self.pool.metrics, wait_s=self.load_timeout_s
            )
        loop.add(seq)
        return seq, adapter

    @staticmethod
    async def _native(adapter: StreamingGenerator, seq: Sequence) -> None:
        try:
            async for delta, reason, completion in adapter.stream(seq.prompt_ids, seq.params):
                if seq.cancelled:
                    break
                seq.text += delta
                seq.completion_tokens = completion
                if delta:
                    seq.deltas.put_nowait(delta)
                seq.finish_reason = reason or seq.finish_reason
        except Exception as exc:
            log.exception("generation failed")
            seq.error = InferenceError(f"generation failed ({type(exc).__name__})")
        seq.deltas.put_nowait(None)

    @staticmethod
    async def stream(seq: Sequence) -> AsyncIterator[str]:
        """The text deltas of a sequence as they are produced; cancels it if the consumer leaves."""
        try:
            while True:
                delta = await seq.deltas.get()
                if delta is None:
                    if seq.error is not None:
                        raise seq.error
                    return
                yield delta
        finally:
            if seq.finish_reason is None:
                seq.cancelled = True

    async def complete(self, seq: Sequence) -> str:
        async for _ in self.stream(seq):
            pass
        return seq.text

    async def stop(self) -> None:
        tasks = [loop.task for loop in self.loops.values() if loop.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.executor.shutdown(wait=False, cancel_futures=True)


def usage(seq: Sequence) -> dict[str, Any]:
    prompt = len(seq.prompt_ids)
    completion = seq.completion_tokens if seq.completion_tokens is not None else len(seq.generated)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
