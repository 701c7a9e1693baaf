"""OCR pages per second: PP-OCRv6 through the server vs the same engine bare, in-process, side by side.

    .venv/bin/python -m benchmarks.ocr [--threads 2] [--pages 24] [--rounds 3] [--clients 8]

The pictures: ``--pages`` invoice-like pages drawn with Pillow (4 to 7 lines each, about 900 x 500
pixels), the same in every set-up. Bare: RapidOCR itself in this process, with the settings the server's
adapter gives it (the adapter's own ``RapidOCR`` object: ONNX Runtime with ``--threads`` intra-op
threads), reading each page's PNG bytes one after another, as a caller of the library would. Server:
``sie-server --threads N`` on 127.0.0.1 with the same model, one client sending the pages one request
at a time, then ``--clients`` clients at once (each its share of the pages, one page a request). The
set-ups take turns for ``--rounds`` rounds (the machine drifts); printed: the medians of the
per-round ratios server / bare (goals: >= 0.9x one client, >= 1.0x with 8 clients).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks._common import cpu_flags_line, machine_line
from sie_sdk import SIEClient
from tests.helpers.catalog import OCR, copy_real, real_config_path
from tests.helpers.documents import png, text_image
from tests.helpers.server import ServerProcess

RAW = argparse.RawDescriptionHelpFormatter
WORDS = "invoice total due payment acme corp consulting hours order amount net tax eur march".split()


def pages(count: int) -> list[Any]:
    out = []
    for k in range(count):
        lines = [f"INVOICE {1000 + k}"] + [
            " ".join(WORDS[(k + i + j) % len(WORDS)] for j in range(4)) + f" {k * 7 + i},{i}0 EUR"
            for i in range(3 + k % 4)
        ]
        out.append(text_image(lines, size=40))
    return out


def bare_engine(threads: int) -> Any:
    import torch

    from sie_server.adapters import create_adapter
    from sie_server.catalog.loader import parse_config_file

    torch.set_num_threads(threads)  # the adapter gives ONNX Runtime as many threads as torch has
    config = parse_config_file(real_config_path(OCR))
    adapter = create_adapter(config, config.profile("cpu"), "cpu")
    import rapidocr

    adapter.load(Path(rapidocr.__file__).parent / "models")
    return adapter


def run_bare(adapter: Any, encoded: list[bytes]) -> float:
    """RapidOCR itself (the adapter's own engine object, so the same settings) on each PNG's bytes."""
    started = time.perf_counter()
    for data in encoded:
        if not adapter.engine.engine(data).txts:
            raise RuntimeError("the bare engine read nothing")
    return len(encoded) / (time.perf_counter() - started)


def run_server(url: str, encoded: list[bytes], clients: int) -> float:
    shares = [encoded[k::clients] for k in range(clients)]

    def client_loop(share: list[bytes]) -> int:
        with SIEClient(url, timeout=600) as client:
            for data in share:
                result = client.extract(OCR, {"images": [data]})
                if "error" in result or not result["entities"]:
                    raise RuntimeError(f"bad answer: {result}")
        return len(share)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        done = sum(pool.map(client_loop, shares))
    return done / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=RAW)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pages", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    print(machine_line(args.threads))
    print(cpu_flags_line())
    pictures = pages(args.pages)
    encoded = [png(p) for p in pictures]
    print(f"pages: {len(pictures)}, sizes {pictures[0].size} .. {pictures[-1].size}; rounds: {args.rounds}")
    adapter = bare_engine(args.threads)
    run_bare(adapter, encoded[:2])  # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "catalog").mkdir()
        copy_real(root / "catalog", OCR)
        server = ServerProcess(root / "catalog", "--offline", "--threads", str(args.threads), "--preload", OCR,
                               env={"HOME": str(root / "home")}, log=root / "server.log")  # fmt: skip
        server.wait_ready()
        try:
            run_server(server.url, encoded[:2], 1)  # warm-up
            rows = []
            for round_ in range(args.rounds):
                bare = run_bare(adapter, encoded)
                one = run_server(server.url, encoded, 1)
                many = run_server(server.url, encoded, args.clients)
                rows.append((bare, one, many))
                print(f"round {round_ + 1}: bare {bare:.2f} pages/s, server 1 client {one:.2f}, "
                      f"{args.clients} clients {many:.2f}", flush=True)  # fmt: skip
        finally:
            server.stop()
    one_ratio = statistics.median(one / bare for bare, one, _ in rows)
    many_ratio = statistics.median(many / bare for bare, _, many in rows)
    print(
        f"\nmedian server / bare, 1 client: {one_ratio:.3f}x (goal >= 0.9x: {'met' if one_ratio >= 0.9 else 'missed'})"
    )
    print(f"median server / bare, {args.clients} clients: {many_ratio:.3f}x "
          f"(goal >= 1.0x: {'met' if many_ratio >= 1.0 else 'missed'})")  # fmt: skip


if __name__ == "__main__":
    main()
