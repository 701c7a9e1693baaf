"""What the routes call: one interface, two implementations.

The single server's is the engine (``engine/frontdoor.py``); the gateway's publishes work to
queue workers and gathers their answers (``cluster/gateway_service.py``). The routes parse and
check every request before they call it, so a bad request is refused the same way by both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Protocol

from sie_server.catalog.schema import ModelConfig
from sie_server.contract.headers import CallOptions
from sie_server.contract.limits import Limits
from sie_server.contract.requests import EncodeRequest, ExtractRequest, GenerateRequest, ScoreRequest
from sie_server.contract.responses import EncodeResponse, ExtractResponse, ScoreResponse, Usage
from sie_server.contract.state_wire import MemoryReport, ModelInfo, Readiness
from sie_server.contract.status import StatusReport
from sie_server.contract.tokenize_wire import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse


class TextStream(Protocol):
    """A generation under way: its text as it is produced, then how it ended."""

    model: str

    def deltas(self) -> AsyncIterator[str]:
        """New text as it is decoded; raises ``SIEError`` if generation fails part way."""
        ...

    async def finish(self) -> None:
        """Wait for the whole answer."""
        ...

    def cancel(self) -> None:
        """The caller left: stop decoding."""
        ...

    @property
    def text(self) -> str: ...

    @property
    def finish_reason(self) -> str | None: ...

    @property
    def usage(self) -> Usage: ...

    @property
    def tool_format(self) -> str | None:
        """When tools were offered: the tool format (sie_server/tool_formats) the text is in."""
        ...


class Service(Protocol):
    @property
    def limits(self) -> Limits: ...

    def resolve(self, model_id: str) -> ModelConfig:
        """The served model (MODEL_NOT_FOUND with a suggestion); QUEUE_FULL while draining."""
        ...

    def refuse_unfit(
        self, model: ModelConfig, messages: Iterable[Mapping[str, Any]], max_new_tokens: int, *, tools: bool
    ) -> None:
        """Before the body is validated: INVALID_INPUT (400) when a resident model's context cannot hold the
        chat (``engine/prompt_bounds``), the same refusal ``generate`` would give later; nothing otherwise."""
        ...

    async def encode(self, model: ModelConfig, request: EncodeRequest, call: CallOptions) -> EncodeResponse: ...

    async def score(self, model: ModelConfig, request: ScoreRequest, call: CallOptions) -> ScoreResponse: ...

    async def extract(self, model: ModelConfig, request: ExtractRequest, call: CallOptions) -> ExtractResponse: ...

    async def generate(self, model: ModelConfig, request: GenerateRequest, call: CallOptions) -> TextStream: ...

    async def tokenize(self, model: ModelConfig, request: TokenizeRequest, call: CallOptions) -> TokenizeResponse:
        """The model's own text tokenizer over each whole text (INVALID_INPUT for a model without one)."""
        ...

    async def detokenize(
        self, model: ModelConfig, request: DetokenizeRequest, call: CallOptions
    ) -> DetokenizeResponse: ...

    async def models(self) -> tuple[list[ModelInfo], dict[str, object] | None]:
        """Every catalog model's info, and the CPU features found (None where none apply)."""
        ...

    async def model(self, model: ModelConfig) -> ModelInfo: ...

    async def reload(self, model: ModelConfig) -> ModelInfo: ...

    async def load(self, model: ModelConfig) -> ModelInfo:
        """Load (preload) the model now and wait for it."""
        ...

    async def evict(self, model: ModelConfig) -> ModelInfo:
        """Unload the model (refused while it has work, or is pinned)."""
        ...

    async def status(self) -> StatusReport:
        """What an operator watches: ``GET /v1/status`` and the status page."""
        ...

    async def memory(self) -> MemoryReport: ...

    def readiness(self) -> Readiness: ...

    def metrics_text(self) -> bytes:
        """Prometheus exposition text."""
        ...
