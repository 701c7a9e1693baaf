/** The SIE TypeScript SDK: `new SIEClient()`, its typed errors, retry policies and types. */

export { DEFAULT_BASE_URL, SIEClient, type ClientOptions } from "./client.js";
export {
  APIError,
  AuthenticationError,
  DeadlineExceededError,
  ERROR_TABLE,
  InferenceError,
  InvalidInputError,
  ModelLoadFailedError,
  ModelLoadingError,
  ModelNotFoundError,
  PayloadTooLargeError,
  PermissionDeniedError,
  ProtocolError,
  QueueFullError,
  RateLimitedError,
  RequestError,
  ResourceExhaustedError,
  SIEConnectionError,
  SIEError,
  SIETimeoutError,
  ServerError,
  apiError,
} from "./errors.js";
export {
  DEFAULT_RETRY,
  NO_RETRY,
  RetryState,
  TIMEOUT_HEADER,
  parseRetryAfter,
  retryPolicy,
  type RetryPolicy,
} from "./retry.js";
export { SSEDecoder } from "./stream.js";
export type * from "./types.js";
export { VERSION } from "./version.js";
export { CONTENT_TYPES, JSON_TYPE, MSGPACK_TYPE, decodeBody, encodeBody } from "./wire.js";
