/**
 * `SIEClient`: each method builds its request (path, body, how to read the answer) and hands it to one send
 * loop, which asks `RetryState` what to do after each attempt. Only this file (fetch, timers) and the stream
 * reader in stream.ts do I/O.
 */

import { APIError, SIEConnectionError, SIEError, SIETimeoutError } from "./errors.js";
import * as results from "./results.js";
import { DEFAULT_RETRY, NO_RETRY, type RetryPolicy, RetryState, errorFromResponse } from "./retry.js";
import { events } from "./stream.js";
import type {
  EncodeParams,
  EncodeResult,
  ExtractParams,
  ExtractResult,
  GenerateChunk,
  GenerateParams,
  GenerateResult,
  ItemInput,
  ModelInfo,
  Priority,
  RequestOptions,
  ScoreParams,
  ScoreResult,
  Wire,
} from "./types.js";
import { VERSION } from "./version.js";
import { CONTENT_TYPES, decodeBody, encodeBody } from "./wire.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8080";

export interface ClientOptions {
  /** default `$SIE_URL` (in Node), else http://127.0.0.1:8080 */
  baseUrl?: string;
  /** each call's total budget in milliseconds, retries included; `null` = no limit (default 60 000) */
  timeoutMs?: number | null;
  /** sent as X-SIE-Priority unless a call names its own */
  priority?: Priority;
  /** request and answer bodies: "msgpack" (default) or "json" */
  wire?: Wire;
  /** which failed answers are retried (default `DEFAULT_RETRY`; `null`: none) */
  retry?: RetryPolicy | null;
  /** sent with every request (an Authorization here wins over `apiKey`) */
  headers?: Record<string, string>;
  /** sent as `Authorization: Bearer <key>` (default `$SIE_API_KEY` in Node) */
  apiKey?: string;
  /** replaces the global fetch (tests, proxies, other runtimes) */
  fetch?: typeof fetch;
}

interface Prepared<T> {
  method: "GET" | "POST";
  path: string;
  body?: unknown;
  parse: (body: unknown) => T;
  request: RequestOptions;
  stream?: boolean;
  retry?: RetryPolicy;
  /** false: the answer's body is not decoded (health's `ok`) */
  decode?: boolean;
}

const PRIORITIES: readonly string[] = ["interactive", "batch"];
const CONNECT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);
const env = (name: string): string | undefined =>
  (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
const inNode = (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node !== undefined;

/** Typed client for an SIE server. Every method takes `RequestOptions` last: priority, timeoutMs, signal. */
export class SIEClient {
  readonly baseUrl: string;
  readonly timeoutMs: number | null;
  readonly wire: Wire;
  private readonly priority: Priority | undefined;
  private readonly retry: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions = {}) {
    const wire = options.wire ?? "msgpack";
    if (!(wire in CONTENT_TYPES)) throw new TypeError(`wire must be 'msgpack' or 'json', not ${String(wire)}`);
    this.baseUrl = (options.baseUrl ?? env("SIE_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs === undefined ? 60_000 : options.timeoutMs;
    this.wire = wire;
    this.priority = checkPriority(options.priority);
    this.retry = options.retry === undefined ? DEFAULT_RETRY : (options.retry ?? NO_RETRY);
    const key = options.apiKey ?? env("SIE_API_KEY");
    this.headers = { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...options.headers };
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** Embed one item (one result) or a list of items (a list of results). */
  encode(model: string, items: ItemInput, params?: EncodeParams, request?: RequestOptions): Promise<EncodeResult>;
  encode(model: string, items: ItemInput[], params?: EncodeParams, request?: RequestOptions): Promise<EncodeResult[]>;
  async encode(
    model: string,
    items: ItemInput | ItemInput[],
    params: EncodeParams = {},
    request: RequestOptions = {},
  ): Promise<EncodeResult | EncodeResult[]> {
    const [wireItems, single] = results.normalizeItems(items);
    const { is_query, options, ...rest } = params;
    const merged = is_query === undefined ? options : { ...options, is_query };
    const body = { items: wireItems, params: defined({ ...rest, options: merged }) };
    const parse = (answer: unknown) => pick(single, results.parseEncode(answer));
    return this.call({ method: "POST", path: modelPath("encode", model), body, parse, request });
  }

  /** Rerank `items` against `query`; scores come back best first (rank 0). */
  async score(
    model: string,
    query: ItemInput,
    items: ItemInput[],
    params: ScoreParams = {},
    request: RequestOptions = {},
  ): Promise<ScoreResult> {
    const body = defined({ query: results.normalizeItem(query), items: items.map(results.normalizeItem), ...params });
    return this.call({ method: "POST", path: modelPath("score", model), body, parse: results.parseScore, request });
  }

  /** Entities (`labels`), a GLiNER2 `schema`, or what a document/image/speech model reads, per item. */
  extract(model: string, items: ItemInput, params?: ExtractParams, request?: RequestOptions): Promise<ExtractResult>;
  extract(
    model: string,
    items: ItemInput[],
    params?: ExtractParams,
    request?: RequestOptions,
  ): Promise<ExtractResult[]>;
  async extract(
    model: string,
    items: ItemInput | ItemInput[],
    params: ExtractParams = {},
    request: RequestOptions = {},
  ): Promise<ExtractResult | ExtractResult[]> {
    if (params.labels !== undefined && params.schema !== undefined) {
      throw new TypeError("extract takes labels (entity types) or schema (a GLiNER2 schema), not both");
    }
    if (typeof params.labels === "string") throw new TypeError("labels must be a list of strings, not one string");
    const [wireItems, single] = results.normalizeItems(items);
    const body = { items: wireItems, params: defined({ ...params }) };
    const parse = (answer: unknown) => pick(single, results.parseExtract(answer));
    return this.call({ method: "POST", path: modelPath("extract", model), body, parse, request });
  }

  /**
   * Generate from `prompt` or chat `messages`. With `stream: true` the request is sent now (errors throw here) and
   * the answer is an async iterator of chunks `{text: <delta>, ...}` ending at the server's `[DONE]`.
   */
  generate(
    model: string,
    params: GenerateParams & { stream: true },
    request?: RequestOptions,
  ): Promise<AsyncGenerator<GenerateChunk, void, undefined>>;
  generate(
    model: string,
    params: GenerateParams & { stream?: false },
    request?: RequestOptions,
  ): Promise<GenerateResult>;
  generate(
    model: string,
    params: GenerateParams,
    request?: RequestOptions,
  ): Promise<GenerateResult | AsyncGenerator<GenerateChunk, void, undefined>>;
  async generate(
    model: string,
    params: GenerateParams,
    request: RequestOptions = {},
  ): Promise<GenerateResult | AsyncGenerator<GenerateChunk, void, undefined>> {
    if ((params.prompt === undefined) === (params.messages === undefined)) {
      throw new TypeError("generate needs exactly one of prompt or messages");
    }
    const stop = typeof params.stop === "string" ? [params.stop] : params.stop;
    const stream = params.stream === true;
    const body = defined({ ...params, stop, stream });
    const prepared = { method: "POST", path: modelPath("generate", model), body, request, stream } as const;
    if (!stream) return this.call({ ...prepared, parse: results.parseGenerate });
    const sent = await this.send(prepared);
    if (sent.response.body === null) {
      sent.release();
      throw new SIEConnectionError("the generate stream has no body");
    }
    return events(sent.response.body, (error) => sent.translate(error), sent.release);
  }

  /** Every model the server knows, loaded or not. */
  async listModels(request: RequestOptions = {}): Promise<ModelInfo[]> {
    return this.call({ method: "GET", path: "/v1/models", parse: results.parseModelList, request });
  }

  /** One model's info; throws `ModelNotFoundError` for an unknown id. */
  async getModel(model: string, request: RequestOptions = {}): Promise<ModelInfo> {
    return this.call({ method: "GET", path: modelPath("models", model), parse: results.parseModel, request });
  }

  /** True when /healthz answers 2xx, false on an error status (not retried); an unreachable server throws. */
  async health(request: RequestOptions = {}): Promise<boolean> {
    try {
      const prepared = {
        method: "GET",
        path: "/healthz",
        parse: () => true,
        request,
        retry: NO_RETRY,
        decode: false,
      } as const;
      return await this.call(prepared);
    } catch (error) {
      if (error instanceof APIError) return false;
      throw error;
    }
  }

  private async call<T>(prepared: Prepared<T>): Promise<T> {
    const sent = await this.send(prepared);
    try {
      const content = new Uint8Array(await sent.response.arrayBuffer());
      if (prepared.decode === false) return prepared.parse(null);
      return prepared.parse(decodeBody(content, sent.response.headers.get("content-type")));
    } catch (error) {
      throw sent.translate(error);
    } finally {
      sent.release();
    }
  }

  /** Send with retries until a 2xx answer (returned, its body unread) or a typed error (thrown). */
  private async send(prepared: Omit<Prepared<unknown>, "parse">): Promise<Attempt & { response: Response }> {
    const { method, path, request } = prepared;
    const stream = prepared.stream === true;
    const timeout = request.timeoutMs === undefined ? this.timeoutMs : request.timeoutMs;
    const state = new RetryState(prepared.retry ?? this.retry, timeout);
    const headers = this.requestHeaders(stream, prepared.body !== undefined, request.priority);
    const content = prepared.body === undefined ? undefined : encodeBody(prepared.body, this.wire);
    const url = this.baseUrl + path;
    for (;;) {
      const attemptHeaders = state.nextHeaders(`${method} ${url}`, headers, method === "POST" && !stream);
      const attempt = new Attempt(state.remaining(), request.signal);
      let delay: number;
      try {
        const init: RequestInit = { method, headers: attemptHeaders, signal: attempt.signal, redirect: "manual" };
        if (content !== undefined) init.body = content as Uint8Array<ArrayBuffer>;
        const response = await this.fetchImpl(url, init);
        if (response.ok) return Object.assign(attempt, { response });
        const body = new Uint8Array(await response.arrayBuffer());
        attempt.release();
        delay = state.afterError(errorFromResponse(response.status, response.statusText, response.headers, body));
      } catch (error) {
        attempt.release();
        if (error instanceof APIError) throw error;
        const translated = attempt.translate(error);
        if (!(translated instanceof SIEConnectionError) || translated instanceof SIETimeoutError) throw translated;
        delay = state.afterTransportError(translated, connectFailed(error));
      }
      await sleep(delay, request.signal);
    }
  }

  private requestHeaders(stream: boolean, hasBody: boolean, priority: Priority | undefined): Record<string, string> {
    const contentType = CONTENT_TYPES[this.wire];
    const headers: Record<string, string> = { Accept: stream ? "text/event-stream" : contentType };
    if (inNode) headers["User-Agent"] = `sie-sdk-ts/${VERSION}`;
    if (hasBody) headers["Content-Type"] = contentType;
    const chosen = checkPriority(priority) ?? this.priority;
    if (chosen !== undefined) headers["X-SIE-Priority"] = chosen;
    return { ...headers, ...this.headers };
  }
}

/** One attempt's abort signal: the call's deadline, or the caller's own signal, whichever comes first. */
class Attempt {
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout> | undefined;
  private timedOut = false;
  private readonly onAbort: () => void;

  constructor(
    remainingMs: number | null,
    private readonly caller: AbortSignal | undefined,
  ) {
    this.signal = this.controller.signal;
    this.onAbort = () => this.controller.abort(caller?.reason);
    if (caller?.aborted) this.onAbort();
    caller?.addEventListener("abort", this.onAbort, { once: true });
    if (remainingMs !== null) {
      this.timer = setTimeout(() => {
        this.timedOut = true;
        this.controller.abort(new SIETimeoutError("the call's timeout ran out"));
      }, remainingMs);
    }
    this.release = this.release.bind(this);
  }

  /** Stop the timer and stop listening to the caller's signal (the attempt is over). */
  release(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.caller?.removeEventListener("abort", this.onAbort);
  }

  /** A fetch or body-read failure as the SDK's error; the caller's own abort is passed through as it is. */
  translate(error: unknown): unknown {
    if (error instanceof SIEError) return error;
    if (this.timedOut) return new SIETimeoutError(`request timed out: ${describe(error)}`, { cause: error });
    if (this.caller?.aborted) return error;
    return new SIEConnectionError(`could not talk to the server: ${describe(error)}`, { cause: error });
  }
}

function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } } | null)?.cause;
  const message = error instanceof Error ? error.message : String(error);
  return cause?.code ? `${message} (${cause.code})` : message;
}

function connectFailed(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string; errors?: Array<{ code?: string }> } } | null)?.cause;
  const codes = [cause?.code, ...(cause?.errors ?? []).map((inner) => inner.code)];
  return codes.some((code) => code !== undefined && CONNECT_CODES.has(code));
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function modelPath(route: string, model: string): string {
  if (!model) throw new TypeError("model must be a non-empty model id");
  return `/v1/${route}/${encodeURIComponent(model).replace(/%2F/gi, "/")}`;
}

function checkPriority(priority: Priority | undefined): Priority | undefined {
  if (priority !== undefined && !PRIORITIES.includes(priority)) {
    throw new TypeError(`priority must be 'interactive' or 'batch', not ${String(priority)}`);
  }
  return priority;
}

function pick<T>(single: boolean, list: T[]): T | T[] {
  return single ? results.only(list) : list;
}

/** The object without its undefined fields (what the caller did not set is not sent). */
function defined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
