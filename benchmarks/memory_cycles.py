"""Memory that comes back: load -> request -> evict cycles of each family that runs offline.

    .venv/bin/python -m benchmarks.memory_cycles [--cycles 30] [--families minilm,smollm2,...] [--mixed]

Each family gets its own ``sie-server serve --offline --threads 2`` process. A cycle is
``POST /v1/models/{id}/load``, one request of the family's kind, ``POST /v1/models/{id}/evict``.
After cycles 1, 3, 10 and the last, once the server's lane threads have ended (they end after
2 s idle, engine/compute_thread.py), the process's resident set (VmRSS of /proc/PID/status), open
file descriptors (/proc/PID/fd) and threads (/proc/PID/task) are read. The bound: after the last
cycle RSS is within ``RSS_BOUND`` of the cycle-3 figure (plus ``RSS_SLACK_MIB``, a few pages of
allocator noise on a small process), fds within ``FD_SLACK`` and threads within ``THREAD_SLACK``.
``--mixed`` runs the issue's original case instead: MiniLM and SmolLM2 in one server, each cycle
evicting, loading and calling both.

Families: the packaged MiniLM (encode), SmolLM2-135M on llama.cpp (generate, 8 tokens), docling (a
2-page PDF, text and a scan read by PP-OCR), PP-OCR alone (one PNG), faster-whisper tiny.en (espeak-ng
speaking a sentence; a tone when espeak-ng is missing), a tiny random GLiNER (extract) and a tiny random
OWLv2 detector, both built here as the tests build them.
"""

from __future__ import annotations

import argparse
import base64
import math
import os
import re
import struct
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks._common import cpu_flags_line, machine_line, proc_status_kib
from tests.helpers.catalog import (
    DOCLING,
    MINILM,
    OCR,
    SMOLLM,
    WHISPER_TINY,
    copy_real,
    real_config,
    tiny_detector,
    tiny_gliner,
    write_config,
)
from tests.helpers.server import ServerProcess

RSS_BOUND = 0.10  # last cycle's RSS at most 10% above cycle 3's ...
RSS_SLACK_MIB = 16.0  # ... plus this much (allocator noise on a small process)
FD_SLACK = 2  # open files: a socket or two of the client in flight
THREAD_SLACK = 2  # threads: a lane thread caught before its idle end
CHECKPOINTS = (1, 3, 10, 30)
TRIM_LINE = re.compile(r"malloc_trim gave back ([\d.]+) MiB in ([\d.]+) ms")
GLINER = "bench/tiny-gliner"
DETECTOR = "bench/tiny-owlv2"
BYPASS = {"X-SIE-Cache": "bypass"}  # the same texts each cycle: every request must reach the model
LINES = ["INVOICE 2024-017", "ACME Corp", "Total due: 1,234.56 EUR"]


@dataclass(frozen=True)
class Reading:
    rss_kib: int
    fds: int
    threads: int

    def line(self) -> str:
        return f"RSS {self.rss_kib / 1024:8.1f} MiB  fds {self.fds:4d}  threads {self.threads:3d}"


def read(pid: int) -> Reading:
    return Reading(
        proc_status_kib(pid, "VmRSS"), len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))
    )


def settled(pid: int, quiet_s: float = 2.6, limit_s: float = 10.0) -> Reading:
    """The reading once the thread count has not changed for ``quiet_s`` (idle lane threads have ended)."""
    deadline = time.monotonic() + limit_s
    last, since = read(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = read(pid)
        if now.threads != last.threads:
            since = time.monotonic()
        last = now
        if time.monotonic() - since >= quiet_s:
            break
    return read(pid)


def within_bound(first: Reading, last: Reading) -> list[str]:
    """What breaks the bound (empty: within it)."""
    broken = []
    rss_limit = first.rss_kib * (1 + RSS_BOUND) + RSS_SLACK_MIB * 1024
    if last.rss_kib > rss_limit:
        broken.append(f"RSS {last.rss_kib / 1024:.1f} MiB > {rss_limit / 1024:.1f} MiB")
    if last.fds > first.fds + FD_SLACK:
        broken.append(f"fds {last.fds} > {first.fds} + {FD_SLACK}")
    if last.threads > first.threads + THREAD_SLACK:
        broken.append(f"threads {last.threads} > {first.threads} + {THREAD_SLACK}")
    return broken


# ----- the families: (model ids, a catalog writer, one request) ---------------------------------------
def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def speech() -> bytes:
    from tests.helpers.speech import espeak_available, speak

    if espeak_available():
        return speak()
    rate, samples = 16000, 16000 * 2  # two seconds of a 440 Hz tone, 16-bit mono WAV
    body = b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * 440 * k / rate))) for k in range(samples))
    header = struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(body), b"WAVE", b"fmt ", 16, 1, 1, rate, 2 * rate, 2,
                         16, b"data", len(body))  # fmt: skip
    return header + body


def _png() -> str:
    from tests.helpers.documents import png, text_image

    return b64(png(text_image(LINES)))


def _pdf() -> str:
    from tests.helpers.document_files import invoice_pdf
    from tests.helpers.documents import joined_pdf, scanned_pdf, text_image

    return b64(joined_pdf([invoice_pdf(), scanned_pdf([text_image(LINES, size=48)])]))


def _write_real(model_id: str) -> Callable[[Path, Path], None]:
    def write(catalog: Path, weights: Path) -> None:
        if model_id == WHISPER_TINY:
            config = real_config(WHISPER_TINY)
            config["tasks"]["extract"]["options"].update(beam_size=1, temperature=0.0)
            write_config(catalog, config)
        else:
            copy_real(catalog, model_id)
        if model_id == DOCLING:
            copy_real(catalog, OCR)  # docling's scanned pages go to the OCR model

    return write


def _write_gliner(catalog: Path, weights: Path) -> None:
    from tests.helpers.tiny_models import build_bert_embedder, build_tiny_gliner

    backbone = build_bert_embedder(weights / "bert-embedder")
    write_config(catalog, tiny_gliner(GLINER, build_tiny_gliner(weights / "tiny-gliner", backbone=backbone)))


def _write_detector(catalog: Path, weights: Path) -> None:
    from tests.helpers.tiny_detectors import build_owlv2

    write_config(catalog, tiny_detector(DETECTOR, build_owlv2(weights / "tiny-owlv2")))


@dataclass(frozen=True)
class Family:
    name: str
    models: tuple[str, ...]  # loaded and evicted each cycle (docling: also the OCR model its scans use)
    write: Callable[[Path, Path], None]
    route: str
    body: Callable[[], dict[str, Any]]


FAMILIES = {
    f.name: f
    for f in (
        Family("minilm", (MINILM,), _write_real(MINILM), f"/v1/encode/{MINILM}",
               lambda: {"items": [{"text": t} for t in LINES * 3]}),
        Family("smollm2", (SMOLLM,), _write_real(SMOLLM), f"/v1/generate/{SMOLLM}",
               lambda: {"prompt": "The invoice total is", "max_new_tokens": 8, "temperature": 0.0}),
        Family("docling", (DOCLING, OCR), _write_real(DOCLING), f"/v1/extract/{DOCLING}",
               lambda: {"items": [{"document": {"data": _pdf(), "format": "pdf"}}]}),
        Family("ppocr", (OCR,), _write_real(OCR), f"/v1/extract/{OCR}",
               lambda: {"items": [{"images": [{"data": _png(), "format": "png"}]}]}),
        Family("whisper", (WHISPER_TINY,), _write_real(WHISPER_TINY), f"/v1/extract/{WHISPER_TINY}",
               lambda: {"items": [{"audio": {"data": b64(speech()), "format": "wav"}}]}),
        Family("gliner", (GLINER,), _write_gliner, f"/v1/extract/{GLINER}",
               lambda: {"items": [{"text": "ACME Corp in Berlin sent invoice 2024-017."}],
                        "params": {"labels": ["company", "city"]}}),
        Family("detector", (DETECTOR,), _write_detector, f"/v1/extract/{DETECTOR}",
               lambda: {"items": [{"images": [{"data": _png(), "format": "png"}]}], "params": {"labels": ["text"]}}),
    )
}  # fmt: skip


def post(client: httpx.Client, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = client.post(path, json=body, headers=BYPASS)
    for _ in range(100):  # an eviction right after a generate: 409 until the decode thread has freed its cells
        if answer.status_code != 409 or not path.endswith("/evict"):
            break
        time.sleep(0.05)
        answer = client.post(path, json=body, headers=BYPASS)
    if answer.status_code != 200:
        raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text[:300]}")
    result: dict[str, Any] = answer.json()
    for item in result.get("items", []):
        if "error" in item:
            raise RuntimeError(f"POST {path}: item error {item['error']}")
    return result


def cycle(client: httpx.Client, families: list[Family], bodies: dict[str, dict[str, Any]]) -> None:
    """Load every model of ``families``, one request each, evict them all."""
    for family in families:
        for model_id in family.models:
            post(client, f"/v1/models/{model_id}/load")
    for family in families:
        post(client, family.route, bodies[family.name])
    for family in families:
        for model_id in family.models:
            post(client, f"/v1/models/{model_id}/evict")


def run_cycles(
    server: ServerProcess,
    families: list[Family],
    cycles: int,
    checkpoints: tuple[int, ...] = CHECKPOINTS,
    report: Callable[[int, Reading], None] | None = None,
) -> dict[int, Reading]:
    """``cycles`` cycles against ``server``; the settled reading after each checkpoint cycle (and the last)."""
    bodies = {f.name: f.body() for f in families}
    readings: dict[int, Reading] = {}
    with httpx.Client(base_url=server.url, timeout=600) as client:
        for k in range(1, cycles + 1):
            cycle(client, families, bodies)
            if k in checkpoints or k == cycles:
                readings[k] = settled(server.proc.pid)
                if report is not None:
                    report(k, readings[k])
    return readings


def serve(root: Path, families: list[Family], threads: int, env: dict[str, str] | None = None) -> ServerProcess:
    catalog, weights = root / "catalog", root / "weights"
    catalog.mkdir(parents=True, exist_ok=True)
    for family in families:
        family.write(catalog, weights)
    server = ServerProcess(catalog, "--offline", "--threads", str(threads), env=env, log=root / "server.log")
    return server.wait_ready()


def show(k: int, reading: Reading) -> None:
    print(f"  after cycle {k:3d}: {reading.line()}", flush=True)


def measure(label: str, root: Path, families: list[Family], args: argparse.Namespace) -> bool:
    print(f"\n{label} ({', '.join(m for f in families for m in f.models)}): {args.cycles} cycles", flush=True)
    started = time.monotonic()
    with serve(root, families, args.threads) as server:
        idle = settled(server.proc.pid)
        print(f"  before any load: {idle.line()}", flush=True)
        try:
            readings = run_cycles(server, families, args.cycles, report=show)
        except Exception:
            print(f"  server log tail:\n{server.tail()}")
            raise
    trims = [(float(m[1]), float(m[2])) for m in TRIM_LINE.finditer((root / "server.log").read_text())]
    if trims:
        print(
            f"  malloc_trim after each eviction: {len(trims)} times, gave back {sum(t[0] for t in trims):.0f} MiB "
            f"in all ({max(t[0] for t in trims):.0f} MiB at most), {max(t[1] for t in trims):.0f} ms at most"
        )
    base, last = readings[min(3, args.cycles)], readings[args.cycles]
    broken = within_bound(base, last)
    growth = (last.rss_kib - base.rss_kib) / 1024
    verdict = "within the bound" if not broken else "OUT OF BOUND: " + "; ".join(broken)
    first = readings[1]
    print(f"  cycle {args.cycles} vs cycle 1: RSS {(last.rss_kib - first.rss_kib) / 1024:+.1f} MiB")
    print(
        f"  cycle {args.cycles} vs cycle 3: RSS {growth:+.1f} MiB ({growth * 1024 / base.rss_kib:+.1%}), fds "
        f"{last.fds - base.fds:+d}, threads {last.threads - base.threads:+d}: {verdict} "
        f"({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    return not broken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2, help="the server's torch threads")
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"of {', '.join(FAMILIES)}")
    parser.add_argument("--mixed", action="store_true", help="MiniLM and SmolLM2 in one server (the issue's case)")
    args = parser.parse_args()
    print(machine_line(args.threads))
    print(cpu_flags_line())
    print(
        f"bound: after the last cycle RSS <= cycle 3's x {1 + RSS_BOUND:.2f} + {RSS_SLACK_MIB:.0f} MiB, "
        f"fds <= cycle 3's + {FD_SLACK}, threads <= cycle 3's + {THREAD_SLACK}; MALLOC_ARENA_MAX="
        f"{os.environ.get('MALLOC_ARENA_MAX', '(unset)')}"
    )
    results: dict[str, bool] = {}
    with tempfile.TemporaryDirectory(prefix="sie-memory-cycles-") as tmp:
        if args.mixed:
            pair = [FAMILIES["minilm"], FAMILIES["smollm2"]]
            results["minilm+smollm2"] = measure("minilm+smollm2 in one server", Path(tmp) / "mixed", pair, args)
        else:
            for name in args.families.split(","):
                results[name] = measure(name, Path(tmp) / name, [FAMILIES[name]], args)
    print("\n" + ", ".join(f"{name}: {'ok' if ok else 'OUT OF BOUND'}" for name, ok in results.items()))
    if not all(results.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
