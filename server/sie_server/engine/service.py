"""Encode, score and extract (what ``engine/frontdoor.py`` asks for), expressed as work items on the shared queue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from sie_server.adapters.extractors.gliner2 import Gliner2Adapter
from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.encoder import ImageEncoder, PairScorer, SpanExtractor, TextEncoder
from sie_server.adapters.runtime.images import PlacedImage
from sie_server.adapters.runtime.options import (
    BatchOptions,
    EncodeOptions,
    ExtractOptions,
    OutputType,
    ScoreOptions,
    canonical_outputs,
)
from sie_server.catalog.loader import Catalog
from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.requests import ExtractSchema
from sie_server.engine.cache_scope import Counted, ItemCache, pair_bytes, text_bytes
from sie_server.engine.coalescing import Resolved
from sie_server.engine.long_encode import LongInputs
from sie_server.engine.long_inputs import cut
from sie_server.engine.lora_tasks import lora_task, task_instruction
from sie_server.engine.outcomes import EncodeOutcome, ExtractOutcome, ScoreOutcome, TextInput, Timing
from sie_server.engine.outputs import requested
from sie_server.engine.scheduler import Scheduler, WorkItem
from sie_server.engine.similarity import similarity
from sie_server.engine.tokenizing import TokenizerThread
from sie_server.errors import ErrorCode, InvalidInput, SIEError
from sie_server.memory.pool import ModelPool

In = TypeVar("In")
SCORE_OUTPUT: dict[str, OutputType] = {"bi_encoder": "dense", "maxsim": "multivector", "sparse_dot": "sparse"}
__all__ = [  # the outcomes (engine/outcomes.py) are read through this module too
    "SCORE_OUTPUT",
    "CallOptions",
    "CallerGone",
    "EncodeOutcome",
    "ExtractOutcome",
    "InferenceService",
    "ScoreOutcome",
    "TextInput",
    "Timing",
    "unsupported",
]


def unsupported(model: ModelConfig, task: str) -> InvalidInput:
    """A task the loaded model's family does not do (the catalog declared it, the adapter disagrees)."""
    return InvalidInput(f"model {model.id} does not support {task} (its adapter is {model.adapter})")


class CallerGone(SIEError):
    """The client disconnected before its answer was ready (nobody reads this error)."""

    code = ErrorCode.INVALID_INPUT

    def __init__(self) -> None:
        super().__init__("client disconnected", status=499)


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

    async def extract(
        self,
        model: ModelConfig,
        items: list[TextInput],
        *,
        labels: list[str] | None,
        threshold: float | None,
        call: CallOptions,
        schema: ExtractSchema | None = None,
    ) -> ExtractOutcome:
        task = model.tasks.extract
        if task is None:
            raise InvalidInput(f"model {model.id} does not support extract (its tasks: {model.tasks.names()})")
        if schema is not None:
            return await self._extract_schema(model, items, schema, labels, threshold, call)
        if labels is None:
            raise InvalidInput('params.labels is required: the entity types to find, e.g. ["company", "amount"]')
        if not labels:
            raise InvalidInput('params.labels must name at least one entity type, e.g. ["company", "amount"]')
        if len(labels) > task.max_labels:
            raise InvalidInput(f"{len(labels)} labels; model {model.id} takes at most {task.max_labels} per request")
        if any(not label.strip() for label in labels):
            raise InvalidInput("every label must be a non-empty string")
        for i, item in enumerate(items):
            if not item.text.strip():
                raise InvalidInput(f"items[{i}] has no characters to extract from")
        timing = Timing()
        adapter = await self._adapter(model, call)
        if not isinstance(adapter, SpanExtractor):
            raise unsupported(model, "extract")
        # one call: each window names its item by position in the list the adapter was given
        windows = await self._tokenize(timing, adapter.windows, [i.text for i in items], split=False)
        options = ExtractOptions(labels=tuple(labels), threshold=task.threshold if threshold is None else threshold)
        found = await self._run(model, windows, options, call, timing)
        entities = adapter.merge(len(items), windows, found)
        return ExtractOutcome(model.id, [i.id for i in items], entities, timing)

    async def _extract_schema(
        self,
        model: ModelConfig,
        items: list[TextInput],
        schema: ExtractSchema,
        labels: list[str] | None,
        threshold: float | None,
        call: CallOptions,
    ) -> ExtractOutcome:
        """GLiNER2 schema extraction: one pass per window answers the whole schema."""
        task = model.tasks.extract
        assert task is not None
        if model.adapter != "gliner2":
            raise InvalidInput(f"params.schema is for GLiNER2 models; model {model.id} is {model.adapter}")
        if labels is not None:
            raise InvalidInput("give params.labels or params.schema (its entities), not both")
        for part, count in schema.names().items():
            if count > task.max_labels:
                raise InvalidInput(
                    f"params.schema.{part}: {count} names; model {model.id} takes at most {task.max_labels}"
                )
        for i, item in enumerate(items):
            if not item.text.strip():
                raise InvalidInput(f"items[{i}] has no characters to extract from")
        timing = Timing()
        adapter = await self._adapter(model, call)
        if not isinstance(adapter, Gliner2Adapter):
            raise unsupported(model, "extract with params.schema")
        windows = await self._tokenize(timing, adapter.windows, [i.text for i in items], split=False)
        wire = schema.model_dump_json(exclude_none=True)
        names = tuple(schema.entities or ())
        limit = task.threshold if threshold is None else threshold
        found = await self._run(
            model, windows, ExtractOptions(labels=names, threshold=limit, schema=wire), call, timing
        )
        entities = adapter.merge(len(items), windows, found)
        results = adapter.merge_schema(len(items), windows, found, wire)
        return ExtractOutcome(model.id, [i.id for i in items], entities, timing, results)

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
        tokens = await self._tokenize(timing, tokenize, [inputs[k] for k in positions], split=split)
        results = await self._run(model, tokens, options, call, timing)
        return [(r, Counted(t.length, t.truncated)) for r, t in zip(results, tokens, strict=True)]

    async def _adapter(self, model: ModelConfig, call: CallOptions) -> ModelAdapter:
        return await self.pool.acquire(model, wait=call.wait_for_load, timeout_s=self.load_timeout_s)

    @staticmethod
    async def _await(items: list[WorkItem], call: CallOptions) -> list[Any]:
        """The items' results in order; CallerGone (and the items dropped) if the caller leaves first."""
        single = len(items) == 1  # the common case under many clients: no gather around one future
        answer: asyncio.Future[Any] = items[0].future if single else asyncio.gather(*(i.future for i in items))
        if call.disconnected is None:
            result = await answer
            return [result] if single else list(result)
        watcher: asyncio.Future[Any] = asyncio.ensure_future(call.disconnected())
        watcher.add_done_callback(lambda w: w.cancelled() or answer.cancel())  # gone: drop the queued items
        try:
            result = await answer
        except asyncio.CancelledError:
            if watcher.done() and not watcher.cancelled():
                raise CallerGone() from None
            raise
        finally:
            watcher.cancel()
        return [result] if single else list(result)

    async def _tokenize(
        self, timing: Timing, fn: Callable[[list[In]], list[Tokens]], inputs: list[In], *, split: bool = True
    ) -> list[Tokens]:
        """``fn(inputs)`` on the tokenizer thread (off the event loop); see ``TokenizerThread.run``."""
        started = time.perf_counter()
        tokens = await self.tokenizer.run(fn, inputs, split=split)
        timing.tokenization_ms += (time.perf_counter() - started) * 1000
        return tokens

    async def _run(
        self,
        model: ModelConfig,
        tokens: list[Tokens],
        options: BatchOptions,
        call: CallOptions,
        timing: Timing,
    ) -> list[Any]:
        loop = asyncio.get_running_loop()
        items = [WorkItem(model, t, options, loop.create_future(), priority=call.priority) for t in tokens]
        self.scheduler.submit(items)
        try:
            results = await self._await(items, call)
        except BaseException:
            for item in items:
                item.future.cancel()
            raise
        first_start = min(i.started_at for i in items)
        timing.queue_ms += (first_start - min(i.enqueued_at for i in items)) * 1000
        timing.inference_ms += (max(i.finished_at for i in items) - first_start) * 1000
        return list(results)
