/**
 * Body codecs: msgpack (numeric arrays as msgpack-numpy maps) and JSON, as in `sdk/sie_sdk/_wire.py`.
 *
 * msgpack-numpy maps have bin keys: `{b"nd": true, b"type": "<f4", b"kind": b"", b"shape": [384], b"data": <bytes>}`.
 * Decoded bodies carry them as `NdArray`; only plain numeric dtypes are accepted.
 */

import { decode, encode } from "@msgpack/msgpack";

import { ProtocolError } from "./errors.js";
import type { NumericArray, Wire } from "./types.js";

export const MSGPACK_TYPE = "application/msgpack";
export const JSON_TYPE = "application/json";
export const CONTENT_TYPES: Readonly<Record<Wire, string>> = { msgpack: MSGPACK_TYPE, json: JSON_TYPE };

/** A msgpack-numpy array after decoding: its flat values and its shape. */
export class NdArray {
  constructor(
    readonly values: NumericArray,
    readonly shape: readonly number[],
  ) {}
}

const utf8 = new TextDecoder("utf-8");

/** Serialise a request body for `wire` (bytes become msgpack bin, or base64 in JSON). */
export function encodeBody(body: unknown, wire: Wire): Uint8Array {
  if (wire === "msgpack") return encode(body, { ignoreUndefined: true });
  return new TextEncoder().encode(JSON.stringify(body, jsonReplacer));
}

/** Deserialise a response body, choosing the codec from its Content-Type. */
export function decodeBody(content: Uint8Array, contentType: string | null): unknown {
  if (content.length === 0) return null;
  try {
    if (contentType !== null && contentType.toLowerCase().includes("msgpack")) {
      return revive(decode(content, { mapKeyConverter }));
    }
    return JSON.parse(utf8.decode(content));
  } catch (error) {
    if (error instanceof ProtocolError) throw error;
    throw new ProtocolError(`could not decode the response body (${contentType}): ${String(error)}`, { cause: error });
  }
}

function mapKeyConverter(key: unknown): string | number {
  if (typeof key === "string" || typeof key === "number") return key;
  if (key instanceof Uint8Array) return utf8.decode(key);
  throw new ProtocolError(`unexpected msgpack map key of type ${typeof key}`);
}

function jsonReplacer(this: unknown, _key: string, value: unknown): unknown {
  if (value instanceof Uint8Array) return toBase64(value);
  if (ArrayBuffer.isView(value) && !(value instanceof DataView))
    return Array.from(value as unknown as ArrayLike<number>);
  return value;
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let at = 0; at < bytes.length; at += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(at, at + 0x8000));
  }
  return btoa(binary);
}

/** msgpack-numpy maps anywhere in a decoded body become `NdArray`s. */
function revive(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(revive);
  if (value === null || typeof value !== "object" || value instanceof Uint8Array) return value;
  const map = value as Record<string, unknown>;
  if (map["nd"] === true && map["data"] instanceof Uint8Array && Array.isArray(map["shape"])) return ndArray(map);
  for (const key of Object.keys(map)) map[key] = revive(map[key]);
  return map;
}

function ndArray(map: Record<string, unknown>): NdArray {
  const kind = map["kind"];
  if (!(kind === undefined || kind === "" || (kind instanceof Uint8Array && kind.length === 0))) {
    throw new ProtocolError("refusing a msgpack-numpy array of a non-plain kind");
  }
  const type = map["type"] instanceof Uint8Array ? utf8.decode(map["type"]) : map["type"];
  const shape = map["shape"] as unknown[];
  if (typeof type !== "string") throw new ProtocolError("msgpack-numpy array without a dtype string");
  if (!shape.every((d) => Number.isInteger(d) && (d as number) >= 0)) {
    throw new ProtocolError(`bad msgpack-numpy shape ${JSON.stringify(shape)}`);
  }
  const dims = shape as number[];
  const data = map["data"] as Uint8Array;
  const count = dims.reduce((a, b) => a * b, 1);
  return new NdArray(fromBytes(type, data, count), dims);
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A numpy dtype string ("<f4", "|i1", "<f2", ...) and its little-endian bytes as a typed array. */
export function fromBytes(type: string, data: Uint8Array, count: number): NumericArray {
  const order = type[0];
  const code = order === "<" || order === ">" || order === "|" || order === "=" ? type.slice(1) : type;
  const size = Number(code.slice(1));
  if (data.length !== count * size) {
    throw new ProtocolError(`msgpack-numpy payload is ${data.length} bytes, ${count} of ${type} need ${count * size}`);
  }
  if (order === ">" && size > 1) throw new ProtocolError(`big-endian arrays are not accepted (${type})`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const copy = data.slice().buffer; // aligned, and the result does not hold the whole response alive
  switch (code) {
    case "f4":
      return LITTLE_ENDIAN
        ? new Float32Array(copy)
        : Float32Array.from({ length: count }, (_, i) => view.getFloat32(i * 4, true));
    case "f8":
      return LITTLE_ENDIAN
        ? new Float64Array(copy)
        : Float64Array.from({ length: count }, (_, i) => view.getFloat64(i * 8, true));
    case "f2":
      return Float32Array.from({ length: count }, (_, i) => halfToFloat(view.getUint16(i * 2, true)));
    case "i1":
      return new Int8Array(copy);
    case "u1":
    case "b1":
      return new Uint8Array(copy);
    case "i2":
      return Int16Array.from({ length: count }, (_, i) => view.getInt16(i * 2, true));
    case "u2":
      return Uint16Array.from({ length: count }, (_, i) => view.getUint16(i * 2, true));
    case "i4":
      return Int32Array.from({ length: count }, (_, i) => view.getInt32(i * 4, true));
    case "u4":
      return Uint32Array.from({ length: count }, (_, i) => view.getUint32(i * 4, true));
    case "i8":
      return Float64Array.from({ length: count }, (_, i) => Number(view.getBigInt64(i * 8, true)));
    case "u8":
      return Float64Array.from({ length: count }, (_, i) => Number(view.getBigUint64(i * 8, true)));
    default:
      throw new ProtocolError(`refusing non-numeric array dtype ${type}`);
  }
}

/** A JSON list of numbers as the typed array its wire dtype name ("float32", "int8", "binary", ...) calls for. */
export function fromList(values: unknown, dtype: unknown): NumericArray {
  if (values instanceof NdArray) return values.values;
  if (!Array.isArray(values) || !values.every((v) => typeof v === "number")) {
    throw new ProtocolError("expected a list of numbers");
  }
  const numbers = values as number[];
  switch (dtype) {
    case "float64":
      return Float64Array.from(numbers);
    case "int8":
      return Int8Array.from(numbers);
    case "uint8":
    case "binary":
    case "ubinary":
      return Uint8Array.from(numbers);
    case "int32":
      return Int32Array.from(numbers);
    default: // float32, float16 and bfloat16 (travel widened), or absent
      return Float32Array.from(numbers);
  }
}

function halfToFloat(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}
