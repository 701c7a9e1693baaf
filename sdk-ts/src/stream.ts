/**
 * A streaming generate answer: server-sent events `data: {json}` until `data: [DONE]`, read from fetch's
 * ReadableStream as an async iterator (as `SSEDecoder` in `sdk/sie_sdk/_results.py`).
 */

import { ProtocolError, SIEConnectionError, apiError } from "./errors.js";
import type { GenerateChunk } from "./types.js";

/** Reads `data:` lines; a chunk shaped like the error envelope throws its typed error. */
export class SSEDecoder {
  done = false;

  feed(line: string): GenerateChunk | null {
    if (this.done || !line.startsWith("data:")) return null; // blank separators, comments, event/id fields
    const data = line.slice(5).trim();
    if (data === "[DONE]") {
      this.done = true;
      return null;
    }
    if (!data) return null;
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch (error) {
      throw new ProtocolError(`bad server-sent event data: ${data.slice(0, 200)}`, { cause: error });
    }
    if (chunk === null || typeof chunk !== "object" || Array.isArray(chunk)) {
      throw new ProtocolError(`server-sent event is not an object: ${data.slice(0, 200)}`);
    }
    const detail = (chunk as Record<string, unknown>)["detail"];
    if (detail !== null && typeof detail === "object" && "code" in detail) {
      const fields = detail as Record<string, unknown>;
      throw apiError(undefined, String(fields["code"]), String(fields["message"] ?? ""));
    }
    return chunk as GenerateChunk;
  }

  /** At the end of the body: a stream that stopped before `[DONE]` was cut off. */
  finish(): void {
    if (!this.done) throw new SIEConnectionError("the generate stream ended before [DONE]");
  }
}

/**
 * The chunks of one streamed answer. `translate` turns a read failure (reset, abort by the deadline) into
 * the SDK's error; `release` runs once when the iterator ends, however it ends (a `break` cancels the body,
 * which closes the connection and stops the generation on the server).
 */
export async function* events(
  body: ReadableStream<Uint8Array>,
  translate: (error: unknown) => unknown,
  release: () => void,
): AsyncGenerator<GenerateChunk, void, undefined> {
  const reader = body.getReader();
  const text = new TextDecoder("utf-8");
  const decoder = new SSEDecoder();
  let buffered = "";
  try {
    for (;;) {
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        read = await reader.read();
      } catch (error) {
        throw translate(error);
      }
      buffered += read.done ? text.decode() : text.decode(read.value, { stream: true });
      const lines = buffered.split(/\r?\n/);
      buffered = read.done ? "" : (lines.pop() ?? "");
      for (const line of lines) {
        const chunk = decoder.feed(line);
        if (chunk !== null) yield chunk;
        if (decoder.done) return;
      }
      if (read.done) break;
    }
    decoder.finish();
  } finally {
    release();
    reader.cancel().catch(() => undefined);
  }
}
