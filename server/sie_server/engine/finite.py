"""Non-finite outputs (NaN, Inf): every encode and score result is checked, item by item, before it is
answered (or stored in the result cache).

An item whose output is not finite while its model runs in a reduced precision (fp16, bf16: its torch
modules hold half-precision weights) is run again in float32: a copy of the adapter whose modules and
tensors are float32 copies of its own, built on the batch's lane thread for that run and dropped after
it. The copy is transient and not charged to the memory budget (twice the half-precision weights, for
the length of one rerun: a rare event); where it does not fit, the rerun fails and so does the item.
Its float32 answer is the item's answer when finite. An item still not finite, or one whose model
already runs in float32 (or int8, which has no float32 copy to run), gets its own
``NON_FINITE_OUTPUT``; the other items of its batch are answered as usual, like any other item that
fails on its own (``engine/isolation.py``). Both are counted (``sie_nonfinite_reruns_total``,
``sie_nonfinite_failures_total``).
"""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any, Protocol

import numpy as np

from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.encoder import Encoder
from sie_server.adapters.runtime.options import BatchOptions
from sie_server.catalog.schema import ModelConfig
from sie_server.errors import NonFiniteOutput
from sie_server.observability.metrics import Metrics

log = logging.getLogger(__name__)
CHECKED = frozenset({"encode", "score"})  # the tasks whose outputs are numbers a caller computes with
REDUCED = ("float16", "bfloat16")  # torch dtype names: the precisions an item is run again from


class Item(Protocol):
    """What the check reads of a batch member (the scheduler's ``WorkItem``)."""

    @property
    def model(self) -> ModelConfig: ...

    @property
    def tokens(self) -> Tokens: ...

    @property
    def options(self) -> BatchOptions: ...


def finite(value: Any) -> bool:
    """Whether every number in an item's result is finite (arrays, floats, and dicts, lists and tuples of them;
    anything else holds no number to check)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
    if isinstance(value, float | np.floating):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(finite(v) for v in value)
    return True


def _reduced(value: Any) -> bool:
    import torch

    if isinstance(value, torch.nn.Module):
        return any(str(p.dtype).removeprefix("torch.") in REDUCED for p in (*value.parameters(), *value.buffers()))
    return isinstance(value, torch.Tensor) and str(value.dtype).removeprefix("torch.") in REDUCED


def fp32_twin(adapter: Encoder[Any]) -> Encoder[Any] | None:
    """A shallow copy of ``adapter`` whose half-precision torch modules and tensors are float32 copies (the
    adapter itself untouched: another lane may be running it); None when it holds none (float32 or int8)."""
    changed = {name: copy.deepcopy(value).float() for name, value in vars(adapter).items() if _reduced(value)}
    if not changed:
        return None
    twin = copy.copy(adapter)
    vars(twin).update(changed)
    if getattr(twin, "precision", "fp32") != "fp32":  # the CPU gate's bf16: the adapter's own upcasts follow it
        twin.precision = "fp32"  # type: ignore[attr-defined]
    return twin


def rerun_fp32(adapter: Encoder[Any], batch: list[Tokens], options: BatchOptions) -> list[Any] | None:
    """``batch`` run by the adapter's float32 twin (on the lane's thread); None when it has no twin."""
    twin = fp32_twin(adapter)
    return None if twin is None else twin.run(batch, options)


def precision_of(adapter: Encoder[Any]) -> str:
    report = adapter.precision_report
    return (
        report.running
        if report is not None
        else {"float16": "fp16", "bfloat16": "bf16"}.get(adapter.profile.dtype, "fp32")
    )


class FiniteCheck:
    """Checks a batch's results; reruns and fails the non-finite ones (see the module's doc)."""

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    async def settle(
        self, adapter: Encoder[Any], batch: Sequence[Item], outcomes: list[Any], executor: Executor
    ) -> list[Any]:
        """Each outcome as it is (an exception stays one), a non-finite result replaced by its float32
        rerun's or by a ``NonFiniteOutput``. Never raises: the batch's callers must get their answers."""
        head = batch[0]
        kind = head.options.task
        if kind not in CHECKED:
            return outcomes
        bad = [k for k, o in enumerate(outcomes) if not isinstance(o, BaseException) and not finite(o)]
        if not bad:
            return outcomes
        model_id, precision = head.model.id, precision_of(adapter)
        rerun: list[Any] | None = None
        why = f"in {precision}"
        try:
            loop = asyncio.get_running_loop()
            rerun = await loop.run_in_executor(
                executor, rerun_fp32, adapter, [batch[k].tokens for k in bad], head.options
            )
        except Exception as exc:
            log.exception("%s: running %d non-finite items again in float32 failed", model_id, len(bad))
            why = f"in {precision}; running it again in float32 failed ({type(exc).__name__})"
        if rerun is not None:
            self.metrics.nonfinite_reruns.labels(model_id, kind).inc(len(bad))
            why = f"in {precision} and again when run in float32"
        settled = list(outcomes)
        failed = 0
        for j, k in enumerate(bad):
            if rerun is not None and finite(rerun[j]):
                settled[k] = rerun[j]
                continue
            failed += 1
            settled[k] = NonFiniteOutput(f"model {model_id} gave a non-finite {kind} output (NaN or Inf) {why}")
        if failed:
            self.metrics.nonfinite_failures.labels(model_id, kind).inc(failed)
        log.warning(
            "%s: %d of %d %s items not finite in %s; %d answered from float32, %d failed",
            *(model_id, len(bad), len(batch), kind, precision, len(bad) - failed, failed),
        )
        return settled
