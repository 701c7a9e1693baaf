"""Batch-class forward passes give way to live ones on a CPU, at the model's next module.

On a GPU two lanes share the device kernel by kernel. On a CPU they are two threads on the same few
cores and one interpreter lock: a live pass that starts while a batch-class pass runs gets half the
cores and half the lock, and took up to 2.8x its idle time (benchmarks.batch_live). The policy already
holds a batch-class batch back while a live one runs (``--batch-defer-ms``); this covers the other
order. While a live pass runs, a batch-class pass of a torch model stops before its next module
(a layer, a linear, a norm) and goes on when the live pass ends, or when it has waited
``max_pause_s`` in all, so batch work still moves under a steady stream of live calls.

The pause point is torch's global module pre-hook, installed only while a batch-class pass runs
(every module call in the process pays a Python call then; one that runs on another thread returns
at once). Models that are not torch modules (llama.cpp, ONNX) do not pause.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from torch.nn.modules.module import register_module_forward_pre_hook


class LiveGate:
    """What a live pass holds while it runs, and what a batch-class pass pauses on."""

    def __init__(self, max_pause_s: float):
        self.max_pause_s = max_pause_s
        self._quiet = threading.Event()  # set: no live pass runs
        self._quiet.set()
        self._live = 0
        self._lock = threading.Lock()
        self._yielder: int | None = None  # the thread of the batch-class pass that runs now
        self._paused_s = 0.0  # what that pass has waited so far
        self.paused_total_s = 0.0  # seconds all batch-class passes waited
        self.pauses = 0

    @contextlib.contextmanager
    def live(self) -> Iterator[None]:
        """Around a live pass: a batch-class pass beside it stops at its next module until this ends."""
        with self._lock:
            self._live += 1
            self._quiet.clear()
        try:
            yield
        finally:
            with self._lock:
                self._live -= 1
                if not self._live:
                    self._quiet.set()

    @contextlib.contextmanager
    def yielding(self) -> Iterator[None]:
        """Around a batch-class pass on this thread: it pauses before a module while a live pass runs."""
        self._yielder, self._paused_s = threading.get_ident(), 0.0
        handle = register_module_forward_pre_hook(self._before_module)
        try:
            yield
        finally:
            handle.remove()
            self._yielder = None

    def _before_module(self, module: Any, args: Any) -> None:
        if self._quiet.is_set() or threading.get_ident() != self._yielder:
            return
        left = self.max_pause_s - self._paused_s
        if left <= 0:
            return
        started = time.perf_counter()
        self._quiet.wait(left)
        waited = time.perf_counter() - started
        self._paused_s += waited
        self.paused_total_s += waited
        self.pauses += 1


__all__ = ["LiveGate"]
