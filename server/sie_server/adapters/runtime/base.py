"""What every loaded model is, whatever it does: loaded onto a device, measured, unloaded.

Two families build on this base, each with its own interface: encoders (``adapters.runtime.encoder``:
batches of tokenized items, one forward pass each, run by the scheduler) and generators
(``adapters.runtime.generator``: the decode loop's prefill and step). An adapter knows nothing about
HTTP, queues or other models.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sie_server.adapters.runtime.precision import PrecisionReport
from sie_server.catalog.schema import ModelConfig, Profile


@dataclass(frozen=True, slots=True)
class Tokens:
    """One tokenized input (a text, or a query/document pair) ready to be padded into a batch."""

    input_ids: list[int]
    token_type_ids: list[int] | None
    truncated: bool
    #: adapter-specific payload carried with the tokens (an image's pixels, a text window and its offset)
    data: Any = None

    @property
    def length(self) -> int:
        return len(self.input_ids)


class ModelAdapter(ABC):
    """One loaded model: what the memory pool loads, measures, warms up and unloads."""

    #: the runtime that runs the weights, as /v1/models shows it
    backend: str = "transformers"
    #: the precision chosen at load and why (set by adapters that run the precision gate)
    precision_report: PrecisionReport | None = None

    def __init__(self, config: ModelConfig, profile: Profile, device: str):
        self.config = config
        self.profile = profile
        self.device = device

    @abstractmethod
    def load(self, weights: Path) -> None:
        """Load tokenizer and weights from a local folder onto ``self.device``."""

    @property
    def remote_code(self) -> bool:
        """Whether the weights' repository ships its own modelling code that must be trusted."""
        arch = self.config.architecture
        return bool(arch and arch.trust_remote_code)

    def warmup(self) -> None:  # noqa: B027 - optional stage, a no-op by default
        """Run one small batch so the first request does not pay one-time kernel set-up."""

    @abstractmethod
    def unload(self) -> None:
        """Drop every reference to device memory."""

    @abstractmethod
    def resident_bytes(self) -> int:
        """Bytes of weights and buffers this model holds on its device."""
