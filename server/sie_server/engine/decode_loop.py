"""The decode loop: one per model, it batches every active sequence of the model step by step.

New requests join between steps (they are prefilled together and merged into the running
batch), finished or abandoned ones leave between steps, and the tokens a batch may hold
(prompt + max_new_tokens of every active sequence) stay within the model's
``max_batch_tokens`` — the KV cache the memory budget charged for.

A prompt that arrives while others decode is read in steps of about ``READ_STEP_TOKENS`` tokens with
one decode step of the running sequences after each (``Generator.prefill_steps``), so a 2,000-token RAG
prompt delays their next tokens by a step's read, not by the whole read; with nothing running it is read
at once. New sequences wait while one group is being read.

While no sequence waits, ends or joins, the decode thread runs up to ``BURST_STEPS`` steps back to back
(``_burst``), taking each step's tokens and sending each stream its text as it comes (``Sequence.send``), so
the event loop is not woken in between to start the next step. Meanwhile the event loop only reads the
sequences' flags (a caller that left) and adds new sequences to ``waiting``, which ends the burst.

One sequence's failure stays with it: a row that cannot be sampled or decoded ends with its own
error, and a prefill or decode step that fails as a whole is run again for each sequence alone
(engine/isolation.py), so only those that fail on their own get the error and the others go on.

Every tensor operation of a model, sampling included, runs on its decode thread, none on the event
loop's: one OpenMP team per thread that computes, and compute_thread.py says why fewer is faster on CPU.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from concurrent.futures import Executor, Future
from typing import Any

import torch

from sie_server.adapters.runtime.base import ModelAdapter
from sie_server.adapters.runtime.generator import Generator, PrefillSteps
from sie_server.catalog.schema import ModelConfig
from sie_server.engine import isolation
from sie_server.engine.sampling import sample_rows
from sie_server.engine.sequences import Sequence
from sie_server.errors import InferenceError, InvalidInput, ResourceExhausted, SIEError
from sie_server.memory.pool import ModelPool
from sie_server.observability import tracing
from sie_server.observability.metrics import Metrics

log = logging.getLogger(__name__)

# prompt tokens read between two decode steps of the running sequences while a prompt joins them: the gap
# between their tokens is about this read plus a step (benchmarks/decode_gap.py measures it)
READ_STEP_TOKENS = 128
# decode steps the decode thread runs back to back before the event loop looks at the batch again, when no sequence
# waits, ends or joins: one hop through the event loop per step cost ~10% of one stream's speed (benchmarks/RESULTS.md)
BURST_STEPS = 32


def generator(model: ModelConfig, adapter: ModelAdapter) -> Generator:
    """The loaded model as a generator; an encoder's model is the caller's mistake (400)."""
    if not isinstance(adapter, Generator):
        raise InvalidInput(f"model {model.id} does not support generate")
    return adapter


def _join(adapter: Generator, batch: Any, rows: list[Sequence], model_id: str) -> tuple[Any, list[int | SIEError]]:
    """Prefill new sequences, merge them into the running batch and sample their first tokens."""
    joined, logits = adapter.prefill([s.prompt_ids for s in rows])
    return adapter.merge(batch, joined), sample_rows(logits, rows, model_id)


def _read(
    adapter: Generator, batch: Any, steps: PrefillSteps, rows: list[Sequence], model_id: str
) -> tuple[Any, list[int | SIEError]] | None:
    """One step of a stepwise prefill; once it is done, the running batch with its rows merged in and their
    first tokens (else None)."""
    try:
        next(steps)
    except StopIteration as done:
        joined, logits = done.value
        return adapter.merge(batch, joined), sample_rows(logits, rows, model_id)
    return None


def _decode(adapter: Generator, batch: Any, rows: list[Sequence], model_id: str) -> list[int | SIEError]:
    """One decode step of the running rows and their next tokens."""
    logits = adapter.decode(batch, [s.generated[-1] for s in rows], [s.position for s in rows])
    return sample_rows(logits, rows, model_id)


class DecodeLoop:
    """The sequences of one model and the task that steps them."""

    def __init__(
        self,
        config: ModelConfig,
        pool: ModelPool,
        executor: Executor,
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
        self.reading: tuple[list[Sequence], PrefillSteps] | None = None  # sequences joining, read in steps
        self.task: asyncio.Task[None] | None = None
        self.stopping = False  # the task is ending: a burst stops at its next step
        self.steps = 0
        self._freeing: list[Future[Any]] = []  # cells being freed on the decode thread after the task ended

    def add(self, seq: Sequence) -> None:
        seq.loop, seq.loop_thread = asyncio.get_running_loop(), threading.get_ident()
        self.waiting.append(seq)
        if self.task is None or self.task.done():
            self.stopping = False
            self.task = asyncio.get_running_loop().create_task(self._run(), name=f"decode:{self.config.id}")

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.active or self.reading)

    @property
    def holds_model(self) -> bool:
        """Busy, or its task still running, or the cells it left still being freed on the decode thread: the
        model must not be unloaded yet (llama.cpp's seq_rm on a context freed by an eviction crashed the
        server, SIGSEGV, about one eviction in ten right after a generate; benchmarks/memory_cycles.py)."""
        self._freeing = [f for f in self._freeing if not f.done()]
        return self.busy or bool(self._freeing) or (self.task is not None and not self.task.done())

    async def _run(self) -> None:
        adapter: Generator | None = None
        try:
            while self.waiting or self.active or self.reading:
                acquired = await self.pool.acquire(self.config, wait=True, timeout_s=300, request=False)
                adapter = generator(self.config, acquired)
                self._drop_cancelled()
                joining = self._admit(adapter) if self.reading is None else []
                joined = False
                if joining and not self.active:
                    await self._prefill(adapter, joining)
                    joined = True
                elif joining:
                    self.reading = joining, adapter.prefill_steps([s.prompt_ids for s in joining], READ_STEP_TOKENS)
                if self.reading is not None:
                    joined = await self._read_step(adapter)
                if not joined and self.active and self.batch is not None:
                    await self._step(adapter)
                await self._retire(adapter)
                self._expire_waiting()
                if not self.active and self.waiting and not self._admit_possible():
                    raise InvalidInput("a request needs more tokens than the model's batch budget")
        except SIEError as exc:
            self._fail_all(exc)
        except Exception as exc:
            log.exception("decode loop of %s failed", self.config.id)
            self._fail_all(InferenceError(f"model {self.config.id} failed while generating ({type(exc).__name__})"))
        finally:  # the cells are freed on the decode thread, after a step or burst still running there
            self.stopping = True
            if self.reading is not None:
                self._freeing.append(self.executor.submit(self.reading[1].close))
                self.reading = None
            if self.batch is not None and adapter is not None:
                self._freeing.append(self.executor.submit(adapter.discard, self.batch))
            self.batch = None

    async def _read_step(self, adapter: Generator) -> bool:
        """One step of the prompts being read; True when they are read and their sequences joined the batch.
        If a step fails, the joining sequences are read again each alone (``_prefill``'s isolation)."""
        assert self.reading is not None
        joining, steps = self.reading
        loop = asyncio.get_running_loop()
        try:
            done = await loop.run_in_executor(self.executor, _read, adapter, self.batch, steps, joining, self.config.id)
        except Exception as exc:  # the traceback is logged once, by the sequence that fails alone
            self.reading = None
            log.warning("reading %d prompts for %s failed (%r); each alone", len(joining), self.config.id, exc)
            await self._prefill_apart(adapter, joining)
            return True
        if done is None:
            return False
        self.reading = None
        self.batch, picks = done
        self.active.extend(joining)
        self._advance(adapter, joining, picks)
        return True

    async def _prefill(self, adapter: Generator, joining: list[Sequence]) -> None:
        """Prefill the joining sequences together; if that fails, each alone (the running batch is untouched)."""
        loop = asyncio.get_running_loop()
        try:
            self.batch, picks = await loop.run_in_executor(
                self.executor, _join, adapter, self.batch, joining, self.config.id
            )
        except Exception as exc:  # the traceback is logged once, by the sequence that fails alone
            log.warning("prefill of %d sequences for %s failed (%r); each alone", len(joining), self.config.id, exc)
            await self._prefill_apart(adapter, joining)
            return
        self.active.extend(joining)
        self._advance(adapter, joining, picks)

    async def _prefill_apart(self, adapter: Generator, joining: list[Sequence]) -> None:
        """Each joining sequence prefilled alone, after their prefill together failed: those that fail alone end
        with their own error, the others join the batch."""
        self.metrics.isolation_retries.labels(self.config.id, "prefill").inc()
        self.batch, outcomes = await asyncio.get_running_loop().run_in_executor(
            self.executor, isolation.prefill_apart, adapter, self.batch, [s.prompt_ids for s in joining]
        )
        joining = self._keep_served(joining, outcomes)
        if joining:
            picks = await self._sample(isolation.stack(outcomes), joining)
            self.active.extend(joining)
            self._advance(adapter, joining, picks)

    async def _step(self, adapter: Generator) -> None:
        """One decode step of every running sequence; if it fails, each sequence runs the step alone
        and the batch is rebuilt from those that succeed."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self._burst, adapter)
            return
        except Exception as exc:  # the traceback is logged once, by the sequence that fails alone
            log.warning(
                "decode step of %d sequences for %s failed (%r); each alone", len(self.active), self.config.id, exc
            )
            self.metrics.isolation_retries.labels(self.config.id, "decode").inc()
            rows = [(s.prompt_ids + s.generated[:-1], s.generated[-1], s.position) for s in self.active]
            batch, self.batch = self.batch, None
            self.batch, outcomes = await loop.run_in_executor(
                self.executor, isolation.decode_apart, adapter, batch, rows
            )
            self.active = self._keep_served(self.active, outcomes)
            if not self.active:
                return
            picks = await self._sample(isolation.stack(outcomes), self.active)
        self.steps += 1
        self.metrics.batch_items.labels(self.config.id).observe(len(self.active))
        self._advance(adapter, self.active, picks)

    def _burst(self, adapter: Generator) -> None:
        """Decode steps back to back on the decode thread, each one's tokens taken and sent to the streams, until a
        sequence is done or waits to join, a prompt is being read or the loop stops, or ``BURST_STEPS`` are run."""
        for _ in range(BURST_STEPS):
            picks = _decode(adapter, self.batch, self.active, self.config.id)
            self.steps += 1
            self.metrics.batch_items.labels(self.config.id).observe(len(self.active))
            self._advance(adapter, self.active, picks)
            if self.waiting or self.reading is not None or self.stopping or any(s.done for s in self.active):
                return

    async def _sample(self, logits: torch.Tensor, rows: list[Sequence]) -> list[int | SIEError]:
        """The rows' next tokens from logits the isolation path stacked, sampled on the decode thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, sample_rows, logits, rows, self.config.id)

    def _keep_served(self, rows: list[Sequence], outcomes: list[object]) -> list[Sequence]:
        """The rows whose step succeeded alone; the others end with their own error."""
        settled = isolation.settle(outcomes, self.config.id)
        for seq, outcome in zip(rows, settled, strict=True):
            if isinstance(outcome, SIEError):
                self._end(seq, outcome)
        return [seq for seq, outcome in zip(rows, settled, strict=True) if not isinstance(outcome, SIEError)]

    @staticmethod
    def _end(seq: Sequence, error: SIEError) -> None:
        """A sequence that failed on its own: its error, and the end of its stream (it leaves the batch at retire)."""
        if seq.error is None:
            seq.error = error
            seq.send(None)

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
            seq.detokenizer, seq.admitted_at = adapter.detokenizer(), time.monotonic()
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

    def _advance(self, adapter: Generator, rows: list[Sequence], picks: list[int | SIEError]) -> None:
        for seq, token in zip(rows, picks, strict=True):
            if isinstance(token, SIEError):
                self._end(seq, token)
                continue
            try:
                self._add(adapter, seq, token)
            except Exception as exc:
                log.exception("%s: turning a token into text failed for one sequence", self.config.id)
                self._end(seq, InferenceError(f"model {self.config.id} failed decoding a token ({type(exc).__name__})"))

    @staticmethod
    def _add(adapter: Generator, seq: Sequence, token: int) -> None:
        assert seq.detokenizer is not None
        if seq.constraint is not None:
            seq.constraint.take(token)
        if token in adapter.eos_ids:
            seq.finish_reason = "stop"
            seq.append(seq.detokenizer.flush())
            return
        seq.generated.append(token)
        piece = seq.detokenizer.add(token)
        if seq.constraint is not None and seq.constraint.finished:  # the grammar is complete: nothing may follow
            seq.append(piece + seq.detokenizer.flush())
            seq.finish_reason = seq.finish_reason or "stop"
            seq.append("")
        elif len(seq.generated) >= seq.params.max_new_tokens:
            piece += seq.detokenizer.flush()
            seq.append(piece)
            seq.finish_reason = seq.finish_reason or "length"
            seq.append("")
        else:
            seq.append(piece)

    async def _retire(self, adapter: Generator) -> None:
        keep = [i for i, s in enumerate(self.active) if not s.done]
        for seq in self.active:
            if seq.done and seq.error is None:  # a failed one's stream has ended already
                seq.deltas.put_nowait(None)
            if seq.done:
                tracing.generation_spans(seq.trace, self.config.id, seq.queued_at, seq.admitted_at, len(seq.generated))
        if len(keep) != len(self.active) and self.batch is not None:
            self.active = [self.active[i] for i in keep]
            self.batch = await asyncio.get_running_loop().run_in_executor(self.executor, adapter.keep, self.batch, keep)

    def _drop_cancelled(self) -> None:
        self.waiting = deque(s for s in self.waiting if not s.cancelled)

    def _fail_all(self, exc: SIEError) -> None:
        for seq in [*self.active, *(self.reading[0] if self.reading else []), *self.waiting]:
            self._end(seq, exc)
        self.active, self.waiting = [], deque()
