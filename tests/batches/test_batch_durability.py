"""The share bound, cancel, and a batch that survives ``kill -9`` of its server."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import openai
import pytest

from tests.batches.conftest import ADMIN, INFLIGHT, KEY_A, SLOW, make_client
from tests.batches.helpers import finished, jsonl, line, records, upload
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

pytestmark = pytest.mark.allow_hosts(["127.0.0.1", "::1"])


def status(server: ServerProcess) -> dict[str, int | float]:
    answer = httpx.get(f"{server.url}/v1/status", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    batches: dict[str, int | float] = answer.json()["batches"]
    return batches


def slow_lines(count: int, prefix: str = "s") -> list[dict[str, object]]:
    return [line(f"{prefix}-{i}", "/v1/embeddings", {"model": SLOW, "input": f"text {i}"}) for i in range(count)]


def test_never_more_lines_in_flight_than_the_share(client: openai.OpenAI, batch_server: ServerProcess) -> None:
    file_id = upload(client, jsonl(slow_lines(16)))
    batch = client.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h")
    seen: list[int] = []

    def sampled_done() -> bool:
        figures = status(batch_server)
        seen.append(int(figures["lines_in_flight"]))
        return client.batches.retrieve(batch.id).status == "completed"

    wait_until(sampled_done, timeout=60, interval=0.05, message="the slow batch never completed")
    figures = status(batch_server)
    assert max(seen) <= INFLIGHT and figures["inflight_limit"] == INFLIGHT
    assert figures["peak_lines_in_flight"] == INFLIGHT  # the share is used, never passed (counted in the runner)
    assert figures["lines_done"] >= 16 and figures["lines_per_s"] > 0
    scraped = httpx.get(f"{batch_server.url}/metrics", timeout=10).text
    assert 'sie_batch_lines_total{endpoint="/v1/embeddings",outcome="completed"}' in scraped
    assert "sie_batches_in_progress" in scraped


def test_cancel_keeps_the_finished_lines(client: openai.OpenAI) -> None:
    file_id = upload(client, jsonl(slow_lines(40, "c")))
    batch = client.batches.create(
        input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h", metadata={"job": "cancel-me"}
    )
    assert batch.metadata == {"job": "cancel-me"} and batch.status == "validating"

    def some_done() -> bool:
        counts = client.batches.retrieve(batch.id).request_counts
        return counts is not None and counts.completed >= 2

    wait_until(some_done, timeout=60, interval=0.05, message="no line finished")
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled") and cancelling.cancelling_at
    done = finished(client, batch.id)
    assert done.status == "cancelled" and done.cancelled_at and done.request_counts
    assert 2 <= done.request_counts.completed < 40
    out = records(client, done.output_file_id)
    assert len(out) == done.request_counts.completed
    with pytest.raises(openai.APIStatusError) as again:
        client.batches.cancel(make_completed(client))
    assert again.value.status_code == 409


def make_completed(client: openai.OpenAI) -> str:
    file_id = upload(client, jsonl([line("x", "/v1/embeddings", {"model": SLOW, "input": "x"})]))
    batch = client.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h")
    return finished(client, batch.id).id


def test_kill_9_mid_batch_then_restart_finishes_each_line_once(batch_catalog: Path, tmp_path: Path) -> None:
    args = ["--offline", "--threads", "1", "--data-dir", str(tmp_path / "data"), "--api-key", KEY_A]
    args += ["--batch-inflight", "8"]
    total = 200
    first = ServerProcess(batch_catalog, *args, log=tmp_path / "first.log").wait_ready()
    try:
        with make_client(first) as client:
            file_id = upload(client, jsonl(slow_lines(total, "k")))
            batch = client.batches.create(input_file_id=file_id, endpoint="/v1/embeddings", completion_window="24h")

            def a_third_done() -> bool:
                counts = client.batches.retrieve(batch.id).request_counts
                return counts is not None and counts.completed >= total // 3

            wait_until(a_third_done, timeout=90, interval=0.05, message="the batch never got a third done")
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
    finally:
        first.stop()
    with ServerProcess(batch_catalog, *args, log=tmp_path / "second.log") as second, make_client(second) as client:
        resumed = client.batches.retrieve(batch.id)
        assert resumed.request_counts is not None and resumed.request_counts.completed < total
        done = finished(client, batch.id, timeout=120)
        assert done.status == "completed" and done.request_counts
        assert (done.request_counts.completed, done.request_counts.failed) == (total, 0)
        ids = [r["custom_id"] for r in records(client, done.output_file_id)]
    assert len(ids) == total and sorted(ids) == sorted(f"k-{i}" for i in range(total))
    assert done.error_file_id is None
