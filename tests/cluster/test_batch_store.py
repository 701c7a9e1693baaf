"""The cluster's batch store on a real nats-server, in-process: streamed objects readable by NATS's own
client, one result per line however often it is recorded, and a redelivered line not run again."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import nats as nats_client

from sie_server.batches.lines import InputLine, LineResult
from sie_server.cluster.batch_finalize import finalize
from sie_server.cluster.batch_store import LINES_CONSUMER, LINES_STREAM, BatchRecord, BatchStore
from sie_server.cluster.batch_worker import BatchLines
from sie_server.contract.batch_wire import Batch, BatchStatus, RequestCounts
from tests.helpers.cluster import Nats
from tests.helpers.wait import async_wait_until


async def test_objects_are_written_and_read_a_chunk_at_a_time(nats: Nats) -> None:
    nc = await nats_client.connect(nats.url)
    try:
        store = await BatchStore.open(nc, ack_wait_s=2)
        data = b"".join(b'{"custom_id": "%d"}\r\n' % i for i in range(30_000))
        writer = store.writer("file-one")
        for start in range(0, len(data), 7_001):  # pieces that do not line up with chunks or lines
            await writer.write(data[start : start + 7_001])
        assert await writer.close() == len(data)
        assert (await store.objects.get("file-one")).data == data  # NATS's own reader agrees
        assert b"".join([chunk async for chunk in store.content("file-one")]) == data
        lines = [line async for line in store.lines("file-one")]
        assert lines == [b'{"custom_id": "%d"}' % i for i in range(30_000)]
        rewrite = store.writer("file-one")
        await rewrite.write(b"short")
        await rewrite.close()
        assert b"".join([chunk async for chunk in store.content("file-one")]) == b"short"
    finally:
        await nc.close()


async def test_a_line_keeps_its_first_result(nats: Nats) -> None:
    nc = await nats_client.connect(nats.url)
    try:
        store = await BatchStore.open(nc, ack_wait_s=2)
        assert (await store.record("b1", LineResult(0, True, b"first"))).record == b"first"
        kept = await store.record("b1", LineResult(0, False, b"second"))  # a second run of the same line
        assert (kept.ok, kept.record) == (True, b"first")
        await store.record("b1", LineResult(1, False, b"failed"))
        big = LineResult(2, True, b"v" * (2 * int(nc.max_payload)))  # past one message: kept by reference
        await store.record("b1", big)
        assert (await store.result("b1", 2)) == big
        assert await store.counts("b1") == (3, 1)
    finally:
        await nc.close()


class NeverRun:
    """An app that fails the test if a line reaches it."""

    def __init__(self) -> None:
        self.state = SimpleNamespace(sie=SimpleNamespace(draining=False, queue_token=""))
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        raise AssertionError("a line with a kept result was run again")


async def test_a_redelivered_line_is_not_run_again_and_gets_one_output_line(nats: Nats) -> None:
    nc = await nats_client.connect(nats.url)
    try:
        store = await BatchStore.open(nc, ack_wait_s=2)
        batch = Batch(id="batch_redelivered", endpoint="/v1/embeddings", input_file_id="file-x",
                      completion_window="24h", status=BatchStatus.IN_PROGRESS, created_at=1,
                      request_counts=RequestCounts(total=1))  # fmt: skip
        await store.new_batch(BatchRecord(batch=batch, owner="anonymous", started=True))
        record = json.dumps({"custom_id": "only", "response": {"status_code": 200}}).encode()
        await store.record(batch.id, LineResult(0, True, record))  # a worker ran it, then died before its ack
        await (await store.publish_line(batch.id, InputLine(0, "only", "/v1/embeddings", b"{}")))  # redelivered
        app = NeverRun()
        lines = BatchLines(app, store, inflight=2, ack_wait_s=2, max_line_bytes=1 << 20, worker="test")
        stopping = asyncio.Event()
        pulling = asyncio.get_running_loop().create_task(lines.run(stopping))

        async def ended() -> BatchRecord | None:
            found = await store.batch(batch.id)
            return found if found is not None and found.batch.status == BatchStatus.COMPLETED else None

        done = await async_wait_until(ended, timeout=20, message="the batch never completed")
        stopping.set()
        await pulling
        assert app.calls == 0
        assert done.batch.request_counts == RequestCounts(total=1, completed=1, failed=0)
        assert done.batch.output_file_id is not None and done.batch.error_file_id is None
        output = b"".join([chunk async for chunk in store.content(done.batch.output_file_id)])
        assert output == record + b"\n"
        assert await store.unsent(batch.id) == 0
        assert (await finalize(store, batch.id)) == done  # ending it again changes nothing
    finally:
        await nc.close()


async def test_a_line_past_one_message_travels_by_reference(nats: Nats) -> None:
    nc = await nats_client.connect(nats.url)
    try:
        store = await BatchStore.open(nc, ack_wait_s=2)
        big = InputLine(7, "big", "/v1/embeddings", b'{"input": "' + b"w" * (2 * int(nc.max_payload)) + b'"}')
        await (await store.publish_line("batch_big", big))
        sub = await store.js.pull_subscribe_bind(durable=LINES_CONSUMER, stream=LINES_STREAM)
        (msg,) = await sub.fetch(batch=1, timeout=5)
        assert len(msg.data) == 0 and await store.line(msg) == big
        await msg.ack_sync()
        await sub.unsubscribe()
    finally:
        await nc.close()


async def test_a_batch_past_its_window_ends_expired_with_its_finished_lines(nats: Nats) -> None:
    nc = await nats_client.connect(nats.url)
    try:
        store = await BatchStore.open(nc, ack_wait_s=2)
        batch = Batch(id="batch_late", endpoint="/v1/embeddings", input_file_id="file-x", completion_window="24h",
                      status=BatchStatus.IN_PROGRESS, created_at=1, expires_at=2,
                      request_counts=RequestCounts(total=3))  # fmt: skip
        await store.new_batch(BatchRecord(batch=batch, owner="anonymous", started=True))
        record = json.dumps({"custom_id": "done", "response": {"status_code": 200}}).encode()
        await store.record(batch.id, LineResult(0, True, record))
        for index in (1, 2):  # never taken: no worker is up
            await (await store.publish_line(batch.id, InputLine(index, f"l{index}", "/v1/embeddings", b"{}")))
        assert await store.unsent(batch.id) == 2
        ended = await finalize(store, batch.id)
        assert ended is not None and ended.batch.status == BatchStatus.EXPIRED and ended.batch.expired_at
        assert ended.batch.request_counts == RequestCounts(total=3, completed=1, failed=0)
        assert ended.batch.output_file_id is not None and ended.batch.error_file_id is None
        assert b"".join([c async for c in store.content(ended.batch.output_file_id)]) == record + b"\n"
        assert await store.unsent(batch.id) == 0  # its lines left were dropped from the stream
    finally:
        await nc.close()


class Echo:
    """An app that answers every line 200 with the line's body, counting the calls."""

    def __init__(self) -> None:
        self.state = SimpleNamespace(sie=SimpleNamespace(draining=False, queue_token=""))
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        body = (await receive())["body"]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


async def test_a_start_message_taken_again_queues_each_line_once(nats: Nats) -> None:
    """A worker that died while queueing a batch's lines leaves its start message to another, which queues
    them all again: the copies within the stream's duplicate window are dropped, each line runs once."""
    nc = await nats_client.connect(nats.url)
    try:
        store = await BatchStore.open(nc, ack_wait_s=2)
        total = 50
        writer = store.writer("file-in")
        for i in range(total):
            line = {"custom_id": f"c{i}", "method": "POST", "url": "/v1/embeddings", "body": {"input": f"t{i}"}}
            await writer.write(json.dumps(line).encode() + b"\n\n")  # blank lines do not count
        await writer.close()
        batch = Batch(id="batch_again", endpoint="/v1/embeddings", input_file_id="file-in", completion_window="24h",
                      status=BatchStatus.IN_PROGRESS, created_at=1,
                      request_counts=RequestCounts(total=total))  # fmt: skip
        await store.new_batch(BatchRecord(batch=batch, owner="anonymous", started=True))
        for i in range(20):  # what the first worker queued before it died
            await (await store.publish_line(batch.id, InputLine(i, f"c{i}", "/v1/embeddings", b'{"input": "t%d"}' % i)))
        await store.publish_start(batch.id)
        app = Echo()
        lines = BatchLines(app, store, inflight=4, ack_wait_s=2, max_line_bytes=1 << 20, worker="test")
        stopping = asyncio.Event()
        pulling = asyncio.get_running_loop().create_task(lines.run(stopping))

        async def ended() -> BatchRecord | None:
            found = await store.batch(batch.id)
            return found if found is not None and found.batch.status == BatchStatus.COMPLETED else None

        done = await async_wait_until(ended, timeout=30, message="the batch never completed")
        stopping.set()
        await pulling
        assert app.calls == total
        assert done.batch.request_counts == RequestCounts(total=total, completed=total, failed=0)
        assert done.batch.output_file_id is not None
        output = b"".join([chunk async for chunk in store.content(done.batch.output_file_id)])
        assert [json.loads(line)["custom_id"] for line in output.splitlines()] == [f"c{i}" for i in range(total)]
    finally:
        await nc.close()
