"""Fault-injecting adapters for server-process tests, named in a test catalog as
``adapter: tests.helpers.fault_adapters:Class``. They live in tests/, never in the server."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.encoders.embedding import EmbeddingAdapter
from sie_server.adapters.generators.causal_lm import CausalLMAdapter, DecodeBatch
from sie_server.adapters.generators.llamacpp import LlamaCppAdapter, SeqBatch
from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.generator import PrefillSteps
from sie_server.adapters.runtime.media import Found, MediaExtractor
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput, MediaOptions

SLOW_BATCH_S = 0.25
SLOW_LOAD_S = 3.0
SLOW_PICTURE_S = 4.0


class SlowEmbedding(EmbeddingAdapter):
    """Every batch takes at least SLOW_BATCH_S, so work piles up behind it."""

    batch_s = SLOW_BATCH_S

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        time.sleep(self.batch_s)
        return super().run(batch, options)


class SlowerEmbedding(SlowEmbedding):
    """Every batch takes 2 s: long enough for a test to see work waiting behind it on a loaded machine."""

    batch_s = 2.0


class FlakyLoad(EmbeddingAdapter):
    """Fails to load until a file named READY exists beside the weights."""

    def load(self, weights: Path) -> None:
        if not (weights / "READY").exists():
            raise OSError(f"simulated corrupt weights in {weights} (no READY file)")
        super().load(weights)


class EndlessSlowLM(CausalLMAdapter):
    """Never emits end-of-sequence and takes 20 ms a decode step: a generation that only stops when told."""

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.eos_ids = frozenset()

    def decode(self, batch: DecodeBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        time.sleep(0.02)
        return super().decode(batch, tokens, positions)


class CrashingEmbedding(EmbeddingAdapter):
    """Kills its whole process the first time it runs a batch: the warm-up of its load (a poison model)."""

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        os._exit(3)


class SlowLoad(EmbeddingAdapter):
    """Takes SLOW_LOAD_S to load, like a large model."""

    def load(self, weights: Path) -> None:
        time.sleep(SLOW_LOAD_S)
        super().load(weights)


PERTURBED_COSINE = 1 / np.sqrt(1 + 0.19**2)  # about 0.982: the figure int8 gave MiniLM on an AVX2-only CPU


class PerturbedInt8Embedding(EmbeddingAdapter):
    """Its int8 vectors are turned away from the true ones (cosine PERTURBED_COSINE at most), so that
    int8 fails the precision gate wherever the CPU supports it; other precisions are untouched."""

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        results = super().run(batch, options)
        if self.precision != "int8":
            return results
        rng = np.random.default_rng(0)
        for item in results:
            vector = item["dense"].astype(np.float64)
            noise = rng.standard_normal(vector.shape)
            noise -= (noise @ vector) / (vector @ vector) * vector  # orthogonal to the vector
            turned = vector + 0.19 * np.linalg.norm(vector) * noise / np.linalg.norm(noise)
            item["dense"] = (turned / np.linalg.norm(turned) * np.linalg.norm(vector)).astype(np.float32)
        return results


class EndlessSlowLlamaCpp(LlamaCppAdapter):
    """SmolLM2 on llama.cpp that never emits end-of-sequence and takes at least 20 ms a decode step:
    a generation that holds its room in the KV cache until it is told to stop."""

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.eos_ids = frozenset()

    def decode(self, batch: SeqBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        time.sleep(0.02)
        return super().decode(batch, tokens, positions)


# ----- poisoned inputs: one request fails inside the model, the others of its batch must not -------
#: a prompt or text starting with one of these words fails in the model (the words are in the tiny vocabulary)
POISON_STEP = "cafeteria"  # every decode step whose batch holds this sequence raises
POISON_NAN = "lunch"  # this sequence's logits are NaN at each decode step
POISON_PREFILL = "payment"  # a prefill that holds this prompt raises
POISON_ENCODE = "cafeteria"  # an encode batch that holds this text raises
FAULT_LOG = "SIE_TEST_FAULT_LOG"  # a file each injected fault appends "<kind> <rows in its batch>" to


def record_fault(kind: str, rows: int) -> None:
    """Note an injected fault and the size of the batch it hit, for the test to read."""
    path = os.environ.get(FAULT_LOG)
    if path:
        with open(path, "a") as log:
            log.write(f"{kind} {rows}\n")


def starts_with(ids: list[int], marker: list[int], skip: int) -> bool:
    """Whether ``ids`` (after ``skip`` leading special tokens) begin with ``marker``."""
    return bool(marker) and ids[skip : skip + len(marker)] == marker


@dataclass
class MarkedBatch(DecodeBatch):
    """A transformers batch that knows which of its rows are poisoned, and how."""

    marks: list[str | None] = field(default_factory=list)


class PoisonLM(CausalLMAdapter):
    """The tiny Llama with poisoned prompts (POISON_*), no end-of-sequence and 20 ms a decode step, so
    that sequences stay in the batch long enough for others to join them."""

    _markers: dict[str, list[int]]

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.eos_ids = frozenset()
        words = (POISON_STEP, POISON_NAN, POISON_PREFILL)
        self._markers = {w: list(self.tokenizer(w, add_special_tokens=False)["input_ids"]) for w in words}

    def _mark(self, prompt: list[int]) -> str | None:
        return next((w for w, ids in self._markers.items() if starts_with(prompt, ids, 1)), None)

    def prefill(self, prompts: list[list[int]]) -> tuple[MarkedBatch, torch.Tensor]:
        marks = [self._mark(p) for p in prompts]
        if POISON_PREFILL in marks:
            record_fault("prefill", len(prompts))
            raise RuntimeError("simulated prefill failure")
        batch, logits = super().prefill(prompts)
        return MarkedBatch(batch.cache, batch.mask, marks), logits

    def decode(self, batch: DecodeBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        assert isinstance(batch, MarkedBatch)
        time.sleep(0.02)
        if POISON_STEP in batch.marks:
            record_fault("step", batch.rows)
            raise RuntimeError("simulated decode failure")
        logits = super().decode(batch, tokens, positions).clone()  # an inference tensor is read-only
        for row, mark in enumerate(batch.marks):
            if mark == POISON_NAN:
                record_fault("nan", batch.rows)
                logits[row] = float("nan")
        return logits

    def merge(self, first: DecodeBatch | None, second: DecodeBatch) -> MarkedBatch:
        assert isinstance(second, MarkedBatch) and (first is None or isinstance(first, MarkedBatch))
        merged = super().merge(first, second)
        return MarkedBatch(merged.cache, merged.mask, (first.marks if first else []) + second.marks)

    def keep(self, batch: DecodeBatch, rows: list[int]) -> MarkedBatch | None:
        assert isinstance(batch, MarkedBatch)
        kept = super().keep(batch, rows)
        return None if kept is None else MarkedBatch(kept.cache, kept.mask, [batch.marks[i] for i in rows])


class PoisonLlamaCpp(LlamaCppAdapter):
    """SmolLM2 on llama.cpp with the same poisoned prompts as PoisonLM (marks kept per sequence id),
    no end-of-sequence and at least 20 ms a decode step."""

    _markers: dict[str, list[int]]
    _marks: dict[int, str]

    def load(self, weights: Path) -> None:
        super().load(weights)
        self.eos_ids = frozenset()
        self._markers = {w: self._tokenize(w, add_special=False) for w in (POISON_STEP, POISON_NAN, POISON_PREFILL)}
        self._marks = {}

    def _mark(self, prompt: list[int]) -> str | None:
        """At the very start, or after one leading special token (SmolLM2 adds none to a raw prompt)."""
        return next(
            (w for w, ids in self._markers.items() if starts_with(prompt, ids, 0) or starts_with(prompt, ids, 1)),
            None,
        )

    def prefill_steps(self, prompts: list[list[int]], step_tokens: int) -> PrefillSteps:
        marks = [self._mark(p) for p in prompts]
        if POISON_PREFILL in marks:
            record_fault("prefill", len(prompts))
            raise RuntimeError("simulated prefill failure")
        batch, logits = yield from super().prefill_steps(prompts, step_tokens)
        self._marks.update({seq: mark for seq, mark in zip(batch.seq_ids, marks, strict=True) if mark})
        return batch, logits

    def decode(self, batch: SeqBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        time.sleep(0.02)
        marks = [self._marks.get(seq) for seq in batch.seq_ids]
        if POISON_STEP in marks:
            record_fault("step", batch.rows)
            raise RuntimeError("simulated decode failure")
        logits = super().decode(batch, tokens, positions)
        for row, mark in enumerate(marks):
            if mark == POISON_NAN:
                record_fault("nan", batch.rows)
                logits[row] = float("nan")
        return logits

    def discard(self, batch: SeqBatch) -> None:
        for seq in batch.seq_ids:
            self._marks.pop(seq, None)
        super().discard(batch)


def hold_file() -> Path | None:
    """While this file exists, PoisonEmbedding holds each batch it starts (so work queues behind it)."""
    path = os.environ.get(FAULT_LOG)
    return Path(path + ".hold") if path else None


class PoisonEmbedding(EmbeddingAdapter):
    """A batch that holds a text starting with POISON_ENCODE raises, whatever else it holds; a batch
    started while hold_file() exists waits (up to 60 s) until it is removed."""

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        hold = hold_file()
        if hold is not None and hold.exists():
            record_fault("held", len(batch))
            deadline = time.monotonic() + 60
            while hold.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        marker = self.tokenizer.encode(POISON_ENCODE, add_special_tokens=False).ids
        if any(starts_with(t.input_ids, marker, 1) for t in batch):
            record_fault("encode", len(batch))
            raise ValueError("simulated failure on a poisoned text")
        return super().run(batch, options)


class SlowPictures(MediaExtractor):
    """A picture reader that takes SLOW_PICTURE_S for a picture wider than 100 px and no time for a smaller
    one; it answers each picture's size as its text."""

    def load(self, weights: Path) -> None:
        pass

    def unload(self) -> None:
        pass

    def resident_bytes(self) -> int:
        return 0

    def warmup(self) -> None:
        pass

    def run(self, batch: list[Tokens], options: MediaOptions) -> list[Found]:
        if any(t.data.size[0] > 100 for t in batch):
            time.sleep(SLOW_PICTURE_S)
        return [Found(data={"text": "{}x{}".format(*t.data.size)}) for t in batch]
