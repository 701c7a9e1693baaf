"""A running sequence of the decode loop: its prompt, sampling parameters, tokens and text so far, and the
queue its stream reads deltas from."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from sie_server.adapters.runtime.generator import Detokenizer
from sie_server.engine.grammar import Constraint, GrammarSpec
from sie_server.errors import SIEError
from sie_server.observability import tracing


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    grammar: GrammarSpec | None = None  # the output must match it (engine/grammar.py)
    # OpenAI's: each token's logit less frequency_penalty per time it was generated, and presence_penalty once
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0

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
    constraint: Constraint | None = None  # its grammar's state, when its params have one
    tool_format: str | None = None  # when tools were offered: the format its prompt and answer are in
    queued_at: float = field(default_factory=time.monotonic)
    admitted_at: float | None = None  # when it joined the running batch
    trace: Any = field(default_factory=tracing.current)  # its request's span (None when tracing is off)
    loop: asyncio.AbstractEventLoop | None = None  # the event loop its stream reads on, once it is decoded
    loop_thread: int = 0

    @property
    def budget_tokens(self) -> int:
        return len(self.prompt_ids) + self.params.max_new_tokens

    @property
    def done(self) -> bool:
        """Finished, abandoned by its caller, or failed: it leaves the batch."""
        return self.finish_reason is not None or self.cancelled or self.error is not None

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
            self.send(self.text[self.emitted : stable])
            self.emitted = stable

    def send(self, delta: str | None) -> None:
        """Queue a delta for the stream (None: it ends), from the event loop's thread or the decode thread."""
        if self.loop is None or threading.get_ident() == self.loop_thread:
            self.deltas.put_nowait(delta)
        else:
            self.loop.call_soon_threadsafe(self.deltas.put_nowait, delta)
