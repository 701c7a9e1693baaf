"""The server's error tree: every failure a caller can see is one of these.

One table (``ERROR_STATUS``) maps codes to HTTP statuses; the API layer turns an
``SIEError`` into its route's error envelope (``contract/envelope.py``: SIE's
``{"detail": {"code", "message"}}``, OpenAI's ``{"error": {...}}`` on OpenAI's routes).
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    INVALID_INPUT = "INVALID_INPUT"
    MODEL_NOT_FOUND = "MODEL_NOT_FOUND"
    MODEL_LOADING = "MODEL_LOADING"
    MODEL_LOAD_FAILED = "MODEL_LOAD_FAILED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    QUEUE_FULL = "QUEUE_FULL"
    INFERENCE_ERROR = "INFERENCE_ERROR"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    FORBIDDEN = "FORBIDDEN"
    RATE_LIMITED = "RATE_LIMITED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    INVALID_OUTPUT = "INVALID_OUTPUT"
    NOT_FOUND = "NOT_FOUND"
    NON_FINITE_OUTPUT = "NON_FINITE_OUTPUT"


ERROR_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.MODEL_NOT_FOUND: 404,
    ErrorCode.MODEL_LOADING: 503,
    ErrorCode.MODEL_LOAD_FAILED: 502,
    ErrorCode.RESOURCE_EXHAUSTED: 503,
    ErrorCode.QUEUE_FULL: 503,
    ErrorCode.INFERENCE_ERROR: 500,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.DEADLINE_EXCEEDED: 504,
    ErrorCode.INVALID_OUTPUT: 502,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.NON_FINITE_OUTPUT: 502,
}


class SIEError(Exception):
    """A failure with a code, a message a person can act on, and an HTTP status."""

    code: ErrorCode = ErrorCode.INFERENCE_ERROR

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else ERROR_STATUS[self.code]
        self.retry_after = retry_after


class InvalidInput(SIEError):
    code = ErrorCode.INVALID_INPUT


class PayloadTooLarge(InvalidInput):
    def __init__(self, message: str):
        super().__init__(message, status=413)


class ModelNotFound(SIEError):
    code = ErrorCode.MODEL_NOT_FOUND


class ModelLoading(SIEError):
    code = ErrorCode.MODEL_LOADING


class ModelLoadFailed(SIEError):
    code = ErrorCode.MODEL_LOAD_FAILED


class ResourceExhausted(SIEError):
    code = ErrorCode.RESOURCE_EXHAUSTED


class QueueFull(SIEError):
    code = ErrorCode.QUEUE_FULL


class InferenceError(SIEError):
    code = ErrorCode.INFERENCE_ERROR


class Unauthenticated(SIEError):
    code = ErrorCode.UNAUTHENTICATED


class Forbidden(SIEError):
    code = ErrorCode.FORBIDDEN


class DeadlineExceeded(SIEError):
    """The caller's ``X-SIE-Timeout-Ms`` passed before its answer was ready; its queued work is dropped."""

    code = ErrorCode.DEADLINE_EXCEEDED


class InvalidOutput(SIEError):
    """The model answered, but not in the format its config names (a guard's verdict that cannot be read):
    not the caller's fault, and never replaced by a guess."""

    code = ErrorCode.INVALID_OUTPUT


class NonFiniteOutput(SIEError):
    """An encode or score item's output holds NaN or Inf even in float32 (``engine/finite.py``): that item's
    error, never a vector a caller would index or rank with; the rest of its batch is answered."""

    code = ErrorCode.NON_FINITE_OUTPUT


class RateLimited(SIEError):
    code = ErrorCode.RATE_LIMITED


class NotFound(SIEError):
    """A file or batch that does not exist, or that another key made (the same answer for both)."""

    code = ErrorCode.NOT_FOUND
