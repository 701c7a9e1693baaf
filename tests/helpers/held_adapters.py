"""Models a test holds from outside through files named in the server's environment, for server-process
tests (named in a test catalog as ``adapter: tests.helpers.held_adapters:Class``; never in the server):
a load that waits at a gate, and a batch or decode step that wedges its thread while a file exists."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch

from sie_server.adapters.encoders.embedding import EmbeddingAdapter
from sie_server.adapters.generators.causal_lm import CausalLMAdapter, DecodeBatch
from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import EncodeOptions, EncodeOutput

LOAD_GATE = "SIE_TEST_LOAD_GATE"  # GatedEmbedding's load waits until this file exists
WEDGE = "SIE_TEST_WEDGE"  # WedgedEmbedding's batches and WedgedLM's decode steps wait while this file exists
HOLD_LIMIT_S = 180.0  # a test that never lets go ends its server's wait here, not the suite


def held_marker(wedge: Path) -> Path:
    """The file a wedged batch writes once it holds its lane's thread."""
    return wedge.with_name(wedge.name + ".held")


class GatedEmbedding(EmbeddingAdapter):
    """Stays in its loading state until the file named by ``SIE_TEST_LOAD_GATE`` exists (a slow load the
    test ends when it wants), then loads as usual."""

    def load(self, weights: Path) -> None:
        gate = Path(os.environ[LOAD_GATE])
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not gate.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the load gate {gate} never opened")
            time.sleep(0.02)
        super().load(weights)


def hold_while_wedged() -> None:
    """Block this thread while the file named by ``SIE_TEST_WEDGE`` exists (writing ``held_marker`` first)."""
    wedge = Path(os.environ[WEDGE])
    if wedge.exists():
        held_marker(wedge).touch()
        deadline = time.monotonic() + HOLD_LIMIT_S
        while wedge.exists() and time.monotonic() < deadline:
            time.sleep(0.01)


class WedgedEmbedding(EmbeddingAdapter):
    """A batch started while the wedge file exists blocks its lane's thread until the file is removed: a
    model wedged in native code, as far as the server can tell."""

    def run(self, batch: list[Tokens], options: EncodeOptions) -> list[EncodeOutput]:
        hold_while_wedged()
        return super().run(batch, options)


class WedgedLM(CausalLMAdapter):
    """A decode step started while the wedge file exists blocks the decode thread until it is removed."""

    def decode(self, batch: DecodeBatch, tokens: list[int], positions: list[int]) -> torch.Tensor:
        hold_while_wedged()
        return super().decode(batch, tokens, positions)
