"""Soak: mixed traffic against one real server for a set time; RSS, fds, threads, queue, latency.

    .venv/bin/python -m benchmarks.soak [--duration 600] [--idle 60] [--clients 6] [--quick]

One ``sie-server serve --offline`` process on a catalog of the real MiniLM (encode,
score), the packaged SmolLM2 (generate, streamed and not) and a tiny random GLiNER built
here (extract). ``--clients`` threads each send, for ``--duration`` seconds, a random mix:
encode of one text and of 2-64 texts of every length, score, extract, generate (16 new
tokens), a streamed generate read to the end, clients that disconnect (a stream dropped
after its first event, an encode dropped by a 50 ms timeout) and bad requests (each
must get a 4xx). Every 5 s the server's resident set (VmRSS), open file descriptors,
threads and queued items (``sie_queue_items``) are sampled, with the cores other
processes used. Then the server idles ``--idle`` seconds and RSS is read again.

Goals (issue 12): RSS growth <= 5% after the first minute, fds and threads flat, zero
5xx, p99 of the last minute within 1.5x of the second minute's, RSS after the idle
within 10% of the first minute's level.
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

from benchmarks._common import machine_line, metric_values, proc_cpu_seconds, proc_status_kib, system_busy_seconds
from benchmarks.corpus import build_corpus
from tests.helpers.catalog import MINILM, SMOLLM, copy_real, tiny_gliner, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import build_bert_embedder, build_tiny_gliner

GLINER = "bench/tiny-gliner"
SAMPLE_S = 5.0
BAD = (  # (route, body): each must be refused with a 4xx
    (f"/v1/encode/{MINILM}", b'{"items": [{"text": "\\ud800"}]}'),
    (f"/v1/encode/{MINILM}", b'{"items": [{"text": NaN}]}'),
    (f"/v1/encode/{MINILM}", b"{not json"),
    (f"/v1/encode/{MINILM}", b'{"items": []}'),
    (f"/v1/encode/{MINILM}", b'{"items": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}'),
    ("/v1/encode/no/such-model", b'{"items": [{"text": "x"}]}'),
    (f"/v1/score/{MINILM}", b'{"query": {"text": "q"}}'),
    (f"/v1/generate/{SMOLLM}", b'{"prompt": "x", "seed": 1180591620717411303424}'),
    (f"/v1/generate/{SMOLLM}", b'{"prompt": "x", "temperature": 1e-300}'),
    (f"/v1/generate/{SMOLLM}", b'{"prompt": "x", "stop": [""]}'),
    (f"/v1/extract/{GLINER}", b'{"items": [{"text": "x"}]}'),
)
KINDS = (  # (kind, weight)
    ("encode1", 25),
    ("encodeN", 15),
    ("score", 12),
    ("extract", 10),
    ("generate", 5),
    ("stream", 5),
    ("disconnect", 8),
    ("bad", 20),
)


@dataclass
class Record:
    at: float
    kind: str
    status: int  # 0: the client hung up on purpose
    seconds: float


@dataclass
class Sample:
    at: float
    rss_mib: float
    fds: int
    threads: int
    queued: float
    other_cores: float


@dataclass
class Run:
    records: list[Record] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def build_catalog(root: Path) -> Path:
    catalog = root / "catalog"
    catalog.mkdir()
    copy_real(catalog, MINILM)
    copy_real(catalog, SMOLLM)
    backbone = build_bert_embedder(root / "bert")
    write_config(catalog, tiny_gliner(GLINER, build_tiny_gliner(root / "gliner", backbone)))
    return catalog


def one_request(client: httpx.Client, kind: str, rng: random.Random, texts: list[str]) -> int:
    """Sends one request of ``kind``; its status (0 when the client hung up on purpose)."""
    if kind == "encode1":
        return client.post(f"/v1/encode/{MINILM}", json={"items": [{"text": rng.choice(texts)}]}).status_code
    if kind == "encodeN":
        items = [{"text": rng.choice(texts)} for _ in range(rng.randint(2, 64))]
        return client.post(f"/v1/encode/{MINILM}", json={"items": items}).status_code
    if kind == "score":
        docs = [{"text": rng.choice(texts)} for _ in range(rng.randint(1, 20))]
        return client.post(
            f"/v1/score/{MINILM}", json={"query": {"text": rng.choice(texts)}, "items": docs}
        ).status_code
    if kind == "extract":
        body = {"items": [{"text": rng.choice(texts)[:300]}], "params": {"labels": ["person", "place"]}}
        return client.post(f"/v1/extract/{GLINER}", json=body).status_code
    prompt = {"prompt": rng.choice(texts)[:200], "max_new_tokens": 16}
    if kind == "generate":
        return client.post(f"/v1/generate/{SMOLLM}", json=prompt).status_code
    if kind == "stream":
        with client.stream("POST", f"/v1/generate/{SMOLLM}", json={**prompt, "stream": True}) as answer:
            for _ in answer.iter_bytes():
                pass
            return answer.status_code
    if kind == "disconnect":
        if rng.random() < 0.5:
            with client.stream("POST", f"/v1/generate/{SMOLLM}", json={**prompt, "stream": True}) as answer:
                if answer.status_code >= 500:
                    return answer.status_code
                next(answer.iter_bytes(), None)  # the first event, then hang up
            return 0
        items = [{"text": rng.choice(texts)} for _ in range(32)]
        try:
            return client.post(f"/v1/encode/{MINILM}", json={"items": items}, timeout=0.05).status_code
        except httpx.TimeoutException:
            return 0
    route, raw = rng.choice(BAD)
    status = client.post(route, content=raw, headers={"content-type": "application/json"}).status_code
    return status if 400 <= status < 500 else 599 if status >= 500 else 1000 + status  # a 2xx/3xx is wrong too


def client_loop(url: str, seed: int, texts: list[str], until: float, run: Run) -> None:
    rng = random.Random(seed)
    kinds, weights = zip(*KINDS, strict=True)
    with httpx.Client(base_url=url, timeout=120.0) as client:
        while time.monotonic() < until:
            kind = rng.choices(kinds, weights)[0]
            started = time.monotonic()
            try:
                status = one_request(client, kind, rng, texts)
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
            )
        )


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98] if len(values) >= 2 else float("nan")


def report(run: Run, start: float, duration: float, idle_rss: float) -> None:
    minutes = max(1, round(duration / 60))
    print(f"\n{'minute':>6} {'reqs':>6} {'5xx':>4} {'4xx':>5} {'hangup':>6} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'RSS MiB':>9} {'fds':>5} {'threads':>7} {'queue max':>9} {'other':>6}")  # fmt: skip
    p99s, rss_end, fds, threads = [], [], [], []
    for m in range(minutes):
        lo, hi = start + 60 * m, start + 60 * (m + 1)
        rows = [r for r in run.records if lo <= r.at < hi]
        good = [r.seconds * 1000 for r in rows if 200 <= r.status < 300]
        samples = [s for s in run.samples if 60 * m < s.at <= 60 * (m + 1)] or run.samples[-1:]
        p99s.append(p99(good))
        rss_end.append(samples[-1].rss_mib)
        fds.append(max(s.fds for s in samples))
        threads.append(max(s.threads for s in samples))
        print(
            f"{m + 1:>6} {len(rows):>6} {sum(r.status >= 500 or r.status < 0 for r in rows):>4} "
            f"{sum(400 <= r.status < 500 for r in rows):>5} {sum(r.status == 0 for r in rows):>6} "
            f"{statistics.median(good) if good else float('nan'):>8.0f} {p99s[-1]:>8.0f} {rss_end[-1]:>9.0f} "
            f"{fds[-1]:>5} {threads[-1]:>7} {max(s.queued for s in samples):>9.0f} "
            f"{statistics.mean(s.other_cores for s in samples):>6.2f}"
        )
    by_kind = {k: [r for r in run.records if r.kind == k] for k, _ in KINDS}
    print("\nper kind: " + ", ".join(f"{k} {len(v)}" for k, v in by_kind.items()))
    wrong = sorted({r.status for r in run.records if r.status >= 500 or r.status < 0 or r.status >= 1000})
    first = rss_end[0]
    peak_after = max(s.rss_mib for s in run.samples if s.at > 60) if duration > 60 else first
    checks = [
        ("RSS growth after the first minute <= 5%", peak_after / first - 1 <= 0.05,
         f"{first:.0f} MiB at 1 min, peak after it {peak_after:.0f} MiB ({(peak_after / first - 1) * 100:+.1f}%)"),
        ("fds flat (last minute's max <= first's + 5)", fds[-1] <= fds[0] + 5, f"{fds[0]} -> {fds[-1]}"),
        ("threads flat (last minute's max <= first's + 2)", threads[-1] <= threads[0] + 2,
         f"{threads[0]} -> {threads[-1]}"),
        ("zero 5xx, dropped connections or wrongly accepted bad requests", not wrong, f"statuses {wrong or 'none'}"),
        ("p99 last minute <= 1.5x the second's", minutes < 2 or p99s[-1] <= 1.5 * p99s[1],
         f"{p99s[1] if minutes >= 2 else float('nan'):.0f} ms -> {p99s[-1]:.0f} ms"),
        ("RSS after idle within 10% of the first minute's", idle_rss <= 1.10 * first,
         f"{idle_rss:.0f} MiB vs {first:.0f} MiB"),
    ]  # fmt: skip
    print()
    for name, ok, detail in checks:
        print(f"{'met   ' if ok else 'MISSED'} {name}: {detail}")


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
    texts = build_corpus(2000, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = ServerProcess(build_catalog(root), "--offline", "--threads", str(args.threads), log=root / "log")
        server.wait_ready()
        try:
            with httpx.Client(base_url=server.url, timeout=300.0) as warm:  # load all three models first
                for route, body in (
                    (f"/v1/encode/{MINILM}", {"items": [{"text": "warm"}]}),
                    (f"/v1/generate/{SMOLLM}", {"prompt": "warm", "max_new_tokens": 2}),
                    (f"/v1/extract/{GLINER}", {"items": [{"text": "warm"}], "params": {"labels": ["x"]}}),
                ):
                    warm.post(route, json=body).raise_for_status()
            run = Run()
            start = time.monotonic()
            until = start + args.duration
            workers = [
                threading.Thread(target=client_loop, args=(server.url, args.seed + i, texts, until, run))
                for i in range(args.clients)
            ]
            for worker in workers:
                worker.start()
            sample_loop(server.proc.pid, server.url, start, until, run)
            for worker in workers:
                worker.join()
            print(
                f"traffic done: {len(run.records)} requests in {time.monotonic() - start:.0f} s; idle {args.idle:.0f} s"
            )
            time.sleep(args.idle)  # the idle period is what is measured, not a synchronisation
            idle_rss = proc_status_kib(server.proc.pid, "VmRSS") / 1024
            report(run, start, args.duration, idle_rss)
        except Exception:
            print(f"server log tail:\n{server.tail()}")
            raise
        finally:
            server.stop()


if __name__ == "__main__":
    main()
