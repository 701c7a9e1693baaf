/**
 * The built package against a real server: SIE_URL, and the model ids tests/sdk/test_typescript_sdk.py
 * passes from the shared test catalog (MiniLM, SmolLM2, a tiny GLiNER).
 */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  DeadlineExceededError,
  InvalidInputError,
  ModelNotFoundError,
  SIEClient,
  SIETimeoutError,
  type GenerateChunk,
  type NumericArray,
} from "@sie/sdk";

const URL = process.env["SIE_URL"];
const MINILM = process.env["SIE_TEST_MINILM"] ?? "sentence-transformers/all-MiniLM-L6-v2";
const SMOLLM = process.env["SIE_TEST_SMOLLM"] ?? "HuggingFaceTB/SmolLM2-135M-Instruct";
const NER = process.env["SIE_TEST_NER"] ?? "test/tiny-gliner";
const skip = URL === undefined ? "SIE_URL is not set (tests/sdk/test_typescript_sdk.py sets it)" : false;

const norm = (v: NumericArray): number => Math.sqrt(Array.from(v).reduce((sum, x) => sum + x * x, 0));

describe("against a live server", { skip }, () => {
  const msgpack = new SIEClient({ baseUrl: URL });
  const json = new SIEClient({ baseUrl: URL, wire: "json" });

  test("encode: 384-dim unit vectors, the same in msgpack and JSON", async () => {
    const texts = ["the invoice total is 420 euros", "cats sleep most of the day"];
    const packed = await msgpack.encode(MINILM, texts);
    const plain = await json.encode(MINILM, texts);
    assert.deepEqual(
      packed.map((r) => r.id),
      ["item-0", "item-1"],
    );
    for (const [i, result] of packed.entries()) {
      assert.equal(result.model, MINILM);
      assert.ok(result.dense instanceof Float32Array);
      assert.equal(result.dense.length, 384);
      assert.ok(Math.abs(norm(result.dense) - 1) < 1e-4, `norm ${norm(result.dense)}`);
      const other = plain[i]?.dense;
      assert.ok(other instanceof Float32Array && other.length === 384);
      const worst = Math.max(...Array.from(result.dense, (x, j) => Math.abs(x - (other[j] ?? Number.NaN))));
      assert.ok(worst < 1e-6, `msgpack and JSON differ by ${worst}`);
    }
    const cosine = Array.from(packed[0]?.dense ?? []).reduce((s, x, j) => s + x * (packed[1]?.dense?.[j] ?? 0), 0);
    assert.ok(cosine < 0.5, `unrelated texts have cosine ${cosine}`);
    const one = await msgpack.encode(MINILM, { id: "a", text: "hello" }, { is_query: true }, { priority: "batch" });
    assert.equal(one.id, "a");
    assert.equal(one.dense?.length, 384);
  });

  test("score: the matching document first", async () => {
    const result = await msgpack.score(MINILM, { id: "q", text: "how much is the invoice?" }, [
      { id: "cats", text: "cats sleep most of the day" },
      { id: "bill", text: "the invoice total is 420 euros" },
    ]);
    assert.equal(result.model, MINILM);
    assert.equal(result.query_id, "q");
    assert.deepEqual(
      result.scores.map((s) => s.item_id),
      ["bill", "cats"],
    );
    assert.deepEqual(
      result.scores.map((s) => s.rank),
      [0, 1],
    );
    assert.ok((result.scores[0]?.score ?? 0) > (result.scores[1]?.score ?? 0));
  });

  test("extract: entities with offsets into the text", async () => {
    const text = "Acme Corp sent an invoice to Bob";
    for (const client of [msgpack, json]) {
      const found = await client.extract(NER, { id: "doc", text }, { labels: ["company", "person"], threshold: 0 });
      assert.equal(found.id, "doc");
      assert.ok(found.entities.length > 0, "no entities at threshold 0");
      for (const entity of found.entities) {
        assert.ok(["company", "person"].includes(entity.label));
        assert.equal(text.slice(entity.start ?? -1, entity.end ?? -1), entity.text);
      }
      assert.deepEqual(found.relations, []);
    }
    await assert.rejects(msgpack.extract(MINILM, "x", { labels: ["person"] }), InvalidInputError);
  });

  test("generate: text and usage; the stream's deltas join to the same text", async () => {
    const params = { messages: [{ role: "user", content: "Name three colors." }], max_new_tokens: 8, temperature: 0 };
    const answer = await msgpack.generate(SMOLLM, params);
    assert.equal(answer.model, SMOLLM);
    assert.ok(answer.text.length > 0);
    assert.ok(["stop", "length"].includes(answer.finish_reason ?? ""));
    const { prompt_tokens, completion_tokens, total_tokens } = answer.usage;
    assert.ok(completion_tokens > 0 && completion_tokens <= 8);
    assert.equal(total_tokens, prompt_tokens + completion_tokens);
    const chunks: GenerateChunk[] = [];
    for await (const chunk of await json.generate(SMOLLM, { ...params, stream: true })) chunks.push(chunk);
    assert.ok(chunks.length >= 2, `only ${chunks.length} chunks`);
    assert.equal(chunks.map((c) => c.text ?? "").join(""), answer.text);
    const last = chunks.at(-1);
    assert.equal(last?.finish_reason, answer.finish_reason);
    assert.deepEqual(last?.usage, answer.usage);
  });

  test("generate: leaving a stream early closes it", async () => {
    const stream = await msgpack.generate(SMOLLM, { prompt: "Once upon a time", max_new_tokens: 64, stream: true });
    let seen = 0;
    for await (const chunk of stream) {
      assert.equal(typeof chunk.text, "string");
      seen += 1;
      break;
    }
    assert.equal(seen, 1);
    assert.deepEqual(await stream.next(), { done: true, value: undefined });
    assert.equal(await msgpack.health(), true); // the server goes on serving
  });

  test("models: listed, one by id, and an unknown id is MODEL_NOT_FOUND", async () => {
    const ids = new Set((await msgpack.listModels()).map((m) => m.id));
    for (const id of [MINILM, SMOLLM, NER]) assert.ok(ids.has(id), `${id} not listed`);
    const info = await json.getModel(MINILM);
    assert.equal(info.id, MINILM);
    assert.ok(info.tasks?.includes("encode"));
    for (const call of [() => msgpack.getModel("nobody/nothing"), () => json.encode("nobody/nothing", "x")]) {
      await assert.rejects(call(), (error: unknown) => {
        assert.ok(error instanceof ModelNotFoundError);
        assert.equal(error.status, 404);
        assert.equal(error.code, "MODEL_NOT_FOUND");
        return true;
      });
    }
  });

  test("a call's deadline: the typed deadline error, at the deadline", async () => {
    const started = performance.now();
    const long = { messages: [{ role: "user", content: "Count from 1 to 1000." }], max_new_tokens: 256 };
    await assert.rejects(msgpack.generate(SMOLLM, long, { timeoutMs: 400 }), (error: unknown) => {
      assert.ok(error instanceof SIETimeoutError || error instanceof DeadlineExceededError, String(error));
      return true;
    });
    // a stream's budget covers its whole body: it ends with SIETimeoutError, before or after its first chunk
    const streamed = async () => {
      for await (const _ of await msgpack.generate(SMOLLM, { ...long, stream: true }, { timeoutMs: 600 }));
    };
    await assert.rejects(streamed(), SIETimeoutError);
    const elapsed = performance.now() - started;
    assert.ok(elapsed < 5000, `the two calls took ${elapsed} ms`);
  });
});
