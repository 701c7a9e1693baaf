"""docling, PP-OCR and faster-whisper side by side in one server: the resident set, then what glibc holds.

    .venv/bin/python -m benchmarks.media_heap [--seconds 360] [--clients 4]

One ``sie-server serve --offline --threads 2`` with the three families of ``benchmarks/memory_cycles.py``
(docling's 2-page PDF with a scanned page PP-OCR reads, PP-OCR on a PNG, whisper tiny.en on a spoken
sentence); ``--clients`` threads each send a request of a random one of the three, back to back, for
``--seconds``, the exact cache bypassed. VmRSS every 10 s; then 15 s idle, RSS again, and through gdb (when
installed) ``malloc_stats()`` (into the server's log: each arena's bytes held and in use) and
``malloc_trim(0)``, and RSS after it. Set ``PYTHONPATH=<tree>/server`` to measure another tree's server.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks._common import cpu_flags_line, machine_line, proc_status_kib
from benchmarks.memory_cycles import BYPASS, FAMILIES, serve

ARENA = re.compile(r"Arena \d+:\nsystem bytes\s+=\s+(\d+)\nin use bytes\s+=\s+(\d+)")
MIB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=360.0)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    print(machine_line(2))
    print(cpu_flags_line())
    families = [FAMILIES[name] for name in ("docling", "ppocr", "whisper")]
    bodies = {f.name: f.body() for f in families}
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp), families, 2) as server:
        pid = server.proc.pid

        def rss() -> float:
            return proc_status_kib(pid, "VmRSS") / 1024

        with httpx.Client(base_url=server.url, timeout=600) as client:
            for f in families:
                client.post(f.route, json=bodies[f.name], headers=BYPASS).raise_for_status()
        print(f"warm: RSS {rss():.0f} MiB", flush=True)
        until = time.monotonic() + args.seconds
        sent = dict.fromkeys(bodies, 0)
        failed = [0]

        def loop(seed: int) -> None:
            rng = random.Random(seed)
            with httpx.Client(base_url=server.url, timeout=600) as client:
                while time.monotonic() < until:
                    f = rng.choice(families)
                    answer = client.post(f.route, json=bodies[f.name], headers=BYPASS)
                    sent[f.name] += 1
                    failed[0] += answer.status_code != 200 or any("error" in i for i in answer.json()["items"])

        workers = [threading.Thread(target=loop, args=(k,)) for k in range(args.clients)]
        for worker in workers:
            worker.start()
        samples = []
        while time.monotonic() < until:
            time.sleep(10)
            samples.append(rss())
            print(f"  RSS {samples[-1]:7.1f} MiB  load {os.getloadavg()[0]:.2f}", flush=True)
        for worker in workers:
            worker.join()
        print(f"{sent} requests, {failed[0]} failed; RSS {samples[0]:.0f} -> {samples[-1]:.0f} MiB, "
              f"{min(samples):.0f}-{max(samples):.0f}", flush=True)  # fmt: skip
        time.sleep(15)
        print(f"after 15 s idle: RSS {rss():.0f} MiB", flush=True)
        if shutil.which("gdb") is None:
            return
        calls = ["-ex", "call (void)malloc_stats()", "-ex", "call (int)malloc_trim(0)"]
        subprocess.run(["gdb", "-p", str(pid), "-batch", *calls], capture_output=True, timeout=120, check=False)
        time.sleep(1)
        arenas = [(int(s) / MIB, int(u) / MIB) for s, u in ARENA.findall((Path(tmp) / "server.log").read_text())]
        print(f"after malloc_trim(0): RSS {rss():.0f} MiB; {len(arenas)} arenas, held / in use (MiB): "
              + ", ".join(f"{s:.0f}/{u:.0f}" for s, u in arenas))  # fmt: skip


if __name__ == "__main__":
    main()
