"""Fields every LangChain class shares, and the backend they build from them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, SecretStr, field_validator

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend, resolve_base_url
from sie_sdk import DEFAULT_RETRY, RetryPolicy


class SIEFields(BaseModel):
    """The settings of every SIE LangChain class.

    ``model``; ``base_url`` (``None``: ``$SIE_URL`` when the object is made, else
    http://127.0.0.1:8080); ``priority``; ``instruction`` (queries only); ``timeout`` (seconds
    per call, retries included; ``None``: no limit); ``max_retries`` (``None``: retry
    MODEL_LOADING / QUEUE_FULL / RESOURCE_EXHAUSTED until the timeout, honouring Retry-After;
    ``0``: never); ``batch_size`` (texts per request); ``api_key`` (``None``: ``$SIE_API_KEY``;
    kept as a ``SecretStr``, never serialized).
    """

    model: str
    base_url: str = Field(default=None, validate_default=True)
    priority: Literal["interactive", "batch"] | None = None
    instruction: str | None = None
    timeout: float | None = DEFAULT_TIMEOUT_S
    max_retries: int | None = None
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)

    _backend: SIEBackend | None = PrivateAttr(default=None)

    @field_validator("base_url", mode="before")
    @classmethod
    def _resolve_base_url(cls, value: str | None) -> str:
        return resolve_base_url(value)

    def _retry(self) -> RetryPolicy:
        if self.max_retries is None:
            return DEFAULT_RETRY
        return RetryPolicy(max_attempts=self.max_retries + 1)

    @property
    def backend(self) -> SIEBackend:
        """The shared SIE backend for these settings (made on first use)."""
        if self._backend is None:
            self._backend = SIEBackend(
                self.model,
                base_url=self.base_url,
                priority=self.priority,
                instruction=self.instruction,
                batch_size=self.batch_size,
                timeout=self.timeout,
                retry=self._retry(),
                api_key=self.api_key.get_secret_value() if self.api_key is not None else None,
            )
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()

    def _sie_identity(self) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url}
