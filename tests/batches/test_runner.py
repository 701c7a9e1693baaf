"""The single server's batch backend without a model: a tiny ASGI app stands in for the server's routes
and counts how many lines it holds at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from sie_server.batches.backend import Caps, Owner
from sie_server.batches.lines import InputLine, LineProblem, parse_line
from sie_server.batches.local import LocalBatches
from sie_server.contract.batch_wire import CreateBatchRequest, url_fits
from sie_server.errors import InvalidInput, NotFound, PayloadTooLarge
from tests.helpers.wait import async_wait_until

OWNER, OTHER, ADMIN = Owner("key-a"), Owner("key-b"), Owner("key-z", admin=True)


class CountingApp:
    """Answers every POST 200 with its body, after ``hold``; counts the calls in flight."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.calls = 0
        self.hold = asyncio.Event()
        self.hold.set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        message = await receive()
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            await self.hold.wait()
            await asyncio.sleep(0.001)
        finally:
            self.now -= 1
        status = 404 if b"missing" in message["body"] else 200
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": message["body"]})


async def chunks(data: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def lines(count: int, model: str = "m") -> bytes:
    rows = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/embeddings", "body": {"model": model, "input": str(i)}}
        for i in range(count)
    ]
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def backend(tmp_path: Path, app: CountingApp, inflight: int = 3, **caps: int) -> LocalBatches:
    return LocalBatches(tmp_path, lambda: app, caps=Caps(**caps), inflight=inflight)


def request(file_id: str) -> CreateBatchRequest:
    return CreateBatchRequest(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h")


async def test_at_most_inflight_lines_at_once_and_each_recorded_once(tmp_path: Path) -> None:
    app = CountingApp()
    batches = backend(tmp_path, app)
    try:
        made = await batches.create_file(OWNER, "in.jsonl", "batch", chunks(lines(40)))
        batch = await batches.create_batch(OWNER, request(made.id))
        await async_wait_until(lambda: batches.runner.tasks.get(batch.id) is None, message="batch never ended")
        done = await batches.get_batch(OWNER, batch.id)
        assert done.status == "completed" and done.request_counts.completed == 40
        assert app.peak == 3 and app.calls == 40
        assert not batches.store.record_line(batch.id, 0, True, b"{}")  # recorded already: refused by its key
        out = b"".join([part async for part in await batches.file_content(OWNER, done.output_file_id or "")])
        assert [orjson.loads(r)["custom_id"] for r in out.splitlines()] == [f"c{i}" for i in range(40)]
    finally:
        await batches.stop()


async def test_a_restart_runs_only_the_lines_not_recorded(tmp_path: Path) -> None:
    app = CountingApp()
    app.hold.clear()
    first = backend(tmp_path, app, inflight=2)
    made = await first.create_file(OWNER, "in.jsonl", "batch", chunks(lines(10)))
    batch = await first.create_batch(OWNER, request(made.id))
    await async_wait_until(lambda: app.now == 2, message="no line started")
    first.store.record_line(batch.id, 5, True, b'{"custom_id": "c5", "pre": true}')  # as if finished before a crash
    await first.stop()  # the two lines in flight are dropped unrecorded
    second_app = CountingApp()
    second = backend(tmp_path, second_app, inflight=2)
    try:
        second.start()
        await async_wait_until(lambda: not second.runner.tasks, message="resumed batch never ended")
        done = await second.get_batch(OWNER, batch.id)
        assert done.status == "completed" and done.request_counts.completed == 10
        assert second_app.calls == 9  # line 5 was kept, not run again
    finally:
        await second.stop()


async def test_expired_and_cancelled_batches_keep_what_finished(tmp_path: Path) -> None:
    app = CountingApp()
    batches = backend(tmp_path, app)
    try:
        made = await batches.create_file(OWNER, "in.jsonl", "batch", chunks(lines(5)))
        stale = await batches.create_batch(OWNER, request(made.id))
        batches.store.update_batch(stale.id, expires_at=0)  # its window has passed
        await async_wait_until(lambda: not batches.runner.tasks, message="batch never ended")
        ended = await batches.get_batch(OWNER, stale.id)
        assert ended.status == "expired" and ended.expired_at and ended.request_counts.completed == 0
        app.hold.clear()
        slow = await batches.create_batch(OWNER, request(made.id))
        await async_wait_until(lambda: app.now > 0, message="no line started")
        assert (await batches.cancel_batch(OWNER, slow.id)).status == "cancelling"
        app.hold.set()
        await async_wait_until(lambda: not batches.runner.tasks, message="cancelled batch never ended")
        cancelled = await batches.get_batch(OWNER, slow.id)
        assert cancelled.status == "cancelled" and cancelled.request_counts.completed < 5
    finally:
        await batches.stop()


async def test_owners_caps_and_refusals(tmp_path: Path) -> None:
    batches = backend(tmp_path, CountingApp(), max_file_bytes=5000, max_lines=20)
    try:
        made = await batches.create_file(OWNER, "in.jsonl", "batch", chunks(lines(3)))
        with pytest.raises(NotFound):
            await batches.get_file(OTHER, made.id)
        assert (await batches.get_file(ADMIN, made.id)).id == made.id
        assert [f.id for f in (await batches.list_files(OTHER, None, 10, None)).data] == []
        with pytest.raises(PayloadTooLarge):
            await batches.create_file(
                OWNER, "big.jsonl", "batch", chunks(lines(15, model="m" * 400))
            )  # over 5,000 bytes by line 11
        with pytest.raises(InvalidInput, match="--batch-max-lines"):
            await batches.create_file(OWNER, "long.jsonl", "batch", chunks(lines(21)))
        with pytest.raises(InvalidInput, match="purpose"):
            await batches.create_file(OWNER, "in.jsonl", "fine-tune", chunks(lines(1)))
        assert sorted(p.name for p in batches.store.uploads.iterdir()) == [f"{made.id}.jsonl"]  # nothing else kept
        await batches.delete_file(OWNER, made.id)
        with pytest.raises(NotFound):
            await batches.create_batch(OWNER, request(made.id))
    finally:
        await batches.stop()


def test_a_line_is_checked_against_its_batch() -> None:
    seen: set[str] = set()
    body = {"model": "m", "input": "x"}
    good = json.dumps({"custom_id": "a", "method": "POST", "url": "/v1/embeddings", "body": body}).encode()
    assert isinstance(parse_line(0, good, "/v1/embeddings", 10_000, seen), InputLine)
    again = parse_line(1, good, "/v1/embeddings", 10_000, seen)
    assert isinstance(again, LineProblem) and again.code == "duplicate_custom_id"
    other = good.replace(b'"a"', b'"b"')
    assert isinstance(wrong := parse_line(2, other, "/v1/chat/completions", 10_000, seen), LineProblem)
    assert wrong.code == "invalid_url"
    big = parse_line(3, good.replace(b'"a"', b'"c"'), "/v1/embeddings", 10, seen)
    assert isinstance(big, LineProblem) and big.code == "request_too_large"
    assert url_fits("/v1/encode", "/v1/encode/org/model") and not url_fits("/v1/encode", "/v1/score/org/model")
    assert not url_fits("/v1/encode", "/v1/encode/") and url_fits("/v1/rerank", "/v1/rerank")
