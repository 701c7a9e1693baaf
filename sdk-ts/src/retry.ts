/**
 * Retries and deadlines, with no I/O (as `RetryState` in `sdk/sie_sdk/_core.py`): the client asks for each
 * attempt's headers and time left, and, given what came back, is told "done", the typed error to throw,
 * or how long to wait before the next attempt.
 */

import { type APIError, SIEConnectionError, SIETimeoutError, apiError } from "./errors.js";
import { decodeBody } from "./wire.js";

/**
 * Which failed answers are retried, and how long to wait between attempts. Only 5xx answers whose code
 * is in `retryCodes` are retried, honouring Retry-After (else `defaultDelayMs`), each wait capped at
 * `maxDelayMs`, and never past the call's deadline. 4xx answers (429 included) are never retried.
 * Connection failures are retried only with `retryConnectErrors`.
 */
export interface RetryPolicy {
  retryCodes: ReadonlySet<string>;
  defaultDelayMs: number;
  maxDelayMs: number;
  /** null: as many as the deadline allows */
  maxAttempts: number | null;
  retryConnectErrors: boolean;
}

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({
  retryCodes: new Set(["MODEL_LOADING", "QUEUE_FULL", "RESOURCE_EXHAUSTED"]),
  defaultDelayMs: 1000,
  maxDelayMs: 10_000,
  maxAttempts: null,
  retryConnectErrors: false,
});

export const NO_RETRY: RetryPolicy = Object.freeze({ ...DEFAULT_RETRY, retryCodes: new Set<string>() });

/** `DEFAULT_RETRY` with some fields changed. */
export function retryPolicy(changes: Partial<RetryPolicy> = {}): RetryPolicy {
  return Object.freeze({ ...DEFAULT_RETRY, ...changes });
}

export const TIMEOUT_HEADER = "X-SIE-Timeout-Ms";

/** The attempts of one call, against one deadline. */
export class RetryState {
  attempts = 0;
  private readonly deadline: number | null;

  constructor(
    private readonly policy: RetryPolicy,
    timeoutMs: number | null,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.deadline = timeoutMs === null ? null : this.clock() + timeoutMs;
  }

  /** Milliseconds left (null: no deadline). */
  remaining(): number | null {
    return this.deadline === null ? null : this.deadline - this.clock();
  }

  /**
   * The next attempt's headers: for a whole (not streamed) POST answer, the time left as X-SIE-Timeout-Ms, so the
   * server drops the work once it passes. Throws SIETimeoutError when no time is left.
   */
  nextHeaders(what: string, headers: Record<string, string>, sendDeadline: boolean): Record<string, string> {
    const remaining = this.remaining();
    if (remaining !== null && remaining <= 0) throw new SIETimeoutError(`no time left for ${what}`);
    if (remaining === null || !sendDeadline) return headers;
    return { ...headers, [TIMEOUT_HEADER]: String(Math.max(1, Math.floor(remaining))) };
  }

  /** The wait before retrying this error answer, or throw it. */
  afterError(error: APIError): number {
    this.attempts += 1;
    const retried = error.status >= 500 && error.code !== null && this.policy.retryCodes.has(error.code);
    if (!retried) throw error;
    return this.delayOrThrow(error, error.retryAfterMs);
  }

  /** The wait before retrying a failed connection, or throw it. */
  afterTransportError(error: SIEConnectionError, connectFailed: boolean): number {
    this.attempts += 1;
    if (!(this.policy.retryConnectErrors && connectFailed)) throw error;
    return this.delayOrThrow(error, null);
  }

  private delayOrThrow(error: Error, retryAfterMs: number | null): number {
    const { maxAttempts, defaultDelayMs, maxDelayMs } = this.policy;
    if (maxAttempts !== null && this.attempts >= maxAttempts) throw error;
    const delay = Math.max(0, Math.min(retryAfterMs ?? defaultDelayMs, maxDelayMs));
    const remaining = this.remaining();
    if (remaining !== null && delay >= remaining) throw error; // the next attempt could not start in time
    return delay;
  }
}

/** The typed error for a non-2xx answer (envelope `{"detail": {"code", "message"}}`, else X-SIE-Error-Code). */
export function errorFromResponse(status: number, statusText: string, headers: Headers, content: Uint8Array): APIError {
  let code: string | null = null;
  let message: string | null = null;
  let body: unknown = null;
  try {
    body = decodeBody(content, headers.get("content-type"));
  } catch {
    body = null;
  }
  const detail = body !== null && typeof body === "object" ? (body as Record<string, unknown>)["detail"] : undefined;
  if (detail !== null && typeof detail === "object") {
    const fields = detail as Record<string, unknown>;
    if (fields["code"] !== undefined && fields["code"] !== null) code = String(fields["code"]);
    if (fields["message"] !== undefined && fields["message"] !== null) message = String(fields["message"]);
  } else if (typeof detail === "string") {
    message = detail;
  }
  code = code ?? headers.get("x-sie-error-code");
  if (!message) {
    message = new TextDecoder().decode(content).trim().slice(0, 1000) || statusText || `HTTP ${status}`;
  }
  return apiError(status, code, message, parseRetryAfter(headers.get("retry-after")));
}

/** Retry-After as milliseconds (seconds, or an HTTP date); null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  let ms: number;
  if (/^[0-9]+(\.[0-9]+)?$/.test(trimmed)) {
    ms = Number(trimmed) * 1000;
  } else {
    const when = Date.parse(trimmed);
    if (Number.isNaN(when)) return null;
    ms = when - now;
  }
  return Number.isFinite(ms) ? Math.max(0, ms) : null;
}
