"""Generation: one decode loop per model that batches every active sequence step by step.

New requests join between steps (they are prefilled together and merged into the running
batch), finished or abandoned ones leave between steps, and the tokens a batch may hold
(prompt + max_new_tokens of every active sequence) stay within the model's
``max_batch_tokens`` — the KV cache the memory budget charged for.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from sie_server.adapters.base import ModelAdapter
from sie_server.adapters.generator import Detokenizer, Generator, StreamingGenerator
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import InferenceError, InvalidInput, ResourceExhausted, SIEError
from sie_server.memory.pool import ModelPool
from sie_server.observability.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None

    @property
    def hold_back(self) -> int:
        """Characters a stream keeps back while they could still be the start of a stop string."""
        return max((len(s) for s in self.stop), default=1) - 1


@dataclass(eq=False)
class Sequence:
    prompt_ids: list[int]
    params: SamplingParams
    generated: list[int] = field(default_factory=list)
    text: str = ""
    emitted: int = 0  # characters of text already sent
    finish_reason: str | None = None
    deltas: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    cancelled: bool = False
    generator: torch.Generator | None = None
    error: SIEError | None = None
    completion_tokens: int | None = None  # when the backend counts them itself (SGLang)
    detokenizer: Detokenizer | None = None
    queued_at: float = field(default_factory=time.monotonic)

    @property
    def budget_tokens(self) -> int:
        return len(self.prompt_ids) + self.params.max_new_tokens

    @property
    def position(self) -> int:
        return len(self.prompt_ids) + len(self.generated) - 1

    def append(self, piece: str) -> None:
        """Add decoded text, cut it at the first stop string, and queue what is safe to send."""
        if piece:
            searched_from = max(0, len(self.text) - self.params.hold_back)
            self.text += piece
            found = [at for stop in self.params.stop if (at := self.text.find(stop, searched_from)) >= 0]
            if found:
                self.text, self.finish_reason = self.text[: min(found)], "stop"
        stable = len(self.text) if self.finish_reason else len(self.text) - self.params.hold_back
        if stable > self.emitted:
            self.deltas.put_nowait(self.text[self.emitted : stable])
            self.emitted = stable


def sample(logits: torch.Tensor, rows: list[Sequence]) -> list[int]:
    """The next token of every row at once: argmax for greedy rows; temperature and top-p applied
    to all sampled rows together, then one draw per row (a seeded row draws from its own generator,
    so its output does not depend on what else is in the batch)."""
    if logits.device.type == "cpu":  # numpy's argmax: no wake-up of torch's thread pool beside llama.cpp's
        chosen = torch.from_numpy(logits.numpy().argmax(-1))
    else:
        chosen = torch.argmax(logits, dim=-1)
    sampled = [i for i, s in enumerate(rows) if s.params.temperature > 0]
    if sampled:
        index = torch.tensor(sampled, device=logits.device)
        temperature = torch.tensor(
            [rows[i].params.temperature for i in sampled], dtype=logits.dtype, device=logits.device
        )
        probs = torch.softmax(logits[index] / temperature.unsqueeze(1), dim=-1)
        top_p = torch.tensor([rows[i].params.top_p for i in sampled], dtype=probs.dtype, device=probs.device)
        if bool((top_p < 1.0).any()):
            ordered, order = torch.sort(probs, dim=-1, descending=True)
            drop = ordered.cumsum(-1) - ordered >= top_p.unsqueeze(1)
            probs = probs.scatter(-1, order, ordered.masked_fill(drop, 0.0))
        free = [k for k, i in enumerate(sampled) if rows[i].generator is None]
        if free:
            chosen[index[free]] = torch.multinomial(probs[free], 1).squeeze(1)
        for k, i in enumerate(sampled):
            if rows[i].generator is not None:
                chosen[i] = torch.multinomial(probs[k].cpu(), 1, generator=rows[i].generator)[0]  # a CPU generator
    return [int(t) for t in chosen.tolist()]


def generator(model: ModelConfig, adapter: ModelAdapter) -> Generator:
    """The loaded model as a generator; an encoder's model is the caller's mistake (400)."""
    if not isinstance(adapter, Generator):
        raise InvalidInput(f"model {model.id} does not support generate")
    return adapter


def _join(adapter: Generator, batch: Any, prompts: list[list[int]]) -> tuple[Any, torch.Tensor]:
    """Prefill new sequences and merge them into the running batch, on the decode thread: every tensor
    operation of a model stays on one thread (one OpenMP team, not one per calling thread)."""
    joined, logits = adapter.prefill(prompts)
    return adapter.merge(batch, joined), logits


class DecodeLoop:
    """The sequences of one model and the task that steps them."""

    def __init__(
        self,
        config: ModelConfig,
        pool: ModelPool,
        executor: ThreadPoolExecutor,
        budget: int,
        metrics: Metrics,
        *,
        wait_s: float,
    ):
        self.metrics = metrics
        self.config = config
        self.pool = pool
        self.executor = executor
        self.budget = budget
        self.wait_s = wait_s
        self.waiting: deque[Sequence] = deque()
        self.active: list[Sequence] = []
        self.batch: Any = None
        self.task: asyncio.Task[None] | None = None
        self.steps = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run(), name=f"decode:{self.config.id}")

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.active)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        adapter: Generator | None = None
        try:
            while self.waiting or self.active:
                adapter = generator(self.config, await self.pool.acquire(self.config, wait=True, timeout_s=300))
                self._drop_cancelled()
                joining = self._admit(adapter)
                if joining:
                    self.batch, logits = await loop.run_in_executor(
                        self.executor, _join, adapter, self.batch, [s.prompt_ids for s in joining]
                    )
                    self.active.extend(joining)
                    self._advance(adapter, joining, logits)
                elif self.active and self.batch is not None:
                    tokens = [s.generated[-1] for s in self.active]
                    positions = [s.position for s in self.active]
                    logits = await loop.run_in_executor(self.executor, adapter.decode, self.batch, tokens, positions)
                    self.steps += 1
                    self.metrics.batch_items.labels(self.config.id).observe(len(self.active))
                    self._advance(adapter, self.active, logits)
                await self._retire(adapter)
                self._expire_waiting()
                if not self.active and self.waiting and not self._admit_possible():
                    raise InvalidInput("a request needs more tokens than the model's batch budget")
        except SIEError as exc:
            self._fail_all(exc)
        except Exception as exc:
            log.exception("decode loop of %s failed", self.config.id)
            self._fail_all(InferenceError(f"model {self.config.id} failed while generating ({type(exc).__name__})"))
        finally:
            if self.batch is not None and adapter is not None:
                adapter.discard(self.batch)
            self.batch = None

    def _admit_possible(self) -> bool:
        return bool(self.waiting) and self.waiting[0].budget_tokens <= self.budget

    def _admit(self, adapter: Generator) -> list[Sequence]:
        """Waiting sequences that fit beside the running ones (tokens and rows), oldest first."""
        used = sum(s.budget_tokens for s in self.active)
        rows = adapter.max_rows if adapter.max_rows is not None else len(self.waiting) + len(self.active)
        joining: list[Sequence] = []
        while (
            self.waiting
            and used + self.waiting[0].budget_tokens <= self.budget
            and len(self.active) + len(joining) < rows
        ):
            seq = self.waiting.popleft()
            used += seq.budget_tokens
            seq.detokenizer = adapter.detokenizer()
            joining.append(seq)
        return joining

    def _expire_waiting(self) -> None:
        """Sequences that found no room in the running batch (its KV cache) within the wait limit."""
        deadline = time.monotonic() - self.wait_s
        while self.waiting and self.active and self.waiting[0].queued_at < deadline:
            seq = self.waiting.popleft()
            seq.error = ResourceExhausted(
                f"model {self.config.id}: no room in its KV cache ({self.budget} tokens, held by "
                f"{len(self.active)} running sequences) for {self.wait_s:.0f}s; retry shortly",
                retry_after=1.0,
            )
            seq.deltas.put_nowait(None)

    def _advance(self, adapter: Generator, rows: list[Sequence], logits: torch.Tensor) -> None:
        for seq, token in zip(rows, sample(logits, rows), strict=True):
            assert seq.detokenizer is not None
            if token in adapter.eos_ids:
                seq.finish_reason = "stop"
                seq.append(seq.detokenizer.flush())
                continue
            seq.generated.append(token)
            piece = seq.detokenizer.add(token)
            if len(seq.generated) >= seq.params.max_new_tokens:
                piece += seq.detokenizer.flush()
                seq.append(piece)
                seq.finish_reason = seq.finish_reason or "length"
                seq.append("")
            else:
                seq.append(piece)

    async def _retire(self, adapter: Generator) -> None:
        keep = [i for i, s in enumerate(self.active) if s.finish_reason is None and not s.cancelled]
        for seq in self.active:
            if seq.finish_reason is not None or seq.cancelled:
                seq.deltas.put_nowait(None)
        if len(keep) != len(self.active) and self.batch is not None:
            self.active = [self.active[i] for i in keep]
            self.batch = await asyncio.get_running_loop().run_in_executor(self.executor, adapter.keep, self.batch, keep)

    def _drop_cancelled(self) -> None:
        self.waiting = deque(s for s in self.waiting if not s.cancelled)

    def _fail_all(self, exc: SIEError) -> None:
        for seq in [*self.active, *self.waiting]:
            seq.error = exc
            seq.deltas.put_nowait(None)
        self.active, self.waiting = [], deque()


class GenerationService:
    """Starts sequences on their model's decode loop and streams their text back."""

    def __init__(self, pool: ModelPool, load_timeout_s: float):
        self.pool = pool
        self.load_timeout_s = load_timeout_s
        self.loops: dict[str, DecodeLoop] = {}
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="sie-decode")
        self._native_tasks: set[asyncio.Task[None]] = set()

    def busy(self, model_id: str) -> bool:
        loop = self.loops.get(model_id)
        return loop is not None and loop.busy

    async def start(
        self,
        model: ModelConfig,
        *,
        prompt: str | None,
        messages: list[dict[str, str]] | None,
        params: SamplingParams,
        wait_for_load: bool,
    ) -> tuple[Sequence, Generator]:
        adapter = generator(model, await self.pool.acquire(model, wait=wait_for_load, timeout_s=self.load_timeout_s))
        ids = await asyncio.to_thread(adapter.prompt_ids, prompt, messages)
        if not ids:
            raise InvalidInput("the prompt is empty")
        budget = model.profile(self.pool.device_kind).max_batch_tokens
        total = len(ids) + params.max_new_tokens
        if len(ids) + params.max_new_tokens > adapter.context_length:
            raise InvalidInput(
                f"prompt ({len(ids)} tokens) + max_new_tokens ({params.max_new_tokens}) exceeds model "
                f"{model.id}'s context length of {adapter.context_length} tokens"
            )
        if total > budget:
            raise InvalidInput(
                f"prompt + max_new_tokens is {total} tokens; model {model.id} serves at most {budget} per sequence"
            )
        seq = Sequence(ids, params)
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
