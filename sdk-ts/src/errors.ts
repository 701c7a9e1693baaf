/**
 * The SDK's error tree and the one table from server error codes to error classes, the same as the
 * Python SDK's (`sdk/sie_sdk/errors.py`):
 *
 * ```
 * SIEError
 * ├── SIEConnectionError          transport failures (refused, reset, DNS, broken stream)
 * │   └── SIETimeoutError         the call's time budget ran out
 * ├── ProtocolError               a 2xx answer the SDK could not decode
 * └── APIError                    the server answered non-2xx (.status .code .message .retryAfterMs)
 *     ├── RequestError            4xx
 *     │   ├── InvalidInputError
 *     │   │   └── PayloadTooLargeError   413
 *     │   ├── ModelNotFoundError
 *     │   ├── AuthenticationError     401
 *     │   ├── PermissionDeniedError   403
 *     │   └── RateLimitedError        429
 *     └── ServerError             5xx
 *         ├── ModelLoadingError
 *         ├── ModelLoadFailedError
 *         ├── ResourceExhaustedError
 *         ├── QueueFullError
 *         ├── InferenceError
 *         └── DeadlineExceededError  504: the server dropped the work when X-SIE-Timeout-Ms passed
 * ```
 */

/** Base class of every error the SDK raises on purpose. */
export class SIEError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server could not be reached, or the connection broke mid-answer. */
export class SIEConnectionError extends SIEError {}

/** The call's total time budget (`timeoutMs`, retries included) ran out. */
export class SIETimeoutError extends SIEConnectionError {}

/** The server answered 2xx with a body the SDK could not decode. */
export class ProtocolError extends SIEError {}

/** The server answered with a non-2xx status and (usually) the error envelope `{"detail": {"code", "message"}}`. */
export class APIError extends SIEError {
  readonly status: number;
  readonly code: string | null;
  readonly retryAfterMs: number | null;
  /** The server's message, without the `[status CODE]` prefix. */
  readonly detail: string;

  constructor(message: string, status: number, code: string | null = null, retryAfterMs: number | null = null) {
    super(`[${status} ${code ?? "UNKNOWN"}] ${message}`);
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfterMs;
    this.detail = message;
  }
}

/** A 4xx: the request was wrong; retrying it unchanged will not help. */
export class RequestError extends APIError {}
export class InvalidInputError extends RequestError {}
export class PayloadTooLargeError extends InvalidInputError {}
export class ModelNotFoundError extends RequestError {}
/** 401: the server requires an API key (`apiKey` or `$SIE_API_KEY`). */
export class AuthenticationError extends RequestError {}
/** 403: the key is not one the server accepts. */
export class PermissionDeniedError extends RequestError {}
/** 429: this key has as many items in flight as the server allows; see `retryAfterMs`. */
export class RateLimitedError extends RequestError {}

/** A 5xx: the server could not serve the request. */
export class ServerError extends APIError {}
export class ModelLoadingError extends ServerError {}
export class ModelLoadFailedError extends ServerError {}
export class ResourceExhaustedError extends ServerError {}
export class QueueFullError extends ServerError {}
export class InferenceError extends ServerError {}
export class DeadlineExceededError extends ServerError {}

type APIErrorClass = new (
  message: string,
  status: number,
  code: string | null,
  retryAfterMs: number | null,
) => APIError;

/** The one table: server error code -> [error class, the status the server sends it with]. */
export const ERROR_TABLE: Readonly<Record<string, readonly [APIErrorClass, number]>> = {
  INVALID_INPUT: [InvalidInputError, 400],
  MODEL_NOT_FOUND: [ModelNotFoundError, 404],
  MODEL_LOADING: [ModelLoadingError, 503],
  MODEL_LOAD_FAILED: [ModelLoadFailedError, 502],
  RESOURCE_EXHAUSTED: [ResourceExhaustedError, 503],
  QUEUE_FULL: [QueueFullError, 503],
  INFERENCE_ERROR: [InferenceError, 500],
  UNAUTHENTICATED: [AuthenticationError, 401],
  FORBIDDEN: [PermissionDeniedError, 403],
  RATE_LIMITED: [RateLimitedError, 429],
  DEADLINE_EXCEEDED: [DeadlineExceededError, 504],
};

/**
 * The error for one error answer: by code first, then by status class. `status` undefined (an error
 * reported inside a stream) takes the code's usual status.
 */
export function apiError(
  status: number | undefined,
  code: string | null,
  message: string,
  retryAfterMs: number | null = null,
): APIError {
  const known = code !== null && Object.hasOwn(ERROR_TABLE, code) ? ERROR_TABLE[code] : undefined;
  const chosen = status ?? known?.[1] ?? 500;
  let cls: APIErrorClass;
  if (chosen === 413) cls = PayloadTooLargeError;
  else if (known !== undefined) cls = known[0];
  else if (chosen >= 400 && chosen < 500) cls = RequestError;
  else if (chosen >= 500) cls = ServerError;
  else cls = APIError;
  return new cls(message, chosen, code, retryAfterMs);
}
