"""Fields every LlamaIndex class shares, and the backend they build from them."""

from __future__ import annotations

from typing import Literal

from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr, SecretStr, field_validator

from sie_integrations_base import DEFAULT_BATCH_SIZE, DEFAULT_TIMEOUT_S, SIEBackend, resolve_base_url


class SIEFields(BaseModel):
    """``model``, ``base_url`` (``None``: ``$SIE_URL`` when the object is made, else
    http://127.0.0.1:8080), ``priority``, ``instruction``, ``timeout`` (seconds per call,
    retries included; ``None``: no limit), ``batch_size`` (texts per request) and ``api_key``
    (``None``: ``$SIE_API_KEY``; a ``SecretStr``, left out of serialization)."""

    model: str = Field(description="The SIE model id.")
    base_url: str = Field(default=None, validate_default=True, description="The SIE server.")
    priority: Literal["interactive", "batch"] | None = Field(default=None, description="X-SIE-Priority.")
    instruction: str | None = Field(default=None, description="Query instruction (queries only).")
    timeout: float | None = Field(default=DEFAULT_TIMEOUT_S, description="Seconds per call.")
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1, description="Texts per request.")
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False, description="SIE API key.")

    _backend: SIEBackend | None = PrivateAttr(default=None)

    @field_validator("base_url", mode="before")
    @classmethod
    def _resolve_base_url(cls, value: str | None) -> str:
        return resolve_base_url(value)

    @property
    def backend(self) -> SIEBackend:
        """The shared SIE backend for these settings (made on first use)."""
        if self._backend is None:
            self._backend = SIEBackend.from_settings(self)
        return self._backend

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
