"""The Batch API in cluster mode: the gateway answers the files and batches routes over JetStream, the
workers run the lines (cluster/batch_*.py). A real nats-server, real worker and gateway processes,
OpenAI's own client against the gateway."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import httpx
import openai
import pytest
from openai.types import Batch

from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.metrics import scrape as metric
from tests.helpers.server import ServerProcess
from tests.helpers.wait import wait_until

TINY, SLOW = "test/tiny-embedder", "test/slow"
KEY_A, KEY_B, ADMIN = "sk-cluster-a", "sk-cluster-b", "sk-cluster-admin"
KEYS = ("--api-key", KEY_A, "--api-key", KEY_B, "--admin-key", ADMIN)
MAX_FILE_BYTES, MAX_LINES = 200_000, 400
ENDED = ("completed", "failed", "cancelled", "expired")


def jsonl(model: str, count: int, prefix: str = "req") -> bytes:
    lines = [{"custom_id": f"{prefix}-{i}", "method": "POST", "url": "/v1/embeddings",
              "body": {"model": model, "input": f"passage number {i} about invoices"}}
             for i in range(count)]  # fmt: skip
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def client(gateway: Gateway, key: str = KEY_A) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0, timeout=60)


def submit(api: openai.OpenAI, data: bytes) -> Batch:
    uploaded = api.files.create(file=("input.jsonl", data), purpose="batch")
    return api.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h")


def ended(api: openai.OpenAI, batch_id: str, timeout: float = 60) -> Batch:
    def done() -> Batch | None:
        batch = api.batches.retrieve(batch_id)
        return batch if batch.status in ENDED else None

    return wait_until(done, timeout=timeout, interval=0.2, message=f"batch {batch_id} never ended")


def batch_figures(gateway: Gateway) -> dict[str, float] | None:
    """The gateway's Batch API figures once they count at least 40 finished lines."""
    r = httpx.get(f"{gateway.url}/v1/status", headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert r.status_code == 200, r.text
    figures: dict[str, float] = r.json()["batches"]
    return figures if figures["lines_done"] >= 40 and figures["in_progress"] == 0 else None


def lines_of(api: openai.OpenAI, file_id: str | None) -> list[dict[str, object]]:
    if file_id is None:
        return []
    return [json.loads(line) for line in api.files.content(file_id).text.splitlines()]


class Cluster(NamedTuple):
    gateway: Gateway
    one: ServerProcess
    two: ServerProcess
    nats: Nats


@pytest.fixture(scope="module")
def cluster(cluster_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    logs = tmp_path_factory.mktemp("cluster-batches")
    nats = Nats(logs / "jetstream")
    one = worker(cluster_catalog, nats.url, logs / "w1.log", "--preload", SLOW, "--batch-inflight", "4")
    two = worker(cluster_catalog, nats.url, logs / "w2.log", "--preload", SLOW, "--batch-inflight", "4")
    caps = ("--batch-max-file-bytes", str(MAX_FILE_BYTES), "--batch-max-lines", str(MAX_LINES))
    gateway = Gateway(cluster_catalog, nats.url, *KEYS, *caps, log=logs / "gw.log")
    try:
        with running(one, two, gateway):
            yield Cluster(gateway, one, two, nats)
    finally:
        nats.stop()


def test_a_batch_runs_on_two_workers_and_matches_the_live_route(
    cluster: Cluster,
) -> None:
    gateway, one, two, _ = cluster
    before = [metric(w.url, "sie_batch_items_sum", model=SLOW, absent_as_zero=True) for w in (one, two)]
    done = {"endpoint": "/v1/embeddings", "outcome": "completed"}
    lines_before = sum(metric(w.url, "sie_batch_lines_total", **done, absent_as_zero=True) for w in (one, two))
    with client(gateway) as api:
        made = submit(api, jsonl(SLOW, 40))
        assert made.request_counts is not None and made.request_counts.total == 40
        batch = ended(api, made.id)
        assert batch.status == "completed", batch
        assert batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (40, 0)
        assert batch.error_file_id is None
        after = [metric(w.url, "sie_batch_items_sum", model=SLOW, absent_as_zero=True) for w in (one, two)]
        assert after[0] > before[0] and after[1] > before[1]  # both workers ran some of its lines
        assert sum(after) - sum(before) == 40
        # each worker counts the lines it finished; the gateway's status shows the cluster's batches
        lines_after = sum(metric(w.url, "sie_batch_lines_total", **done, absent_as_zero=True) for w in (one, two))
        assert lines_after - lines_before == 40
        figures = wait_until(lambda: batch_figures(gateway), timeout=20, interval=0.5,
                             message="the gateway's status never showed the batch's 40 lines")  # fmt: skip
        assert figures["in_progress"] == 0 and figures["lines_failed"] == 0
        assert figures["inflight_limit"] == 8  # two workers at --batch-inflight 4
        assert metric(gateway.url, "sie_gateway_batches_in_progress") == 0
        out = lines_of(api, batch.output_file_id)
        assert [line["custom_id"] for line in out] == [f"req-{i}" for i in range(40)]  # input order
        for k in (0, 17, 39):  # each vector is the live route's for the same input
            live = api.embeddings.create(model=SLOW, input=f"passage number {k} about invoices")
            body = out[k]["response"]["body"]  # type: ignore[index]
            assert body["data"][0]["embedding"] == pytest.approx(live.data[0].embedding, abs=1e-5)


def test_batches_and_files_are_seen_only_by_their_key_and_admin(
    cluster: Cluster,
) -> None:
    gateway = cluster.gateway
    with client(gateway) as alpha, client(gateway, KEY_B) as beta, client(gateway, ADMIN) as admin:
        made = submit(alpha, jsonl(SLOW, 3, "iso"))
        with pytest.raises(openai.NotFoundError):
            beta.batches.retrieve(made.id)
        with pytest.raises(openai.NotFoundError):
            beta.files.retrieve(made.input_file_id)
        with pytest.raises(openai.NotFoundError):
            beta.files.content(made.input_file_id)
        with pytest.raises(openai.NotFoundError):
            beta.batches.cancel(made.id)
        assert made.id not in [b.id for b in beta.batches.list().data]
        assert made.input_file_id not in [f.id for f in beta.files.list().data]
        assert admin.batches.retrieve(made.id).id == made.id
        assert made.id in [b.id for b in admin.batches.list().data]
        batch = ended(alpha, made.id)
        assert batch.status == "completed" and batch.output_file_id is not None
        with pytest.raises(openai.NotFoundError):
            beta.files.content(batch.output_file_id)
        assert len(lines_of(admin, batch.output_file_id)) == 3


def test_caps_are_refused_while_reading(cluster: Cluster) -> None:
    """An upload past the byte cap sent without a length (chunked) is refused with 413 once the bytes read
    pass the cap, and none of it stays in the object store; a file past the line cap, with 400."""
    gateway, nats = cluster.gateway, cluster.nats
    boundary = "sie-test-boundary"
    stored = nats.stream("OBJ_SIE_BATCH_FILES").get("messages", 0)

    def body() -> Iterator[bytes]:
        yield (f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
               f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jsonl"\r\n'
               "Content-Type: application/octet-stream\r\n\r\n").encode()  # fmt: skip
        line = json.dumps({"custom_id": "x", "method": "POST", "url": "/v1/embeddings",
                           "body": {"model": SLOW, "input": "y" * 900}}).encode() + b"\n"  # fmt: skip
        for _ in range(2 * MAX_FILE_BYTES // len(line)):
            yield line
        yield f"\r\n--{boundary}--\r\n".encode()

    headers = {"Authorization": f"Bearer {KEY_A}", "Content-Type": f"multipart/form-data; boundary={boundary}"}
    refused = httpx.post(f"{gateway.url}/v1/files", content=body(), headers=headers, timeout=60)
    assert refused.status_code == 413, refused.text
    assert "--batch-max-file-bytes" in refused.text
    assert nats.stream("OBJ_SIE_BATCH_FILES").get("messages", 0) == stored
    with client(gateway) as api:
        with pytest.raises(openai.BadRequestError, match="lines"):
            api.files.create(file=("long.jsonl", jsonl(SLOW, MAX_LINES + 1)), purpose="batch")
        with pytest.raises(openai.BadRequestError, match="not a JSON object"):
            api.files.create(file=("bad.jsonl", b'{"custom_id": "a"}\n[1, 2]\n'), purpose="batch")
    assert nats.stream("OBJ_SIE_BATCH_FILES").get("messages", 0) == stored


def test_a_cancelled_batch_keeps_each_finished_line_once(
    cluster: Cluster,
) -> None:
    gateway = cluster.gateway
    with client(gateway) as api:
        made = submit(api, jsonl(SLOW, 300, "cancel"))
        wait_until(lambda: api.batches.retrieve(made.id).request_counts.completed >= 8,  # type: ignore[union-attr]
                   timeout=60, interval=0.1, message="no line finished")  # fmt: skip
        cancelling = api.batches.cancel(made.id)
        assert cancelling.status in ("cancelling", "cancelled")
        batch = ended(api, made.id)
        assert batch.status == "cancelled"
        assert batch.request_counts is not None
        out = lines_of(api, batch.output_file_id) + lines_of(api, batch.error_file_id)
        ids = [line["custom_id"] for line in out]
        assert len(ids) == len(set(ids)) == batch.request_counts.completed + batch.request_counts.failed
        assert 8 <= len(ids) < 300


def test_a_worker_killed_mid_batch_leaves_it_to_another(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    first = worker(cluster_catalog, nats.url, tmp_path / "w1.log", "--preload", SLOW, "--batch-inflight", "8")
    gateway = Gateway(cluster_catalog, nats.url, *KEYS, log=tmp_path / "gw.log")
    with running(first, gateway), client(gateway) as api:
        made = submit(api, jsonl(SLOW, 300, "kill"))
        wait_until(lambda: api.batches.retrieve(made.id).request_counts.completed >= 24,  # type: ignore[union-attr]
                   timeout=60, interval=0.1, message="the first worker finished no line")  # fmt: skip
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        left = api.batches.retrieve(made.id)
        assert left.status == "in_progress" and left.request_counts is not None
        assert left.request_counts.completed < 300
        second = worker(cluster_catalog, nats.url, tmp_path / "w2.log", "--preload", SLOW, "--batch-inflight", "8")
        with running(second):  # it starts after the first died, and ends the batch the first began
            batch = ended(api, made.id, timeout=120)
        assert batch.status == "completed", batch
        out = lines_of(api, batch.output_file_id) + lines_of(api, batch.error_file_id)
        assert sorted(str(line["custom_id"]) for line in out) == sorted(f"kill-{i}" for i in range(300))  # each once
        assert batch.request_counts is not None and batch.request_counts.completed == 300
        nats.stop()  # the batch store away: 503 with Retry-After, not a 500; back once NATS is
        away = httpx.get(f"{gateway.url}/v1/batches/{made.id}", headers={"Authorization": f"Bearer {KEY_A}"},
                         timeout=60)  # fmt: skip
        assert away.status_code == 503 and away.headers["retry-after"] == "2", away.text
        assert away.headers["x-sie-error-code"] == "QUEUE_FULL"
        nats.restart()
        back = wait_until(
            lambda: _retrieved(api, made.id), timeout=60, interval=0.5, message="the store never came back"
        )
        assert back.status == "completed" and back.output_file_id == batch.output_file_id


def _retrieved(api: openai.OpenAI, batch_id: str) -> Batch | None:
    try:
        return api.batches.retrieve(batch_id)
    except openai.APIStatusError:
        return None
