"""Header names, the priority classes, and how a request's call options are read from its headers."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from sie_server.errors import InvalidInput

PRIORITY = "x-sie-priority"
WAIT_FOR_MODEL = "x-sie-wait-for-model"
WAIT_FOR_WORKER = "x-sie-wait-for-worker"
TIMEOUT_MS = "x-sie-timeout-ms"
ERROR_CODE = "x-sie-error-code"
QUEUE_TOKEN = "x-sie-queue-token"
RETRY_AFTER = "retry-after"
AUTHORIZATION = "authorization"
CONTENT_TYPE = "content-type"
ACCEPT = "accept"
MODEL = "x-sie-model"  # the model of a TEI route (api/routes/tei.py) when the body names none
REQUEST_ID = "x-request-id"  # the caller's (or a generated) id, returned in the answer and on every log line
TRACEPARENT = "traceparent"  # W3C trace context, continued by the server's spans and carried to workers
TRACESTATE = "tracestate"
CACHE = "x-sie-cache"  # use (default) or bypass: the exact result cache of encode and score (engine/result_cache.py)


class Priority(StrEnum):
    """Scheduling classes, most urgent first."""

    INTERACTIVE = "interactive"
    BATCH = "batch"


PRIORITIES: tuple[str, ...] = tuple(p.value for p in Priority)
_FALSE = frozenset({"0", "false", "no", "off"})
_TRUE = frozenset({"1", "true", "yes", "on"})


def flag(headers: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean header: true/yes/on/1 or false/no/off/0 (any case); anything else is a 400."""
    raw = headers.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidInput(f"{display(name)} must be true or false, got {raw!r}")


def priority(headers: Mapping[str, str]) -> Priority:
    raw = headers.get(PRIORITY)
    if raw is None:
        return Priority.INTERACTIVE
    try:
        return Priority(raw.strip().lower())
    except ValueError:
        raise InvalidInput(f"{display(PRIORITY)} must be one of {', '.join(PRIORITIES)}, got {raw!r}") from None


def display(name: str) -> str:
    """``x-sie-priority`` as people write it: ``X-SIE-Priority``."""
    return "-".join(part.upper() if part in ("x", "sie") else part.capitalize() for part in name.split("-"))


@dataclass(frozen=True)
class CallOptions:
    """What a caller asks of one request besides its body."""

    priority: str = Priority.INTERACTIVE.value
    wait_for_load: bool = True
    wait_for_worker: bool = True
    disconnected: Callable[[], Awaitable[None]] | None = None  # resolves when the caller goes away
    deadline: float | None = None  # wall-clock time (time.time()) after which the caller no longer waits
    cache: bool = True  # False (X-SIE-Cache: bypass): computed afresh, neither read from nor written to the cache

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.time()


class CacheMode(StrEnum):
    """``X-SIE-Cache``: ``use`` the result cache (the default) or ``bypass`` it (compute afresh, store nothing)."""

    USE = "use"
    BYPASS = "bypass"


def cache(headers: Mapping[str, str]) -> bool:
    """Whether the request may use the result cache (``X-SIE-Cache``)."""
    raw = headers.get(CACHE)
    if raw is None:
        return True
    try:
        return CacheMode(raw.strip().lower()) is CacheMode.USE
    except ValueError:
        modes = ", ".join(m.value for m in CacheMode)
        raise InvalidInput(f"{display(CACHE)} must be one of {modes}, got {raw!r}") from None


MAX_TIMEOUT_MS = 24 * 3600 * 1000


def deadline(headers: Mapping[str, str]) -> float | None:
    """``X-SIE-Timeout-Ms``: how long the caller waits, from now (0: it has already stopped)."""
    raw = headers.get(TIMEOUT_MS)
    if raw is None:
        return None
    value = raw.strip()
    if not value.isdigit() or int(value) > MAX_TIMEOUT_MS:
        raise InvalidInput(f"{display(TIMEOUT_MS)} must be whole milliseconds from 0 to {MAX_TIMEOUT_MS}, got {raw!r}")
    return time.time() + int(value) / 1000


def call_options(headers: Mapping[str, str], disconnected: Callable[[], Awaitable[None]] | None = None) -> CallOptions:
    return CallOptions(
        priority=priority(headers).value,
        wait_for_load=flag(headers, WAIT_FOR_MODEL, True),
        wait_for_worker=flag(headers, WAIT_FOR_WORKER, True),
        disconnected=disconnected,
        deadline=deadline(headers),
        cache=cache(headers),
    )
