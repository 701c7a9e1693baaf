"""The SDK's exception tree, the one table from server error codes to exceptions, and the
one place where httpx transport exceptions become SDK exceptions.

::

    SIEError
    ├── SIEConnectionError          transport failures (refused, reset, DNS, broken stream)
    │   └── SIETimeoutError         the call's time budget ran out
    ├── ProtocolError               a 2xx answer the SDK could not decode
    └── APIError                    the server answered non-2xx (.status_code .code .message .retry_after)
        ├── RequestError            4xx
        │   ├── InvalidInputError
        │   │   └── PayloadTooLargeError   413
        │   ├── ModelNotFoundError
        │   ├── AuthenticationError     401: no API key sent
        │   ├── PermissionDeniedError   403: a key the server does not accept
        │   └── RateLimitedError        429: this key has too many items in flight
        └── ServerError             5xx
            ├── ModelLoadingError
            ├── ModelLoadFailedError
            ├── ResourceExhaustedError
            ├── QueueFullError
            └── InferenceError
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx


class SIEError(Exception):
    """Base class of every exception the SDK raises on purpose."""


class SIEConnectionError(SIEError):
    """The server could not be reached, or the connection broke mid-answer."""


class SIETimeoutError(SIEConnectionError):
    """The call's total timeout ran out."""


class ProtocolError(SIEError):
    """The server answered 2xx with a body the SDK could not decode."""


class APIError(SIEError):
    """The server answered with a non-2xx status and (usually) an error envelope."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"[{self.status_code} {self.code or 'UNKNOWN'}] {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(message={self.message!r}, status_code={self.status_code}, "
            f"code={self.code!r}, retry_after={self.retry_after!r})"
        )


class RequestError(APIError):
    """A 4xx: the request was wrong; retrying it unchanged will not help."""


class InvalidInputError(RequestError):
    pass


class PayloadTooLargeError(InvalidInputError):
    pass


class ModelNotFoundError(RequestError):
    pass


class AuthenticationError(RequestError):
    """401: the server requires an API key (``api_key=`` or ``$SIE_API_KEY``)."""


class PermissionDeniedError(RequestError):
    """403: the key is not one the server accepts, or the route needs an admin key."""


class RateLimitedError(RequestError):
    """429: this key has as many items in flight as the server allows; see ``retry_after``."""


class ServerError(APIError):
    """A 5xx: the server could not serve the request."""


class ModelLoadingError(ServerError):
    pass


class ModelLoadFailedError(ServerError):
    pass


class ResourceExhaustedError(ServerError):
    pass


class QueueFullError(ServerError):
    pass


class InferenceError(ServerError):
    pass


# The one table: server error code -> (exception class, the status the server sends it with).
ERROR_TABLE: dict[str, tuple[type[APIError], int]] = {
    "INVALID_INPUT": (InvalidInputError, 400),
    "MODEL_NOT_FOUND": (ModelNotFoundError, 404),
    "MODEL_LOADING": (ModelLoadingError, 503),
    "MODEL_LOAD_FAILED": (ModelLoadFailedError, 502),
    "RESOURCE_EXHAUSTED": (ResourceExhaustedError, 503),
    "QUEUE_FULL": (QueueFullError, 503),
    "INFERENCE_ERROR": (InferenceError, 500),
    "UNAUTHENTICATED": (AuthenticationError, 401),
    "FORBIDDEN": (PermissionDeniedError, 403),
    "RATE_LIMITED": (RateLimitedError, 429),
}


def api_error(status_code: int | None, code: str | None, message: str, retry_after: float | None = None) -> APIError:
    """The exception for one error answer: by code first, then by status class.

    ``status_code=None`` (an error reported inside a stream) takes the code's usual status.
    """
    known = ERROR_TABLE.get(code) if code is not None else None
    if status_code is None:
        status_code = known[1] if known is not None else 500
    cls: type[APIError]
    if status_code == 413:
        cls = PayloadTooLargeError
    elif known is not None:
        cls = known[0]
    elif 400 <= status_code < 500:
        cls = RequestError
    elif status_code >= 500:
        cls = ServerError
    else:
        cls = APIError
    return cls(message, status_code=status_code, code=code, retry_after=retry_after)


@contextmanager
def translate_transport_errors() -> Iterator[None]:
    """Turn httpx transport exceptions into ``SIEConnectionError`` / ``SIETimeoutError``.

    Used around every send and every read of a streamed body, by both clients (a plain
    ``with`` also wraps ``await`` expressions).
    """
    try:
        yield
    except httpx.TimeoutException as exc:
        raise SIETimeoutError(f"request timed out: {exc}") from exc
    except httpx.TransportError as exc:
        raise SIEConnectionError(f"could not talk to the server: {exc}") from exc
