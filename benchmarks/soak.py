"""Soak: mixed traffic against one real server for a set time; RSS, fds, threads, queue, latency.

    .venv/bin/python -m benchmarks.soak [--duration 600] [--idle 60] [--clients 6] [--quick]

One ``sie-server serve --offline`` process on a catalog of six models (``benchmarks/soak_mix.py``): the
real MiniLM (encode, score), the packaged SmolLM2 (generate, streamed and not), a tiny random GLiNER
(extract), docling (a 2-page PDF whose scanned page PP-OCRv6 reads), PP-OCRv6 alone (a PNG) and
faster-whisper tiny.en (a spoken sentence). ``--clients`` threads each send, for ``--duration`` seconds,
a random mix: encode of one text and of 2-64 texts of every length, score, extract, a document, a scan,
speech, generate (16 new tokens), a streamed generate read to the end, clients that disconnect (a stream
dropped after its first event, an encode dropped by a 50 ms timeout) and bad requests (each must get a
4xx). The first requests cover every kind once. Every 5 s the server's resident set (VmRSS), open file
descriptors, threads and queued items (``sie_queue_items``) are sampled, with the cores other processes
used. Then the server idles ``--idle`` seconds and RSS is read again.

Goals (issue 12): RSS growth <= 5% after the first minute, fds and threads flat, zero 5xx, p99 of the
last minute within 1.5x of the second minute's, RSS after the idle within 10% of the first minute's level.
Issue 46: zero errors (5xx, dropped connections, items answered with an error, bad requests accepted) and
the RSS slope after the first five minutes (least squares over the 5 s samples, MiB an hour) at most
``SLOPE_BOUND`` of the 5-minute RSS an hour. Why 5%: docling-serve's reported leak (#366) is about 600 MB
an hour, several times this whole server; a leak of one request's buffers (a PDF page render, a few MiB)
every few requests would show as hundreds of MiB an hour; and 5% an hour (~75 MiB/h here) is above what the
allocator's step-wise growth and return (tens of MiB) can fake over 25 minutes of samples.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from benchmarks._common import (
    cpu_flags_line,
    machine_line,
    metric_values,
    proc_cpu_seconds,
    proc_status_kib,
    system_busy_seconds,
)
from benchmarks.corpus import build_corpus
from benchmarks.soak_mix import (
    HUNG_UP,
    ITEM_ERROR,
    KINDS,
    Payloads,
    build_catalog,
    is_error,
    one_request,
    payloads,
    warm_up,
)
from tests.helpers.server import ServerProcess

SAMPLE_S = 5.0
SLOPE_AFTER_S = 300.0  # the RSS slope is fitted to the samples after the first five minutes ...
SLOPE_BOUND = 0.05  # ... and must be at most this share of the 5-minute RSS an hour


@dataclass
class Record:
    at: float
    kind: str
    status: int  # soak_mix: HUNG_UP, DROPPED, ITEM_ERROR, WRONGLY_ACCEPTED + status, or the HTTP status
    seconds: float


@dataclass
class Sample:
    at: float
    rss_mib: float
    fds: int
    threads: int
    queued: float
    other_cores: float
    load1: float  # the machine's 1-minute load average


@dataclass
class Run:
    records: list[Record] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    first: list[str] = field(default_factory=lambda: [k for k, _ in KINDS])  # sent before the random mix


def client_loop(url: str, seed: int, load: Payloads, until: float, run: Run) -> None:
    rng = random.Random(seed)
    kinds, weights = zip(*KINDS, strict=True)
    with httpx.Client(base_url=url, timeout=300.0) as client:
        while time.monotonic() < until:
            with run.lock:
                kind = run.first.pop() if run.first else rng.choices(kinds, weights)[0]
            started = time.monotonic()
            try:
                status = one_request(client, kind, rng, load)
            except httpx.HTTPError:
                status = -1  # the server dropped a connection it should have answered
            with run.lock:
                run.records.append(Record(started, kind, status, time.monotonic() - started))


def sample_loop(pid: int, url: str, start: float, until: float, run: Run) -> None:
    last = (time.monotonic(), system_busy_seconds(), proc_cpu_seconds(pid), time.process_time())
    while time.monotonic() < until:
        time.sleep(SAMPLE_S)
        now = (time.monotonic(), system_busy_seconds(), proc_cpu_seconds(pid), time.process_time())
        wall, busy, server, me = (b - a for a, b in zip(last, now, strict=True))
        last = now
        queued = metric_values(url, ("sie_queue_items",), {}) or {"sie_queue_items": float("nan")}
        run.samples.append(
            Sample(
                at=now[0] - start,
                rss_mib=proc_status_kib(pid, "VmRSS") / 1024,
                fds=len(os.listdir(f"/proc/{pid}/fd")),
                threads=proc_status_kib(pid, "Threads"),
                queued=queued["sie_queue_items"],
                other_cores=max(0.0, busy - server - me) / wall,
                load1=os.getloadavg()[0],
            )
        )


def traffic(server: ServerProcess, load: Payloads, clients: int, seconds: float, seed: int) -> Run:
    """``clients`` threads of the mix against ``server`` for ``seconds``, sampled every ``SAMPLE_S``."""
    run = Run()
    start = time.monotonic()
    until = start + seconds
    workers = [
        threading.Thread(target=client_loop, args=(server.url, seed + i, load, until, run)) for i in range(clients)
    ]
    for worker in workers:
        worker.start()
    sample_loop(server.proc.pid, server.url, start, until, run)
    for worker in workers:
        worker.join()
    for record in run.records:
        record.at -= start
    return run


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


def rss_slope(samples: list[Sample], after_s: float) -> tuple[float, float]:
    """(MiB an hour fitted by least squares to the samples after ``after_s``, the RSS at ``after_s``)."""
    late = [s for s in samples if s.at > after_s]
    at_start = min(samples, key=lambda s: abs(s.at - after_s)).rss_mib
    if len(late) < 2:
        return float("nan"), at_start
    fit = statistics.linear_regression([s.at for s in late], [s.rss_mib for s in late])
    return fit.slope * 3600, at_start


def report(run: Run, duration: float, idle_rss: float) -> bool:
    """Prints the minute table and the goals; whether every goal was met."""
    minutes = max(1, round(duration / 60))
    print(f"\n{'minute':>6} {'reqs':>6} {'err':>4} {'4xx':>5} {'hangup':>6} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'RSS MiB':>9} {'fds':>5} {'threads':>7} {'queue max':>9} {'other':>6}")  # fmt: skip
    p99s, rss_end, fds, threads = [], [], [], []
    for m in range(minutes):
        rows = [r for r in run.records if 60 * m <= r.at < 60 * (m + 1)]
        good = [r.seconds * 1000 for r in rows if 200 <= r.status < 300]
        samples = [s for s in run.samples if 60 * m < s.at <= 60 * (m + 1)] or run.samples[-1:]
        p99s.append(p99(good))
        rss_end.append(samples[-1].rss_mib)
        fds.append(max(s.fds for s in samples))
        threads.append(max(s.threads for s in samples))
        print(
            f"{m + 1:>6} {len(rows):>6} {sum(is_error(r.status) for r in rows):>4} "
            f"{sum(400 <= r.status < 500 for r in rows):>5} {sum(r.status == HUNG_UP for r in rows):>6} "
            f"{statistics.median(good) if good else float('nan'):>8.0f} {p99s[-1]:>8.0f} {rss_end[-1]:>9.0f} "
            f"{fds[-1]:>5} {threads[-1]:>7} {max(s.queued for s in samples):>9.0f} "
            f"{statistics.mean(s.other_cores for s in samples):>6.2f}"
        )
    by_kind = {k: [r for r in run.records if r.kind == k] for k, _ in KINDS}
    loads = [s.load1 for s in run.samples]
    print(
        f"\nload average (1 min) during the run: {min(loads):.2f}-{max(loads):.2f}, mean {statistics.mean(loads):.2f}"
    )
    print("per kind (sent/answered 2xx/p50 ms): " + ", ".join(
        f"{k} {len(v)}/{sum(200 <= r.status < 300 for r in v)}/"
        f"{statistics.median([r.seconds * 1000 for r in v]) if v else float('nan'):.0f}" for k, v in by_kind.items()
    ))  # fmt: skip
    wrong = sorted({r.status for r in run.records if is_error(r.status)})
    items = sum(r.status == ITEM_ERROR for r in run.records)
    first = rss_end[0]
    peak_after = max(s.rss_mib for s in run.samples if s.at > 60) if duration > 60 else first
    after = min(SLOPE_AFTER_S, duration / 2)
    slope, base = rss_slope(run.samples, after)
    bound = SLOPE_BOUND * base
    checks = [
        ("RSS growth after the first minute <= 5%", peak_after / first - 1 <= 0.05,
         f"{first:.0f} MiB at 1 min, peak after it {peak_after:.0f} MiB ({(peak_after / first - 1) * 100:+.1f}%)"),
        (f"RSS slope after {after / 60:.0f} min <= {SLOPE_BOUND:.0%} of its RSS an hour", slope <= bound,
         f"{slope:+.1f} MiB/h over {sum(s.at > after for s in run.samples)} samples; bound {bound:.1f} MiB/h "
         f"({SLOPE_BOUND:.0%} of {base:.0f} MiB)"),
        ("fds flat (last minute's max <= first's + 5)", fds[-1] <= fds[0] + 5, f"{fds[0]} -> {fds[-1]}"),
        ("threads flat (last minute's max <= first's + 2)", threads[-1] <= threads[0] + 2,
         f"{threads[0]} -> {threads[-1]}"),
        ("zero 5xx, dropped connections, item errors or wrongly accepted bad requests", not wrong,
         f"statuses {wrong or 'none'} ({items} item errors)"),
        ("p99 last minute <= 1.5x the second's", minutes < 2 or p99s[-1] <= 1.5 * p99s[1],
         f"{p99s[1] if minutes >= 2 else float('nan'):.0f} ms -> {p99s[-1]:.0f} ms"),
        ("RSS after idle within 10% of the first minute's", idle_rss <= 1.10 * first,
         f"{idle_rss:.0f} MiB vs {first:.0f} MiB"),
    ]  # fmt: skip
    print()
    for name, ok, detail in checks:
        print(f"{'met   ' if ok else 'MISSED'} {name}: {detail}")
    return all(ok for _, ok, _ in checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (default 600)")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds idle before the last RSS reading")
    parser.add_argument("--clients", type=int, default=6, help="client threads sending at once")
    parser.add_argument("--threads", type=int, default=2, help="the server's torch threads")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help="60 s of traffic, 30 s idle")
    args = parser.parse_args()
    if args.quick:
        args.duration, args.idle = 60.0, 30.0
    print(machine_line(args.threads))
    print(cpu_flags_line())
    load = payloads(build_corpus(2000, seed=args.seed))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = ServerProcess(build_catalog(root), "--offline", "--threads", str(args.threads), log=root / "log")
        server.wait_ready()
        try:
            warm_up(server.url, load)  # all six models loaded before the clock starts
            started = time.monotonic()
            run = traffic(server, load, args.clients, args.duration, args.seed)
            print(f"traffic done: {len(run.records)} requests in {time.monotonic() - started:.0f} s; "
                  f"idle {args.idle:.0f} s", flush=True)  # fmt: skip
            time.sleep(args.idle)  # the idle period is what is measured, not a synchronisation
            idle_rss = proc_status_kib(server.proc.pid, "VmRSS") / 1024
            met = report(run, args.duration, idle_rss)
        except Exception:
            print(f"server log tail:\n{server.tail()}")
            raise
        finally:
            server.stop()
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
