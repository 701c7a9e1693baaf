"""Zero-shot classification with 10 labels: the server's NLI path vs transformers' zero-shot pipeline
in-process, on the same texts, side by side.

    .venv/bin/python -m benchmarks.zero_shot [--threads 2] [--texts 32] [--labels 10] [--rounds 3]

No real NLI model is available offline, so both sides run the same tiny random NLI model built like the
tests build theirs (a BERT sequence-classification head with contradiction / neutral / entailment, hidden
256, 4 layers, WordPiece over the test vocabulary): the work (texts x labels premise-hypothesis pairs
through one encoder) is what a real model's is, at a smaller width. Bare: ``pipeline("zero-shot-
classification")`` called on the list of texts with the labels, as its documentation shows (it runs
the pairs one at a time). Server: ``sie-server --threads N`` on 127.0.0.1, one ``extract`` request with
every text an item and the labels in ``params.labels`` (every (text, label) pair one row of the shared
queue's batches). Both use the default template "This example is {}." and single-label softmax; the top
labels are checked to agree. The set-ups take turns for ``--rounds`` rounds; printed: the median of the
per-round ratios server / bare in texts per second (goal >= 1.5x).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import cpu_flags_line, machine_line
from tests.helpers.catalog import tiny_classifier, write_config
from tests.helpers.server import ServerProcess
from tests.helpers.tiny_classifiers import build_nli
from tests.helpers.tiny_models import WORDS

RAW = argparse.RawDescriptionHelpFormatter
MODEL = "bench/tiny-nli"
LABELS = ["billing", "support", "sports", "weather", "politics", "travel", "health", "music", "science", "food"]


def texts(count: int) -> list[str]:
    return [" ".join(WORDS[(k * 7 + j * 3) % len(WORDS)] for j in range(16 + k % 17)) for k in range(count)]


def run_bare(classifier: Any, batch: list[str], labels: list[str]) -> tuple[float, list[str]]:
    started = time.perf_counter()
    answers = classifier(batch, candidate_labels=labels)
    elapsed = time.perf_counter() - started
    return len(batch) / elapsed, [a["labels"][0] for a in answers]


def run_server(url: str, batch: list[str], labels: list[str]) -> tuple[float, list[str]]:
    body = {"items": [{"text": t} for t in batch], "params": {"labels": labels}}
    started = time.perf_counter()
    r = httpx.post(f"{url}/v1/extract/{MODEL}", json=body, timeout=600)
    elapsed = time.perf_counter() - started
    r.raise_for_status()
    return len(batch) / elapsed, [item["classifications"][0]["label"] for item in r.json()["items"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--labels", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import torch
    from transformers import pipeline

    torch.set_num_threads(args.threads)
    print(machine_line(args.threads))
    print(cpu_flags_line())
    batch, labels = texts(args.texts), LABELS[: args.labels]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = build_nli(root / "nli", hidden=256, layers=4, positions=512)
        (root / "catalog").mkdir()
        config = tiny_classifier(MODEL, folder, "nli")
        config["max_sequence_length"] = 512
        config["profiles"] = {"cpu": {"dtype": "float32", "max_batch_tokens": 8192}}
        write_config(root / "catalog", config)
        classifier = pipeline("zero-shot-classification", model=str(folder), device="cpu")
        print(f"texts: {len(batch)} ({len(batch[0].split())} to {max(len(t.split()) for t in batch)} words), "
              f"labels: {len(labels)}, model: BERT NLI head, hidden 256, 4 layers; rounds: {args.rounds}")  # fmt: skip
        server = ServerProcess(root / "catalog", "--offline", "--threads", str(args.threads), "--preload", MODEL,
                               "--cpu-precision", "fp32", env={"HOME": str(root / "home")},
                               log=root / "server.log")  # fmt: skip
        server.wait_ready()
        try:
            run_bare(classifier, batch[:2], labels)  # warm-up
            run_server(server.url, batch[:2], labels)
            rows = []
            for round_ in range(args.rounds):
                bare, bare_top = run_bare(classifier, batch, labels)
                served, served_top = run_server(server.url, batch, labels)
                agree = sum(a == b for a, b in zip(bare_top, served_top, strict=True))
                rows.append((bare, served))
                print(f"round {round_ + 1}: pipeline {bare:.2f} texts/s, server {served:.2f} texts/s "
                      f"({served / bare:.2f}x); top labels agree {agree}/{len(batch)}", flush=True)  # fmt: skip
        finally:
            server.stop()
    ratio = statistics.median(served / bare for bare, served in rows)
    print(f"\nmedian server / pipeline: {ratio:.2f}x (goal >= 1.5x: {'met' if ratio >= 1.5 else 'missed'})")


if __name__ == "__main__":
    main()
