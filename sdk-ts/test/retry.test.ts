/**
 * Retries, deadlines and error answers, against a scripted node:http server on loopback (the live server
 * cannot be made to answer 503 on demand); everything else is tested against the real server.
 */

import assert from "node:assert/strict";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import { decode } from "@msgpack/msgpack";
import {
  ERROR_TABLE,
  InvalidInputError,
  NO_RETRY,
  PayloadTooLargeError,
  QueueFullError,
  RateLimitedError,
  RequestError,
  SIEClient,
  SIEConnectionError,
  SIETimeoutError,
  SSEDecoder,
  ServerError,
  VERSION,
  apiError,
  parseRetryAfter,
  retryPolicy,
} from "@sie/sdk";

type Reply = (request: IncomingMessage, body: Buffer, response: ServerResponse) => void;

/** A loopback server answering each request with the next reply of the script (the last one repeats). */
class Scripted {
  readonly seen: Array<{ url: string; headers: IncomingMessage["headers"]; body: Buffer }> = [];
  private script: Reply[] = [];
  private readonly server: Server;

  constructor() {
    this.server = createServer((request, response) => {
      const parts: Buffer[] = [];
      request.on("data", (part: Buffer) => parts.push(part));
      request.on("end", () => {
        const body = Buffer.concat(parts);
        this.seen.push({ url: request.url ?? "", headers: request.headers, body });
        const reply = this.script[Math.min(this.seen.length - 1, this.script.length - 1)];
        reply?.(request, body, response);
      });
    });
  }

  start(): Promise<void> {
    return new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  play(...script: Reply[]): void {
    this.script = script;
    this.seen.length = 0;
  }

  stop(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const error =
  (status: number, code: string, retryAfter?: string): Reply =>
  (_request, _body, response) => {
    const headers: Record<string, string> = { "content-type": "application/json", "x-sie-error-code": code };
    if (retryAfter !== undefined) headers["retry-after"] = retryAfter;
    response.writeHead(status, headers).end(JSON.stringify({ detail: { code, message: `${code} here` } }));
  };
const encoded: Reply = (_request, _body, response) => {
  const answer = { model: "m", items: [{ id: "item-0", dense: { dims: 2, dtype: "float32", values: [0.6, 0.8] } }] };
  response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer));
};
const never: Reply = () => undefined;

describe("retries and deadlines", () => {
  const server = new Scripted();
  const fast = retryPolicy({ defaultDelayMs: 10, maxDelayMs: 50 });
  before(() => server.start());
  after(() => server.stop());

  test("503 QUEUE_FULL is retried after Retry-After, then the answer is read", async () => {
    server.play(error(503, "QUEUE_FULL", "0.05"), error(503, "MODEL_LOADING"), encoded);
    const started = performance.now();
    const result = await new SIEClient({ baseUrl: server.url, retry: fast, wire: "json" }).encode("org/m", "x");
    assert.equal(server.seen.length, 3);
    assert.ok(performance.now() - started >= 45, "Retry-After was not waited for");
    assert.deepEqual(Array.from(result.dense ?? []), [Math.fround(0.6), Math.fround(0.8)]);
    assert.equal(server.seen[0]?.url, "/v1/encode/org/m");
    assert.ok(Number(server.seen[0]?.headers["x-sie-timeout-ms"]) > 59_000);
    assert.equal(server.seen[0]?.headers["user-agent"], `sie-sdk-ts/${VERSION}`);
  });

  test("429, 4xx and MODEL_LOAD_FAILED are not retried; each is its typed error", async () => {
    const client = new SIEClient({ baseUrl: server.url, retry: fast });
    const cases = [
      [error(429, "RATE_LIMITED", "2"), RateLimitedError, 2000],
      [error(400, "INVALID_INPUT"), InvalidInputError, null],
      [error(413, "INVALID_INPUT"), PayloadTooLargeError, null],
      [error(502, "MODEL_LOAD_FAILED"), ERROR_TABLE["MODEL_LOAD_FAILED"]?.[0], null],
    ] as const;
    for (const [reply, cls, retryAfterMs] of cases) {
      server.play(reply, encoded);
      await assert.rejects(client.encode("m", "x"), (caught: unknown) => {
        assert.ok(cls !== undefined && caught instanceof cls, String(caught));
        assert.equal(caught.retryAfterMs, retryAfterMs);
        return true;
      });
      assert.equal(server.seen.length, 1);
    }
  });

  test("a retry that cannot start before the deadline is not made; retry: null never retries", async () => {
    server.play(error(503, "QUEUE_FULL", "5"), encoded);
    const started = performance.now();
    await assert.rejects(
      new SIEClient({ baseUrl: server.url }).encode("m", "x", {}, { timeoutMs: 1000 }),
      QueueFullError,
    );
    assert.ok(performance.now() - started < 900);
    server.play(error(503, "QUEUE_FULL", "0"), encoded);
    await assert.rejects(new SIEClient({ baseUrl: server.url, retry: null }).encode("m", "x"), QueueFullError);
    assert.equal(server.seen.length, 1);
  });

  test("a server that never answers: SIETimeoutError at the deadline", async () => {
    server.play(never);
    const started = performance.now();
    await assert.rejects(new SIEClient({ baseUrl: server.url, timeoutMs: 300 }).listModels(), SIETimeoutError);
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 290 && elapsed < 2000, `timed out after ${elapsed} ms`);
  });

  test("the caller's abort signal stops a call", async () => {
    server.play(never);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("user stop")), 50);
    await assert.rejects(new SIEClient({ baseUrl: server.url }).listModels({ signal: controller.signal }), /user stop/);
  });

  test("an unreachable server: SIEConnectionError, retried only with retryConnectErrors", async () => {
    const closed = new Scripted();
    await closed.start();
    const url = closed.url;
    await closed.stop();
    await assert.rejects(new SIEClient({ baseUrl: url }).health(), SIEConnectionError);
    const retrying = retryPolicy({ retryConnectErrors: true, defaultDelayMs: 20, maxAttempts: 3 });
    const started = performance.now();
    await assert.rejects(new SIEClient({ baseUrl: url, retry: retrying }).listModels(), SIEConnectionError);
    assert.ok(performance.now() - started >= 38, "connect failures were not retried");
  });

  test("msgpack requests: body, content type, priority and api key", async () => {
    server.play(encoded);
    const client = new SIEClient({ baseUrl: server.url, apiKey: "k1", priority: "batch", retry: NO_RETRY });
    await client.encode("m", [{ text: "a", images: [new Uint8Array([0x89, 0x50, 0x4e, 0x47, 13, 10, 26, 10])] }], {
      output_types: ["dense"],
      is_query: true,
    });
    const sent = server.seen[0];
    assert.equal(sent?.headers["content-type"], "application/msgpack");
    assert.equal(sent?.headers["accept"], "application/msgpack");
    assert.equal(sent?.headers["x-sie-priority"], "batch");
    assert.equal(sent?.headers["authorization"], "Bearer k1");
    const body = decode(sent?.body ?? new Uint8Array()) as {
      items: Array<{ images: Array<{ format: string }> }>;
      params: unknown;
    };
    assert.equal(body.items[0]?.images[0]?.format, "png");
    assert.deepEqual(body.params, { output_types: ["dense"], options: { is_query: true } });
  });
});

describe("no I/O", () => {
  test("the error table: by code, else by status class", () => {
    assert.ok(apiError(503, "QUEUE_FULL", "m") instanceof QueueFullError);
    assert.ok(apiError(418, "TEAPOT", "m") instanceof RequestError);
    assert.ok(apiError(599, null, "m") instanceof ServerError);
    assert.equal(apiError(undefined, "RATE_LIMITED", "m").status, 429);
    assert.equal(apiError(404, "MODEL_NOT_FOUND", "gone").message, "[404 MODEL_NOT_FOUND] gone");
  });

  test("Retry-After: seconds or an HTTP date", () => {
    assert.equal(parseRetryAfter("1.5"), 1500);
    assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 7_000), 3000);
    assert.equal(parseRetryAfter("soon"), null);
    assert.equal(parseRetryAfter(null), null);
  });

  test("server-sent events: chunks, [DONE], error events and cut-off streams", () => {
    const decoder = new SSEDecoder();
    assert.deepEqual(decoder.feed('data: {"text":"hi"}'), { text: "hi" });
    assert.equal(decoder.feed(""), null);
    assert.equal(decoder.feed("data: [DONE]"), null);
    assert.ok(decoder.done);
    assert.throws(() => new SSEDecoder().feed('data: {"detail":{"code":"QUEUE_FULL","message":"m"}}'), QueueFullError);
    assert.throws(() => new SSEDecoder().finish(), SIEConnectionError);
  });
});
