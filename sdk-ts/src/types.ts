/**
 * The shapes the SDK takes and returns. Request parameters and results use the wire's field names
 * (as the HTTP API and the Python SDK do); vectors arrive as typed arrays whichever wire carried them.
 */

export type Priority = "interactive" | "batch";
export type Wire = "msgpack" | "json";
export type Truncation = "end" | "error" | "chunk";

/** A vector as it came from the server: Float32Array for float32/float16/bfloat16, Int8Array for int8, ... */
export type NumericArray =
  Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array | Uint16Array | Int32Array | Uint32Array;

/** Encoded bytes and a format hint ("png", "jpeg", "pdf", "wav", ...); the server sniffs the bytes. */
export interface BytesInput {
  data: Uint8Array;
  format?: string;
}

export interface AudioInput extends BytesInput {
  /** for raw 16-bit mono "pcm" */
  sample_rate?: number;
}

/** One input: text, images, a document or audio. `id` is echoed back in results (else `item-{index}`). */
export interface Item {
  id?: string;
  text?: string;
  /** encoded images: bytes (the format is read from their first bytes) or `{data, format}` */
  images?: Array<Uint8Array | BytesInput>;
  document?: Uint8Array | BytesInput;
  audio?: AudioInput;
  metadata?: Record<string, unknown>;
  /** encode only, late chunking: `[start, end)` character spans of `text`, one vector each */
  spans?: Array<[number, number]>;
}

/** What the methods take for an item: an `Item` or its text. */
export type ItemInput = Item | string;

export interface Message {
  role: string;
  content: string;
}

/** Per call: the X-SIE-Priority class, the total time budget (null: none) and a caller's abort signal. */
export interface RequestOptions {
  priority?: Priority;
  /** total milliseconds for this call, retries included; `null` = no limit; absent = the client's */
  timeoutMs?: number | null;
  signal?: AbortSignal;
}

export interface EncodeParams {
  /** among "dense", "sparse", "multivector" (and "muvera" for multivector models) */
  output_types?: string[];
  output_dtype?: string;
  instruction?: string;
  is_query?: boolean;
  options?: Record<string, unknown>;
  /** cut dense vectors to one of the model's Matryoshka dims */
  dims?: number;
  truncation?: Truncation;
}

export interface ScoreParams {
  instruction?: string;
  options?: Record<string, unknown>;
}

/** GLiNER2 schema extraction: entity types, classifications, structures (records of fields), relations. */
export interface ExtractSchema {
  entities?: string[];
  classifications?: Record<string, { labels: string[]; multi_label?: boolean }>;
  structures?: Record<string, Record<string, { dtype?: "str" | "list"; description?: string; choices?: string[] }>>;
  relations?: string[];
}

export interface ExtractParams {
  /** entity types (each result's `entities`); or `schema`, not both */
  labels?: string[];
  schema?: ExtractSchema;
  threshold?: number;
  options?: Record<string, unknown>;
}

export interface GenerateParams {
  /** exactly one of `prompt` and `messages` */
  prompt?: string;
  messages?: Message[];
  max_new_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  seed?: number;
  /** constrained output: exactly one of `json_schema`, `regex`, `ebnf` */
  grammar?: Record<string, unknown>;
  stream?: boolean;
}

export interface Timing {
  total_ms: number;
  queue_ms: number;
  tokenization_ms: number;
  inference_ms: number;
}

export interface SparseVector {
  indices: NumericArray;
  values: NumericArray;
}

export interface SpanChunk {
  start: number;
  end: number;
  dense: NumericArray;
}

/** One encoded item; only the outputs the server returned are present. `multivector` is one row per token. */
export interface EncodeResult {
  id?: string;
  dense?: NumericArray;
  sparse?: SparseVector;
  multivector?: NumericArray[];
  muvera?: NumericArray;
  chunks?: SpanChunk[];
  timing?: Timing;
  model?: string;
}

export interface ScoreEntry {
  item_id: string;
  score: number;
  rank: number;
}

/** Scores sorted best first (`rank` 0 is best). */
export interface ScoreResult {
  model: string;
  query_id: string | null;
  scores: ScoreEntry[];
}

/** A span of the item's text (`start`/`end` character offsets), or text found in an image (`bbox` [x, y, w, h]). */
export interface Entity {
  text: string;
  label: string;
  score: number;
  start?: number | null;
  end?: number | null;
  bbox?: number[] | null;
  page?: number | null;
}

export interface Relation {
  head: string;
  tail: string;
  relation: string;
  score: number;
}

export interface Classification {
  label: string;
  score: number;
}

export interface DetectedObject {
  label: string;
  score: number;
  bbox: number[];
  page?: number | null;
}

/** Why this item alone failed (its neighbours were answered). */
export interface ItemError {
  code: string;
  message: string;
}

/** One item's answer: every list is present (empty when unused). */
export interface ExtractResult {
  id?: string;
  entities: Entity[];
  relations: Relation[];
  classifications: Classification[];
  objects: DetectedObject[];
  data: Record<string, unknown>;
  error?: ItemError;
  /** the answer to `schema` extraction, keyed by the schema's own names (null for `labels`) */
  schema_result: Record<string, Record<string, unknown[]>> | null;
  model?: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface GenerateResult {
  model: string;
  text: string;
  finish_reason: string | null;
  usage: Usage;
}

/** One server-sent event of a streamed generate: `text` is the new delta; the last has `finish_reason`, `usage`. */
export interface GenerateChunk {
  model?: string;
  text?: string;
  finish_reason?: string | null;
  usage?: Usage;
}

/** What the server reports about a model; servers may add keys. */
export interface ModelInfo {
  id: string;
  tasks?: string[];
  dims?: Record<string, number> | number | null;
  state?: string;
  loaded?: boolean;
  resident_bytes?: number | null;
  weights_source?: string | null;
  last_error?: string | null;
  [key: string]: unknown;
}
