"""Retries and deadlines, decided once for both clients (no I/O).

``RetryPolicy`` says which failed answers are retried and how long to wait; ``PreparedRequest`` is
everything one call sends; ``RetryState`` drives that call's attempts against one deadline: it makes
each attempt's ``httpx.Request`` and, given what came back, says "done" (``None``), raises the typed
error, or answers how long to sleep before retrying.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeAlias, TypeVar

import httpx

from ._error_answers import error_from_response
from .errors import APIError, SIEConnectionError, SIETimeoutError

T = TypeVar("T")


class UseClientDefault(enum.Enum):
    """Sentinel type: ``timeout=USE_CLIENT_DEFAULT`` means "the client's timeout" (None means no limit)."""

    USE_CLIENT_DEFAULT = "USE_CLIENT_DEFAULT"


USE_CLIENT_DEFAULT: Final = UseClientDefault.USE_CLIENT_DEFAULT
TimeoutArg: TypeAlias = float | UseClientDefault | None


@dataclass(frozen=True)
class RetryPolicy:
    """Which failed answers are retried, and how long to wait between attempts.

    Only 5xx answers whose code is in ``retry_codes`` are retried, honouring Retry-After
    (else ``default_delay_s``), each wait capped at ``max_delay_s``, and never past the
    call's timeout. 4xx answers are never retried. Connection failures are retried only
    with ``retry_connect_errors=True``.
    """

    retry_codes: Set[str] = frozenset({"MODEL_LOADING", "QUEUE_FULL", "RESOURCE_EXHAUSTED"})
    default_delay_s: float = 1.0
    max_delay_s: float = 10.0
    max_attempts: int | None = None
    retry_connect_errors: bool = False

    def retries(self, error: APIError) -> bool:
        return error.status_code >= 500 and error.code in self.retry_codes

    def delay(self, retry_after: float | None) -> float:
        wanted = self.default_delay_s if retry_after is None else retry_after
        return max(0.0, min(wanted, self.max_delay_s))


DEFAULT_RETRY: Final = RetryPolicy()
NO_RETRY: Final = RetryPolicy(retry_codes=frozenset())


TIMEOUT_HEADER = "X-SIE-Timeout-Ms"


@dataclass(frozen=True)
class PreparedRequest(Generic[T]):
    """Everything one SDK call sends, plus how to read the answer."""

    method: str
    url: str
    headers: Mapping[str, str]
    parse: Callable[[httpx.Response], T]
    timeout: float | None
    retry: RetryPolicy
    content: bytes | None = None
    stream: bool = False


@dataclass
class RetryState:
    """The attempts of one call, against one deadline."""

    prepared: PreparedRequest[Any]
    clock: Callable[[], float] = time.monotonic
    attempts: int = 0
    deadline: float | None = field(init=False)

    def __post_init__(self) -> None:
        timeout = self.prepared.timeout
        self.deadline = None if timeout is None else self.clock() + timeout

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - self.clock()

    def next_request(self) -> httpx.Request:
        """The next attempt, with the remaining time budget as its httpx timeout and, for a whole
        (not streamed) answer, as ``X-SIE-Timeout-Ms``: the server drops the work once it passes."""
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            raise SIETimeoutError(f"no time left for {self.prepared.method} {self.prepared.url}")
        headers = self.prepared.headers
        if remaining is not None and self.prepared.method == "POST" and not self.prepared.stream:
            headers = {**headers, TIMEOUT_HEADER: str(max(1, int(remaining * 1000)))}
        return httpx.Request(
            self.prepared.method,
            self.prepared.url,
            headers=headers,
            content=self.prepared.content,
            extensions={"timeout": httpx.Timeout(remaining).as_dict()},
        )

    def after_response(self, response: httpx.Response) -> float | None:
        """``None`` when the answer is a success; else the delay before retrying, or raise."""
        self.attempts += 1
        if response.is_success:
            return None
        error = error_from_response(response)
        if not self.prepared.retry.retries(error):
            raise error
        return self._delay_or_raise(error, error.retry_after)

    def after_transport_error(self, error: SIEConnectionError) -> float:
        """The delay before retrying a failed connection, or raise it."""
        self.attempts += 1
        connect_failed = isinstance(error.__cause__, httpx.ConnectError)
        if not (self.prepared.retry.retry_connect_errors and connect_failed):
            raise error
        return self._delay_or_raise(error, None)

    def _delay_or_raise(self, error: Exception, retry_after: float | None) -> float:
        policy = self.prepared.retry
        if policy.max_attempts is not None and self.attempts >= policy.max_attempts:
            raise error
        delay = policy.delay(retry_after)
        remaining = self.remaining()
        if remaining is not None and delay >= remaining:
            raise error  # the next attempt could not start before the deadline
        return delay
