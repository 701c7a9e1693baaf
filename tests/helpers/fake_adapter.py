"""A tiny model-free adapter for engine tests: records its batches, can be slow or run out of memory."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sie_server.adapters.runtime.base import ModelAdapter, Tokens
from sie_server.adapters.runtime.encoder import TextEncoder
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.catalog.schema import ModelConfig, Profile
from sie_server.errors import InvalidInput


class FakeOutOfMemory(RuntimeError):
    def __init__(self) -> None:
        super().__init__("CUDA out of memory (simulated)")


@dataclass
class Behaviour:
    """How the fake models behave; shared by every adapter a factory makes."""

    resident_bytes: dict[str, int] = field(default_factory=dict)  # model id -> bytes after load
    load_delay_s: float = 0.0  # a slow load, on purpose: the behaviour some tests are about
    run_delay_s: float = 0.0  # a slow batch, on purpose: work piles up behind it
    gate: threading.Event | None = None  # when set up, every batch waits for it to open
    fail_load: set[str] = field(default_factory=set)
    oom_above: dict[str, int] = field(default_factory=dict)  # model id -> largest batch that fits
    bad_texts: set[str] = field(default_factory=set)  # tokenizing one of these raises InvalidInput
    loads: list[str] = field(default_factory=list)
    tokenize_calls: list[int] = field(default_factory=list)  # texts per tokenizer call
    started: list[tuple[str, list[int]]] = field(default_factory=list)  # batches begun (before any delay)
    batches: list[tuple[str, list[int]]] = field(default_factory=list)  # batches done: (model, item lengths)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Weights:
    """Stands in for a model's module tree: objects in a reference cycle (parent <-> child)."""

    def __init__(self) -> None:
        self.child = {"parent": self}


class FakeAdapter(TextEncoder):
    def __init__(self, config: ModelConfig, profile: Profile, device: str, behaviour: Behaviour):
        super().__init__(config, profile, device)
        self.behaviour = behaviour
        self.loaded = False

    def load(self, weights: Path) -> None:
        with self.behaviour.lock:
            self.behaviour.loads.append(self.config.id)
        time.sleep(self.behaviour.load_delay_s)
        if self.config.id in self.behaviour.fail_load:
            raise OSError(f"simulated broken weights for {self.config.id}")
        self.weights = Weights()
        self.loaded = True

    def warmup(self) -> None:
        """Nothing to warm up (and no batch recorded before the test's own)."""

    def unload(self) -> None:
        self.loaded = False

    def resident_bytes(self) -> int:
        return self.behaviour.resident_bytes.get(self.config.id, 0) if self.loaded else 0

    def tokenize_texts(self, texts: list[str]) -> list[Tokens]:
        with self.behaviour.lock:
            self.behaviour.tokenize_calls.append(len(texts))
        bad = [t for t in texts if t in self.behaviour.bad_texts]
        if bad:
            raise InvalidInput(f"cannot tokenize {bad[0]!r}")
        return [Tokens(list(range(len(t.split()) + 2)), None, False) for t in texts]

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        assert self.loaded, "ran on an unloaded model"
        limit = self.behaviour.oom_above.get(self.config.id)
        if limit is not None and len(batch) > limit:
            raise FakeOutOfMemory()
        with self.behaviour.lock:
            self.behaviour.started.append((self.config.id, [t.length for t in batch]))
        time.sleep(self.behaviour.run_delay_s)
        if self.behaviour.gate is not None:
            assert self.behaviour.gate.wait(30), "the test never opened the gate"
        with self.behaviour.lock:
            self.behaviour.batches.append((self.config.id, [t.length for t in batch]))
        return [{"dense": np.full(4, t.length, dtype=np.float32)} for t in batch]


def fake_factory(behaviour: Behaviour) -> Any:
    def make(config: ModelConfig, profile: Profile, device: str) -> ModelAdapter:
        return FakeAdapter(config, profile, device, behaviour)

    return make
