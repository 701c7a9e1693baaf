"""The settings every adapter takes, their defaults, and how ``base_url`` and keys resolve."""

from __future__ import annotations

import os
from typing import Any, Final, TypedDict

from sie_sdk.types import Priority

DEFAULT_BATCH_SIZE: Final = 64
DEFAULT_TIMEOUT_S: Final = 120.0
DEFAULT_URL: Final = "http://127.0.0.1:8080"


class CallOptions(TypedDict, total=False):
    """``BackendOptions`` but ``base_url``: for an adapter that takes ``base_url`` as a named argument of its own."""

    priority: Priority | None
    instruction: str | None
    batch_size: int
    timeout: float | None
    api_key: str | None


class BackendOptions(CallOptions, total=False):
    """The settings an adapter passes on to ``SIEBackend`` unchanged (``**options: Unpack[BackendOptions]``).

    ``base_url`` (``None``: ``$SIE_URL``, else http://127.0.0.1:8080, read at call time); ``priority``
    ("interactive" | "batch"); ``instruction`` (queries only); ``batch_size`` (texts per request, default
    ``DEFAULT_BATCH_SIZE``); ``timeout`` (seconds per call, default ``DEFAULT_TIMEOUT_S``; ``None``: no
    limit); ``api_key`` (``None``: ``$SIE_API_KEY``).
    """

    base_url: str | None


def resolve_base_url(base_url: str | None = None) -> str:
    """``base_url``, else ``$SIE_URL``, else http://127.0.0.1:8080 (no trailing slash)."""
    return (base_url or os.environ.get("SIE_URL") or DEFAULT_URL).rstrip("/")


def secret_value(value: Any) -> str | None:
    """A key given as a plain string, as pydantic's ``SecretStr`` (how LangChain and LlamaIndex keep keys)
    or as Haystack's ``Secret`` (``resolve_value()``: ``None`` for an unset environment variable)."""
    if value is None:
        return None
    for method in ("get_secret_value", "resolve_value"):
        reveal = getattr(value, method, None)
        if callable(reveal):
            revealed = reveal()
            return None if revealed is None else str(revealed)
    return str(value)
