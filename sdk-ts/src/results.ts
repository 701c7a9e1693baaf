/**
 * Items going out and answers coming back (no I/O), as `_items.py` and `_results.py` of the Python SDK:
 * msgpack answers carry `NdArray`s, JSON answers lists, and both become the same typed arrays here.
 */

import { ProtocolError } from "./errors.js";
import type {
  BytesInput,
  EncodeResult,
  ExtractResult,
  GenerateResult,
  ItemInput,
  ModelInfo,
  NumericArray,
  ScoreResult,
  SparseVector,
} from "./types.js";
import { NdArray, fromList } from "./wire.js";

type Wire = Record<string, unknown>;

const MAGIC: ReadonlyArray<readonly [number[], string]> = [
  [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], "png"],
  [[0xff, 0xd8, 0xff], "jpeg"],
  [[0x47, 0x49, 0x46, 0x38], "gif"],
  [[0x42, 0x4d], "bmp"],
];

/** Wire items from one item or a list; the flag says whether one item was passed. */
export function normalizeItems(items: ItemInput | ItemInput[]): [Wire[], boolean] {
  if (Array.isArray(items)) return [items.map(normalizeItem), false];
  return [[normalizeItem(items)], true];
}

export function normalizeItem(item: ItemInput): Wire {
  if (typeof item === "string") return { text: item };
  if (item === null || typeof item !== "object") throw new TypeError("an item must be a string or an Item object");
  const wire: Wire = { ...item };
  if (item.images !== undefined) wire["images"] = item.images.map(encodeImage);
  if (item.document instanceof Uint8Array) wire["document"] = { data: item.document };
  return wire;
}

function encodeImage(image: Uint8Array | BytesInput): BytesInput {
  if (!(image instanceof Uint8Array)) return image;
  for (const [magic, format] of MAGIC) {
    if (magic.every((byte, at) => image[at] === byte)) return { data: image, format };
  }
  const riff = String.fromCharCode(...image.subarray(0, 4)) + String.fromCharCode(...image.subarray(8, 12));
  if (riff === "RIFFWEBP") return { data: image, format: "webp" };
  throw new TypeError("unrecognised image bytes: pass {data, format} to name the format");
}

export function parseEncode(body: unknown): EncodeResult[] {
  const answer = expectObject(body, "encode");
  const model = answer["model"];
  const timing = answer["timing"];
  return expectItems(answer, "encode").map((raw) => {
    const result: EncodeResult = {};
    if (typeof raw["id"] === "string") result.id = raw["id"];
    if (raw["dense"] != null) result.dense = dense(raw["dense"]);
    if (raw["sparse"] != null) result.sparse = sparse(raw["sparse"]);
    if (raw["multivector"] != null) result.multivector = multivector(raw["multivector"]);
    if (raw["muvera"] != null) result.muvera = dense(raw["muvera"]);
    if (Array.isArray(raw["chunks"])) {
      result.chunks = raw["chunks"].map((c: Wire) => ({
        start: Number(c["start"]),
        end: Number(c["end"]),
        dense: dense(c["dense"]),
      }));
    }
    if (timing != null) result.timing = timing as EncodeResult["timing"] & object;
    if (typeof model === "string") result.model = model;
    return result;
  });
}

export function parseScore(body: unknown): ScoreResult {
  const answer = expectObject(body, "score");
  if (!Array.isArray(answer["scores"])) throw new ProtocolError("score answer has no 'scores' list");
  const queryId = answer["query_id"];
  return {
    model: typeof answer["model"] === "string" ? answer["model"] : "",
    query_id: typeof queryId === "string" ? queryId : null,
    scores: answer["scores"] as ScoreResult["scores"],
  };
}

export function parseExtract(body: unknown): ExtractResult[] {
  const answer = expectObject(body, "extract");
  const model = answer["model"];
  return expectItems(answer, "extract").map((raw) => {
    const schemaResult = (raw["schema_result"] ?? null) as ExtractResult["schema_result"];
    const lists = { entities: [], relations: [], classifications: [], objects: [], data: {} };
    const result = { ...lists, ...raw, schema_result: schemaResult } as unknown as ExtractResult;
    if (typeof model === "string") result.model = model;
    return result;
  });
}

export function parseGenerate(body: unknown): GenerateResult {
  return expectObject(body, "generate") as unknown as GenerateResult;
}

export function parseModelList(body: unknown): ModelInfo[] {
  const models = expectObject(body, "models")["models"];
  if (!Array.isArray(models)) throw new ProtocolError("models answer has no 'models' list");
  return models as ModelInfo[];
}

export function parseModel(body: unknown): ModelInfo {
  return expectObject(body, "model") as ModelInfo;
}

/** The one result of a one-item call. */
export function only<T>(results: T[]): T {
  if (results.length !== 1) throw new ProtocolError(`expected 1 result for 1 item, got ${results.length}`);
  return results[0] as T;
}

function dense(raw: unknown): NumericArray {
  if (raw instanceof NdArray || Array.isArray(raw)) return fromList(raw, null); // a bare vector
  const out = expectObject(raw, "dense");
  return fromList(out["values"], out["dtype"]);
}

function sparse(raw: unknown): SparseVector {
  const out = expectObject(raw, "sparse");
  return { indices: fromList(out["indices"] ?? [], "int32"), values: fromList(out["values"], out["dtype"]) };
}

function multivector(raw: unknown): NumericArray[] {
  const out = expectObject(raw, "multivector");
  const values = out["values"];
  let width = typeof out["token_dims"] === "number" ? out["token_dims"] : 0;
  if (values instanceof NdArray && values.shape.length === 2) width = values.shape[1] ?? width;
  const flat =
    Array.isArray(values) && Array.isArray(values[0])
      ? fromList(values.flat(), out["dtype"])
      : fromList(values, out["dtype"]);
  if (width <= 0) return [flat];
  const rows: NumericArray[] = [];
  for (let at = 0; at < flat.length; at += width) rows.push(flat.subarray(at, at + width));
  return rows;
}

function expectObject(value: unknown, what: string): Wire {
  if (value === null || typeof value !== "object" || Array.isArray(value) || value instanceof NdArray) {
    throw new ProtocolError(`${what} answer is not an object`);
  }
  return value as Wire;
}

function expectItems(answer: Wire, what: string): Wire[] {
  const items = answer["items"];
  if (!Array.isArray(items) || !items.every((item) => item !== null && typeof item === "object")) {
    throw new ProtocolError(`${what} answer has no 'items' list of objects`);
  }
  return items as Wire[];
}
