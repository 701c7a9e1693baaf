"""OpenAI's Batch API through the official ``openai`` client, unmodified, against a real server."""

from __future__ import annotations

import httpx
import numpy as np
import openai
import pytest

from tests.batches.conftest import ADMIN, EMBEDDER, KEY_B, LLM, RERANKER, make_client
from tests.batches.helpers import finished, jsonl, line, records, run_batch, upload
from tests.helpers.server import ServerProcess

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])
TEXTS = ["hello world", "invoice total due by 31 March", "quarterly revenue grew", "lunch is at noon"]


def test_embeddings_batch_end_to_end(client: openai.OpenAI) -> None:
    lines = [line(f"req-{i}", "/v1/embeddings", {"model": EMBEDDER, "input": t}) for i, t in enumerate(TEXTS)]
    batch = run_batch(client, lines, "/v1/embeddings")
    assert batch.status == "completed", batch
    assert batch.request_counts is not None
    assert (batch.request_counts.total, batch.request_counts.completed, batch.request_counts.failed) == (4, 4, 0)
    assert batch.output_file_id and batch.error_file_id is None
    assert batch.completed_at and batch.in_progress_at and batch.finalizing_at and batch.expires_at
    out = records(client, batch.output_file_id)
    assert [r["custom_id"] for r in out] == [f"req-{i}" for i in range(4)]
    live = client.embeddings.create(model=EMBEDDER, input=TEXTS, encoding_format="float")
    for record, expected in zip(out, live.data, strict=True):
        assert record["error"] is None and record["response"]["status_code"] == 200
        assert record["id"].startswith("batch_req_") and record["response"]["request_id"] == record["id"]
        got = np.array(record["response"]["body"]["data"][0]["embedding"], dtype="<f4")
        np.testing.assert_allclose(got, np.array(expected.embedding, dtype="<f4"), atol=1e-6)
    output = client.files.retrieve(batch.output_file_id)
    assert output.purpose == "batch_output" and output.bytes == len(client.files.content(batch.output_file_id).content)


def test_chat_completions_and_native_lines(client: openai.OpenAI) -> None:
    chat = [
        line(f"chat-{i}", "/v1/chat/completions", {"model": LLM, "messages": [{"role": "user", "content": t}],
             "max_tokens": 4})
        for i, t in enumerate(TEXTS[:2])
    ]  # fmt: skip
    batch = run_batch(client, chat, "/v1/chat/completions")
    assert batch.status == "completed" and batch.request_counts and batch.request_counts.completed == 2, batch
    for record in records(client, batch.output_file_id):
        assert record["response"]["body"]["object"] == "chat.completion"
    native = [
        line("enc-0", f"/v1/encode/{EMBEDDER}", {"items": [{"text": TEXTS[0]}]}),
        line("enc-1", f"/v1/encode/{EMBEDDER}", {"items": [{"text": TEXTS[1]}, {"text": TEXTS[2]}]}),
    ]
    batch = run_batch(client, native, "/v1/encode")
    out = records(client, batch.output_file_id)
    assert [len(r["response"]["body"]["items"]) for r in out] == [1, 2]
    score = [line("s", f"/v1/score/{RERANKER}", {"query": {"text": "invoice"}, "items": [{"text": t} for t in TEXTS]})]
    batch = run_batch(client, score, "/v1/score")
    assert len(records(client, batch.output_file_id)[0]["response"]["body"]["scores"]) == 4
    rerank = [line("r", "/v1/rerank", {"model": RERANKER, "query": "invoice", "documents": TEXTS})]
    batch = run_batch(client, rerank, "/v1/rerank")
    assert len(records(client, batch.output_file_id)[0]["response"]["body"]["results"]) == 4


def test_bad_lines_get_error_entries_and_the_batch_goes_on(client: openai.OpenAI) -> None:
    good = {"model": EMBEDDER, "input": "fine"}
    lines = [
        line("ok-0", "/v1/embeddings", good),
        line("wrong-url", "/v1/chat/completions", good),
        line("no-model", "/v1/embeddings", {"model": "nope/no-such-model", "input": "x"}),
        line("too-big", "/v1/embeddings", {"model": EMBEDDER, "input": "word " * 8000}),
        line("ok-0", "/v1/embeddings", good),  # a custom_id used before
        {"method": "POST", "url": "/v1/embeddings", "body": good},  # no custom_id
        line("bad-body", "/v1/embeddings", {"model": EMBEDDER}),
        line("ok-1", "/v1/embeddings", good),
    ]
    batch = run_batch(client, lines, "/v1/embeddings")
    assert batch.status == "completed"
    assert batch.request_counts and (batch.request_counts.completed, batch.request_counts.failed) == (2, 6)
    assert [r["custom_id"] for r in records(client, batch.output_file_id)] == ["ok-0", "ok-1"]
    errors = {r["custom_id"] or "(none)": r for r in records(client, batch.error_file_id)}
    assert errors["wrong-url"]["error"]["code"] == "invalid_url" and errors["wrong-url"]["response"] is None
    assert errors["no-model"]["response"]["status_code"] == 404
    assert errors["no-model"]["error"]["code"] == "model_not_found"
    assert errors["too-big"]["error"]["code"] == "request_too_large"
    assert errors["(none)"]["error"]["code"] == "missing_custom_id"
    assert errors["bad-body"]["response"]["status_code"] == 400
    assert len(records(client, batch.error_file_id)) == 6  # ok-0's second line included


def test_a_file_that_is_not_jsonl_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="not a JSON object"):
        upload(client, b'{"custom_id": "a"}\nthis is not json\n')
    with pytest.raises(openai.BadRequestError, match="no lines"):
        upload(client, b"\n\n")


def test_caps_on_lines_and_bytes(client: openai.OpenAI, batch_server: ServerProcess) -> None:
    from tests.batches.conftest import MAX_FILE_BYTES, MAX_LINES

    many = [line(f"l{i}", "/v1/embeddings", {"model": EMBEDDER, "input": "x"}) for i in range(MAX_LINES + 1)]
    with pytest.raises(openai.BadRequestError, match="--batch-max-lines"):
        upload(client, jsonl(many))
    big = jsonl([line("big", "/v1/embeddings", {"model": EMBEDDER, "input": "y" * 1000})] * 400)
    assert len(big) > MAX_FILE_BYTES
    with pytest.raises(openai.APIStatusError) as refused:
        upload(client, big)
    assert refused.value.status_code == 413
    before = client.files.list().data
    # refused while read: a chunked upload (no Content-Length) is cut off past the cap, and nothing is kept
    boundary = "cap-test-boundary"

    def body() -> object:
        yield f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'.encode()
        yield f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n\r\n'.encode()
        for _ in range(MAX_FILE_BYTES // 10_000 + 10):  # 10 kB lines: the byte cap comes before the line cap
            yield (
                b'{"custom_id": "c", "method": "POST", "url": "/v1/embeddings", "body": {"input": "'
                + b"z" * 10_000
                + b'"}}\n'
            )
        yield f"\r\n--{boundary}--\r\n".encode()

    headers = {"Authorization": f"Bearer {client.api_key}", "Content-Type": f"multipart/form-data; boundary={boundary}"}
    answer = httpx.post(f"{batch_server.url}/v1/files", content=body(), headers=headers, timeout=60)  # type: ignore[arg-type]
    assert answer.status_code == 413 and "--batch-max-file-bytes" in answer.json()["error"]["message"]
    assert [f.id for f in client.files.list().data] == [f.id for f in before]
    data_dir = batch_server.log.parent / "data" / "batches" / "files" if batch_server.log else None
    assert data_dir is not None
    assert not list(data_dir.glob("*.part"))
    # a body that is not multipart at all (found by the fuzz: it was a 500)
    broken = f"--{boundary}\r\nNone--{boundary}--\r\n".encode()
    answer = httpx.post(f"{batch_server.url}/v1/files", content=broken, headers=headers, timeout=60)
    assert answer.status_code == 400 and "malformed" in answer.json()["error"]["message"], answer.text


def test_unknown_endpoint_window_and_deleted_file(client: openai.OpenAI) -> None:
    file_id = upload(client, jsonl([line("a", "/v1/embeddings", {"model": EMBEDDER, "input": "x"})]))
    with pytest.raises(openai.BadRequestError, match="endpoint"):
        client.batches.create(input_file_id=file_id, endpoint="/v1/images/generations", completion_window="24h")
    with pytest.raises(openai.BadRequestError, match="completion_window"):
        client.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="1h")  # type: ignore[arg-type]
    deleted = client.files.delete(file_id)
    assert deleted.deleted and deleted.id == file_id
    with pytest.raises(openai.NotFoundError, match=file_id):
        client.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h")
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(file_id)
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")


def test_another_key_sees_nothing_an_admin_sees_all(client: openai.OpenAI, batch_server: ServerProcess) -> None:
    batch = run_batch(client, [line("k", "/v1/embeddings", {"model": EMBEDDER, "input": "x"})], "/v1/embeddings")
    with make_client(batch_server, KEY_B) as other:
        with pytest.raises(openai.NotFoundError):
            other.batches.retrieve(batch.id)
        with pytest.raises(openai.NotFoundError):
            other.files.retrieve(batch.input_file_id)
        with pytest.raises(openai.NotFoundError):
            other.files.content(batch.output_file_id or "")
        with pytest.raises(openai.NotFoundError):
            other.batches.cancel(batch.id)
        assert batch.id not in [b.id for b in other.batches.list()]
    with make_client(batch_server, ADMIN) as admin:
        assert admin.batches.retrieve(batch.id).id == batch.id
        assert batch.id in [b.id for b in admin.batches.list(limit=100).data]
    answer = httpx.get(f"{batch_server.url}/v1/batches/{batch.id}", timeout=10)
    assert answer.status_code == 401


def test_list_pages_newest_first(client: openai.OpenAI) -> None:
    file_id = upload(client, jsonl([line("p", "/v1/embeddings", {"model": EMBEDDER, "input": "x"})]))
    made = [
        client.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h").id
        for _ in range(3)
    ]
    first = client.batches.list(limit=2)
    assert [b.id for b in first.data] == made[::-1][:2] and first.has_more
    second = client.batches.list(limit=2, after=first.data[-1].id)
    assert second.data[0].id == made[0]
    assert [b.id for b in client.batches.list(limit=2)][:3] == made[::-1]  # the client pages on by itself
    for batch_id in made:
        finished(client, batch_id)
