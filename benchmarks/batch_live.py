"""The Batch API beside live traffic (issue 44), and a batch that survives ``kill -9``.

    .venv/bin/python -m benchmarks.batch_live [--lines 50000] [--requests 300] [--kill-lines 10000]

One server with all-MiniLM-L6-v2 (the packaged weights), data under a temporary ``--data-dir``:

1. live alone: sequential single-text ``/v1/encode`` calls, p50/p99;
2. a batch of ``--lines`` one-text ``/v1/embeddings`` lines alone: its lines/s;
3. the same again with the live calls running beside it the whole time: live p99, batch lines/s;
4. ``--kill-lines`` lines through the official ``openai`` client; the server is killed with SIGKILL at
   about half way and restarted on the same data dir: the output file must hold every line once.

Goals: live p99 beside the batch at most 1.5x alone; the batch at no less than half its rate alone.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import random
import signal
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import openai

from benchmarks._common import cpu_flags_line, cpu_model, load_line
from tests.helpers.catalog import MINILM, copy_real
from tests.helpers.server import ServerProcess

WORDS = "invoice payment due total amount vendor contract lunch travel report quarterly revenue".split()
QUERY = "How much do we owe Acme Corp, and when is it due?"
LIVE_PAUSE_S = 0.02  # a live caller's think time between calls (--live-pause-ms)


def batch_file(count: int, seed: int, prefix: str) -> bytes:
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        text = " ".join(rng.choices(WORDS, k=rng.randint(8, 40)))
        body = {"model": MINILM, "input": text}
        rows.append(json.dumps({"custom_id": f"{prefix}-{i}", "method": "POST", "url": "/v1/embeddings", "body": body}))
    return ("\n".join(rows) + "\n").encode()


def start_batch(client: openai.OpenAI, data: bytes) -> str:
    upload = client.files.create(file=("lines.jsonl", io.BytesIO(data)), purpose="batch")
    return client.batches.create(input_file_id=upload.id, endpoint="/v1/embeddings", completion_window="24h").id


def wait_batch(client: openai.OpenAI, batch_id: str, until: float = 1.0, poll_s: float = 0.5) -> float:
    """Seconds until the batch has ``until`` of its lines done (1.0: completed)."""
    t0 = time.perf_counter()
    while True:
        batch = client.batches.retrieve(batch_id)
        counts = batch.request_counts
        done = (counts.completed + counts.failed) if counts else 0
        total = counts.total if counts else 1
        if batch.status == "completed" or (until < 1.0 and done >= until * total):
            return time.perf_counter() - t0
        if batch.status in ("failed", "cancelled", "expired"):
            raise RuntimeError(f"batch {batch_id} ended {batch.status}")
        time.sleep(poll_s)


PARTS = ("queue_ms", "tokenization_ms", "inference_ms", "total_ms")


def live(
    url: str, count: int | None, stop: threading.Event | None = None, seed: int = 0, parts: list[dict] | None = None
) -> list[float]:
    """Sequential one-text encodes, each text new (no cache answers it), ``pause_s`` apart; ``parts`` gets each
    answer's server-side timing (where a live call's time went)."""
    rng = random.Random(seed)
    samples: list[float] = []
    with httpx.Client(base_url=url, timeout=120) as client:
        while (count is None or len(samples) < count) and not (stop is not None and stop.is_set()):
            words = " ".join(rng.choices(WORDS, k=12))
            body = {"items": [{"text": f"{QUERY} {len(samples)} {words}"}]}
            t0 = time.perf_counter()
            answer = client.post(f"/v1/encode/{MINILM}", json=body)
            samples.append(time.perf_counter() - t0)
            assert answer.status_code == 200
            if parts is not None:
                timing = answer.json().get("timing", {})
                parts.append({k: float(timing.get(k, 0.0)) for k in PARTS} | {"client_ms": samples[-1] * 1000})
            time.sleep(LIVE_PAUSE_S)
    return samples


def pct(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1000, q))


def share(args: argparse.Namespace, server: ServerProcess, client: openai.OpenAI) -> dict[str, float]:
    live(server.url, 20, seed=9)  # warm
    alone_parts: list[dict] = []
    alone = live(server.url, args.requests, seed=1, parts=alone_parts)
    batch_id = start_batch(client, batch_file(args.lines, 1, "alone"))
    alone_s = wait_batch(client, batch_id)
    data = batch_file(args.lines, 2, "beside")
    stop = threading.Event()
    beside: list[float] = []
    beside_parts: list[dict] = []
    runner = threading.Thread(target=lambda: beside.extend(live(server.url, None, stop, seed=2, parts=beside_parts)))
    batch_id = start_batch(client, data)
    runner.start()
    beside_s = wait_batch(client, batch_id)
    stop.set()
    runner.join()
    busy = np.mean([r["client_ms"] for r in alone_parts]) / (
        np.mean([r["client_ms"] for r in alone_parts]) + LIVE_PAUSE_S * 1000
    )
    print(
        f"the live caller alone keeps the server busy {busy:.0%} of the time ({LIVE_PAUSE_S * 1000:.0f} ms think time)"
    )
    for name, rows in (("alone", alone_parts), ("beside", beside_parts)):
        shown = "  ".join(
            f"{k[:-3]} {np.percentile([r[k] for r in rows], 50):.1f}/{np.percentile([r[k] for r in rows], 99):.1f}"
            for k in (*PARTS, "client_ms")
        )
        print(f"live {name} p50/p99 ms: {shown}")
    return {
        "alone_p50": pct(alone, 50),
        "alone_p99": pct(alone, 99),
        "beside_p50": pct(beside, 50),
        "beside_p99": pct(beside, 99),
        "beside_n": len(beside),
        "rate_alone": args.lines / alone_s,
        "rate_beside": args.lines / beside_s,
    }


def kill_and_resume(args: argparse.Namespace, catalog: Path, server_args: list[str], logs: Path) -> dict[str, float]:
    first = ServerProcess(catalog, *server_args, log=logs / "first.log").wait_ready()
    try:
        with openai.OpenAI(base_url=f"{first.url}/v1", api_key="unused", max_retries=0, timeout=120) as client:
            batch_id = start_batch(client, batch_file(args.kill_lines, 3, "k"))
            wait_batch(client, batch_id, until=0.5, poll_s=0.05)
            before = client.batches.retrieve(batch_id).request_counts
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait(timeout=30)
    finally:
        first.stop()
    at_kill = before.completed if before else 0
    second = ServerProcess(catalog, *server_args, log=logs / "second.log")
    with second, openai.OpenAI(base_url=f"{second.url}/v1", api_key="unused", max_retries=0, timeout=300) as client:
        wait_batch(client, batch_id)
        batch = client.batches.retrieve(batch_id)
        text = client.files.content(batch.output_file_id or "").text
        errors = client.files.content(batch.error_file_id).text if batch.error_file_id else ""
    ids = [json.loads(row)["custom_id"] for row in text.splitlines() if row.strip()]
    repeated = sum(n - 1 for n in collections.Counter(ids).values() if n > 1)
    missing = len({f"k-{i}" for i in range(args.kill_lines)} - set(ids))
    return {
        "at_kill": at_kill,
        "output_lines": len(ids),
        "error_lines": len([r for r in errors.splitlines() if r.strip()]),
        "repeated": repeated,
        "missing": missing,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=50_000, help="lines of the batch beside live calls")
    parser.add_argument("--requests", type=int, default=300, help="live calls measured alone")
    parser.add_argument("--kill-lines", type=int, default=10_000, help="lines of the kill -9 batch (0: skip)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--live-pause-ms", type=float, default=20.0, help="a live caller's think time between calls")
    parser.add_argument("--batch-inflight", type=int, default=None, help="the server's --batch-inflight")
    parser.add_argument("--skip-share", action="store_true")
    parser.add_argument("--server-arg", action="append", default=[], help="more flags for the server (repeat)")
    args = parser.parse_args()
    global LIVE_PAUSE_S
    LIVE_PAUSE_S = args.live_pause_ms / 1000
    print(f"CPU: {cpu_model()}; {cpu_flags_line()}; {load_line()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        catalog = root / "catalog"
        catalog.mkdir()
        copy_real(catalog, MINILM)
        server_args = ["--offline", "--threads", str(args.threads), "--preload", MINILM, "--data-dir", str(root / "d")]
        server_args += ["--batch-max-lines", str(max(args.lines, args.kill_lines))]
        if args.batch_inflight:
            server_args += ["--batch-inflight", str(args.batch_inflight)]
        server_args += [a for arg in args.server_arg for a in arg.split()]
        print(f"server flags: {' '.join(server_args[server_args.index('--threads') :])}")
        if not args.skip_share:
            with ServerProcess(catalog, *server_args, log=root / "share.log") as server:
                client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)
                with client:
                    r = share(args, server, client)
            print(
                f"live alone:        p50 {r['alone_p50']:.1f} ms  p99 {r['alone_p99']:.1f} ms ({args.requests} calls)"
            )
            print(
                f"live beside batch: p50 {r['beside_p50']:.1f} ms  p99 {r['beside_p99']:.1f} ms "
                f"({r['beside_n']:.0f} calls)  -> p99 {r['beside_p99'] / r['alone_p99']:.2f}x (goal <= 1.5x)"
            )
            print(
                f"batch of {args.lines} lines: alone {r['rate_alone']:.0f} lines/s, beside live "
                f"{r['rate_beside']:.0f} lines/s -> {r['rate_beside'] / r['rate_alone']:.2f}x (goal >= 0.5x)"
            )
        if args.kill_lines:
            k = kill_and_resume(args, catalog, server_args, root)
            print(
                f"kill -9 batch of {args.kill_lines} lines: killed at {k['at_kill']:.0f} done; after restart "
                f"{k['output_lines']:.0f} output lines, {k['error_lines']:.0f} error lines, {k['repeated']:.0f} "
                f"repeated, {k['missing']:.0f} missing"
            )


if __name__ == "__main__":
    main()
