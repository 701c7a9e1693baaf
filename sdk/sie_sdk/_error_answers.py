"""Reading an error answer: the typed ``APIError`` it stands for, and its ``Retry-After``."""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime

import httpx

from ._wire import decode_body
from .errors import APIError, ProtocolError, api_error


def error_from_response(response: httpx.Response) -> APIError:
    """The typed error for a non-2xx answer (envelope ``{"detail": {"code", "message"}}``)."""
    code: str | None = None
    message: str | None = None
    try:
        body = decode_body(response.content, response.headers.get("content-type"))
    except ProtocolError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, dict):
        code = str(detail["code"]) if detail.get("code") is not None else None
        message = str(detail["message"]) if detail.get("message") is not None else None
    elif isinstance(detail, str):
        message = detail
    code = code or response.headers.get("x-sie-error-code")
    if not message:
        message = response.text.strip()[:1000] or response.reason_phrase or f"HTTP {response.status_code}"
    return api_error(response.status_code, code, message, parse_retry_after(response.headers.get("retry-after")))


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds (a number, or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None
