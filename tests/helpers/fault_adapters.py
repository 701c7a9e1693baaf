"""Fault-injecting adapters for server-process tests, named in a test catalog as
``adapter: tests.helpers.fault_adapters:Class``. They live in tests/, never in the server."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sie_server.adapters.base import Tokens
from sie_server.adapters.causal_lm import CausalLMAdapter, DecodeBatch
from sie_server.adapters.embedding import EmbeddingAdapter
from sie_server.adapters.llamacpp import LlamaCppAdapter, SeqBatch
from sie_server.adapters.options import EncodeOptions

SLOW_BATCH_S = 0.25
SLOW_LOAD_S = 3.0


class SlowEmbedding(EmbeddingAdapter):
    """Every batch takes at least SLOW_BATCH_S, so work piles up behind it."""

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[dict[str, Any]]:
        time.sleep(SLOW_BATCH_S)
        return super().run(batch, options)


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
