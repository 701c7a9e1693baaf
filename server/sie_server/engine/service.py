"""Encode and score (what ``engine/frontdoor.py`` asks for), expressed as work items on the shared queue; extract's
kinds are ``engine/extract/``, on the same queue (``engine/extract/queue.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.encoder import ImageEncoder, PairScorer, TextEncoder
from sie_server.adapters.runtime.images import PlacedImage
from sie_server.adapters.runtime.options import (
    BatchOptions,
    EncodeOptions,
    OutputType,
    ScoreOptions,
    canonical_outputs,
)
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.engine.cache_scope import Counted, ItemCache, pair_bytes, text_bytes
from sie_server.engine.coalescing import Resolved
from sie_server.engine.extract import queue
from sie_server.engine.extract.queue import CallerGone
from sie_server.engine.long_encode import LongInputs
from sie_server.engine.long_inputs import cut
from sie_server.engine.lora_tasks import lora_task, task_instruction
from sie_server.engine.outcomes import EncodeOutcome, ScoreOutcome, TextInput, Timing
from sie_server.engine.outputs import requested
from sie_server.engine.scheduler import Scheduler
from sie_server.engine.similarity import similarity
from sie_server.engine.tokenizing import TokenizerThread
from sie_server.errors import InvalidInput
from sie_server.memory.pool import ModelPool

In = TypeVar("In")
SCORE_OUTPUT: dict[str, OutputType] = {"bi_encoder": "dense", "maxsim": "multivector", "sparse_dot": "sparse"}
__all__ = [  # the outcomes (engine/outcomes.py) are read through this module too
    "SCORE_OUTPUT",
    "CallOptions",
    "CallerGone",
    "EncodeOutcome",
    "InferenceService",
    "ScoreOutcome",
    "TextInput",
    "Timing",
    "unsupported",
]


def unsupported(model: ModelConfig, task: str) -> InvalidInput:
    """A task the loaded model's family does not do (the catalog declared it, the adapter disagrees)."""
    return InvalidInput(f"model {model.id} does not support {task} (its adapter is {model.adapter})")


class InferenceService:
    def __init__(
        self,
        catalog: Catalog,
        pool: ModelPool,
        scheduler: Scheduler,
        *,
        load_timeout_s: float,
        results: ItemCache | None = None,
    ):
        """``results``: the exact result cache for encode and cross-encoder score items (None: off)."""
        self.catalog = catalog
        self.pool = pool
        self.scheduler = scheduler
        self.load_timeout_s = load_timeout_s
        self.results = results
        self.tokenizer = TokenizerThread()

    def close(self) -> None:
        """Stop the tokenizer thread (after the jobs already handed to it)."""
        self.tokenizer.stop()

    async def encode(
        self,
        model: ModelConfig,
        items: list[TextInput],
        *,
        output_types: list[str],
        is_query: bool,
        instruction: str | None,
        call: CallOptions,
        dims: int | None = None,
        truncation: str = "end",
        spans: list[list[list[int]] | None] | None = None,
        task: str | None = None,
    ) -> EncodeOutcome:
        """``dims``: dense vectors cut to their leading dims (Matryoshka); ``truncation`` and
        ``spans`` (late chunking, per item): see ``engine/long_encode.py``; ``task``: the task LoRA
        adapter (``engine/lora_tasks.py``)."""
        encode = model.tasks.encode
        if encode is None:
            raise InvalidInput(f"model {model.id} does not support encode (its tasks: {model.tasks.names()})")
        missing = [t for t in output_types if t not in encode.served_outputs()]
        if missing:
            raise InvalidInput(
                f"model {model.id} has no {', '.join(missing)} output; it offers {encode.served_outputs()}"
            )
        adapter_task = lora_task(model, task, is_query=is_query)
        instruction = task_instruction(model, adapter_task, instruction)
        timing = Timing()
        adapter = await self._adapter(model, call)
        if not isinstance(adapter, TextEncoder):
            raise unsupported(model, "encode")
        options = EncodeOptions(canonical_outputs(output_types), is_query=is_query, lora_task=adapter_task)
        if truncation == "end" and not any(spans or []):
            results, tokens = await self._encode_inputs(model, adapter, items, options, instruction, call, timing)
            truncated = [i.id for i, t in zip(items, tokens, strict=True) if t.truncated]
            prompt_tokens = sum(t.length for t in tokens)
        else:
            long = LongInputs(self, model, adapter, options, instruction, call, timing)
            results, truncated, prompt_tokens = await long.encode(items, truncation, spans or [None] * len(items))
        kept = [*output_types, "chunks"]  # late chunking's span vectors ride along with dense
        outputs = [requested(r, kept, encode, is_query=is_query) for r in results]
        if dims is not None and encode.dense is not None and dims != encode.dense.dim:
            for out in outputs:
                cut(out, dims, normalize=model.runtime.normalize)
        return EncodeOutcome(
            model=model.id,
            ids=[i.id for i in items],
            outputs=outputs,
            truncated=truncated,
            prompt_tokens=prompt_tokens,
            timing=timing,
        )

    async def score(
        self,
        model: ModelConfig,
        query: TextInput,
        items: list[TextInput],
        *,
        instruction: str | None,
        call: CallOptions,
    ) -> ScoreOutcome:
        task = model.tasks.score
        if task is None:
            raise InvalidInput(f"model {model.id} does not support score (its tasks: {model.tasks.names()})")
        timing = Timing()
        if task.mode == "cross_encoder":
            scorer = await self._adapter(model, call)
            if not isinstance(scorer, PairScorer):
                raise unsupported(model, "score")
            tokenize = partial(scorer.tokenize_pairs, query.text, instruction=instruction)
            texts = [i.text for i in items]
            compute = partial(self._computed, model, tokenize, texts, ScoreOptions(), call, timing, True)
            pairs = [pair_bytes(query.text, text) for text in texts]
            resolved = await self._each(model, scorer, call, (ScoreOptions(), instruction), pairs, compute)
            timing.cache_hits += resolved.hits
            scores = [float(v) for v, _ in resolved.values]
            counted: list[Counted] = [c for _, c in resolved.values]
            truncated = [i.id for i, t in zip(items, counted, strict=True) if t.truncated]
            prompt_tokens = sum(t.length for t in counted)
        else:  # computed from the encode outputs of the query and of each item
            kind = SCORE_OUTPUT[task.mode]
            encoder = await self._adapter(model, call)
            if not isinstance(encoder, TextEncoder):
                raise unsupported(model, "score")
            q_task, d_task = lora_task(model, None, is_query=True), lora_task(model, None, is_query=False)
            queries = EncodeOptions((kind,), is_query=True, lora_task=q_task)
            documents = EncodeOptions((kind,), is_query=False, lora_task=d_task)
            q_instruction = task_instruction(model, q_task, instruction)
            (q_out, q_tokens), (d_out, d_tokens) = await asyncio.gather(
                self._encode_inputs(model, encoder, [query], queries, q_instruction, call, timing),
                self._encode_inputs(
                    model, encoder, items, documents, task_instruction(model, d_task, None), call, timing
                ),
            )
            scores = [similarity(kind, q_out[0][kind], d[kind]) for d in d_out]
            truncated = [i.id for i, t in zip([query, *items], q_tokens + d_tokens, strict=True) if t.truncated]
            prompt_tokens = sum(t.length for t in q_tokens + d_tokens)
        order = sorted(range(len(items)), key=lambda k: -scores[k])
        return ScoreOutcome(
            model=model.id,
            query_id=query.id,
            scores=[(items[k].id, scores[k]) for k in order],
            truncated=truncated,
            prompt_tokens=prompt_tokens,
            timing=timing,
        )

    async def _encode_inputs(
        self,
        model: ModelConfig,
        adapter: TextEncoder,
        inputs: list[TextInput],
        options: EncodeOptions,
        instruction: str | None,
        call: CallOptions,
        timing: Timing,
    ) -> tuple[list[Any], list[Counted]]:
        """Encode outputs and token counts per input, in input order; texts and images run as separate
        groups, each item looked up in the result cache first (``engine/cache_scope.py``)."""
        images = [k for k, i in enumerate(inputs) if i.image is not None]
        texts = [k for k, i in enumerate(inputs) if i.image is None]
        imager = adapter if isinstance(adapter, ImageEncoder) else None
        if images and imager is None:
            raise InvalidInput(f"model {model.id} takes text only, not images")
        runs: list[tuple[list[int], Awaitable[Resolved]]] = []
        if texts:
            tokenize = partial(adapter.encode_tokens, is_query=options.is_query, instruction=instruction)
            words = [inputs[k].text for k in texts]
            compute = partial(self._computed, model, tokenize, words, options, call, timing, True)
            contents = [text_bytes(word) for word in words]
            runs.append((texts, self._each(model, adapter, call, (options, instruction), contents, compute)))
        if images and imager is not None:
            # one call; an unreadable image is named by its item's place in the request
            pictures: list[bytes] = [PlacedImage(inputs[k].image or b"", f"items[{k}].images[0]") for k in images]
            image_options = replace(options, modality="image")
            compute = partial(self._computed, model, imager.image_tokens, pictures, image_options, call, timing, False)
            runs.append((images, self._each(model, adapter, call, (image_options, instruction), pictures, compute)))
        answers: list[Any] = [None] * len(inputs)  # (output, Counted) per input
        for (positions, _), resolved in zip(runs, await asyncio.gather(*(run for _, run in runs)), strict=True):
            timing.cache_hits += resolved.hits
            for k, answer in zip(positions, resolved.values, strict=True):
                answers[k] = answer
        return [a[0] for a in answers], [a[1] for a in answers]

    async def _each(
        self,
        model: ModelConfig,
        adapter: ModelAdapter,
        call: CallOptions,
        params: tuple[object, ...],
        contents: Iterable[bytes],
        compute: Callable[[list[int]], Awaitable[list[Any]]],
    ) -> Resolved:
        """Per item: the cached answer, an identical item's in flight, or ``compute(positions)``."""
        if self.results is None:
            values = await compute(list(range(len(list(contents)))))
            return Resolved(values, computed=len(values))
        return await self.results.each(self.results.scope(model, adapter, call, *params), list(contents), compute)

    async def _computed(
        self,
        model: ModelConfig,
        tokenize: Callable[[list[In]], list[Tokens]],
        inputs: list[In],
        options: BatchOptions,
        call: CallOptions,
        timing: Timing,
        split: bool,
        positions: list[int],
    ) -> list[tuple[Any, Counted]]:
        """The inputs at ``positions`` tokenized and run: each one's result and token count."""
        tokens = await queue.tokenize(self, timing, tokenize, [inputs[k] for k in positions], split=split)
        results = await queue.run(self, model, tokens, options, call, timing)
        return [(r, Counted(t.length, t.truncated)) for r, t in zip(results, tokens, strict=True)]

    async def _adapter(self, model: ModelConfig, call: CallOptions) -> ModelAdapter:
        return await self.pool.acquire(model, wait=call.wait_for_load, timeout_s=self.load_timeout_s)
