"""The adapter contract: what a model family declares and the stages it implements.

An adapter knows nothing about HTTP, queues or other models. The engine calls
``tokenize_*`` off the event loop, then ``run`` with a batch of tokenized items
that share one operation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sie_server.adapters.precision import PrecisionReport
from sie_server.catalog.schema import ModelConfig, Profile


@dataclass(frozen=True, slots=True)
class Tokens:
    """One tokenized input (a text, or a query/document pair) ready to be padded into a batch."""

    input_ids: list[int]
    token_type_ids: list[int] | None
    truncated: bool
    #: adapter-specific payload carried with the tokens (a text window and its offset, say)
    data: Any = None

    @property
    def length(self) -> int:
        return len(self.input_ids)


class Adapter(ABC):
    """One loaded model of one family. Subclasses implement the operations they declare."""

    #: operations ``run`` accepts, e.g. {"encode"} or {"score_pairs"}
    operations: frozenset[str] = frozenset()
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

    def format_text(self, text: str, *, is_query: bool, instruction: str | None) -> str:
        """The text as the model expects it (prefixes, instruction template)."""
        return text

    def encode_tokens(self, texts: list[str], *, is_query: bool, instruction: str | None) -> list[Tokens]:
        """Texts as tokens for ``encode``, in their query or document role."""
        return self.tokenize_texts([self.format_text(t, is_query=is_query, instruction=instruction) for t in texts])

    def tokenize_texts(self, texts: list[str]) -> list[Tokens]:
        raise NotImplementedError(f"{type(self).__name__} does not tokenize single texts")

    def tokenize_pairs(self, query: str, documents: list[str]) -> list[Tokens]:
        raise NotImplementedError(f"{type(self).__name__} does not tokenize pairs")

    def image_tokens(self, images: list[bytes]) -> list[Tokens]:
        """Image-text models: each image decoded and preprocessed, its pixels in ``data``."""
        raise NotImplementedError(f"{type(self).__name__} does not take images")

    def windows(self, texts: list[str]) -> list[Tokens]:
        """Span extractors: each text as windows, ``data`` = (item index, char offset, window text)."""
        raise NotImplementedError(f"{type(self).__name__} does not extract spans")

    @abstractmethod
    def run(self, operation: str, batch: list[Tokens], options: dict[str, Any]) -> list[Any]:
        """Run one batch; one result per item, in order."""
