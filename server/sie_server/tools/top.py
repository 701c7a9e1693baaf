"""``sie-server top [--url URL] [--interval 1] [--once]``: a live terminal view of ``GET /v1/status``.

Plain text drawn by rich (no mouse, no alternate screen: it works over SSH and in a log), redrawn
every ``interval`` seconds; ``--once`` prints one frame and exits (scripts, tests).
"""

from __future__ import annotations

import sys
import time

import httpx
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from sie_server.contract.status import ModelStatus, PoolStatus, StatusReport

STATE_STYLE = {"loaded": "green", "loading": "yellow", "failed": "red", "available": "dim"}


class TopError(Exception):
    """The view cannot be drawn: one line for the person running it."""


def fetch(client: httpx.Client, url: str) -> StatusReport:
    try:
        answer = client.get(f"{url.rstrip('/')}/v1/status")
    except httpx.HTTPError as exc:
        raise TopError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None
    if answer.status_code != 200:
        raise TopError(f"{url}/v1/status answered HTTP {answer.status_code}: {answer.text[:200]}")
    return StatusReport.model_validate(answer.json())


def _bytes(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def state_cell(model: ModelStatus) -> Text:
    label: str = model.state
    if model.state == "loading" and model.loading_s is not None:
        label = f"loading {model.loading_s:.1f}s"
    elif model.state == "loaded" and model.load_seconds is not None:
        label = f"loaded ({model.load_seconds:.1f}s)"
    return Text(label, style=STATE_STYLE.get(model.state, ""))


def models_table(report: StatusReport) -> Table:
    table = Table(title=f"models (last {report.window_s:.0f} s)", title_justify="left", expand=False)
    for name in ("MODEL", "STATE", "CHARGE", "REQ/S", "P50 ms", "P99 ms", "QUEUED", "FILL", "PAD", "TOK/S"):
        table.add_column(name, justify="left" if name in ("MODEL", "STATE") else "right", no_wrap=name == "MODEL")
    gateway = report.role == "gateway"
    if gateway:
        table.add_column("WORKERS", justify="right")
    for m in report.models:
        queued = sum(m.queued.values())
        row: list[RenderableType] = [
            m.id,
            state_cell(m),
            _bytes(m.charge_bytes) if m.charge_bytes else "-",
            _num(m.requests_per_s, "{:.2f}"),
            _num(m.p50_ms),
            _num(m.p99_ms),
            str(queued) if queued else "-",
            _num(m.batch_fill, "{:.0%}"),
            _num(m.padding_ratio, "{:.2f}"),
            _num(m.decode_tokens_per_s) if m.generator else "",
        ]
        if gateway:
            row.append(f"{m.loaded_on or 0}/{m.workers or 0}")
        table.add_row(*row)
    return table


def pools_table(pools: list[PoolStatus]) -> Table:
    table = Table(title="pools", title_justify="left")
    for name in ("POOL", "WORKERS", "MODELS LOADED", "INFLIGHT", "PENDING", "DEAD LETTERS"):
        table.add_column(name)
    for pool in pools:
        live = [w for w in pool.workers if not w.stopping]
        stopping = len(pool.workers) - len(live)
        loaded = sorted({m for w in pool.workers for m, state in w.models.items() if state == "loaded"})
        table.add_row(
            pool.name,
            f"{len(live)} live" + (f", {stopping} stopping" if stopping else ""),
            ", ".join(loaded) or "-",
            str(sum(w.inflight for w in pool.workers)),
            str(sum(pool.pending.values())),
            "-" if pool.dead_letters is None else str(pool.dead_letters),
        )
    return table


def frame(report: StatusReport, url: str) -> Group:
    """One screen: a header line, the models, memory or pools, and the last errors."""
    parts: list[RenderableType] = [
        Text(f"sie {report.role} {report.version} at {url}, up {report.uptime_s:.0f} s", style="bold")
    ]
    if report.memory is not None:
        mem = report.memory
        share = mem.used_bytes / mem.budget_bytes if mem.budget_bytes else 0.0
        parts.append(
            Text(
                f"memory: {_bytes(mem.used_bytes)} of {_bytes(mem.budget_bytes)} ({share:.0%}; models "
                f"{_bytes(mem.charged_bytes)}, beyond them {_bytes(mem.untracked_bytes)})"
            )
        )
    parts.append(models_table(report))
    parts.extend(Text(f"{m.id} failed: {m.error}", style="red") for m in report.models if m.error)
    if report.pools:
        parts.append(pools_table(report.pools))
    errors = [
        Text(f"  {time.strftime('%H:%M:%S', time.localtime(e.at))} {e.model} {e.code}: {e.message}", style="red")
        for e in report.errors[:5]
    ]
    parts.extend([Text("last errors:"), *errors] if errors else [Text("last errors: none")])
    return Group(*parts)


def run(url: str, interval: float, *, once: bool) -> int:
    """The command: 0, or one line on stderr and 1 when the server cannot be read."""
    console = Console(width=None if sys.stdout.isatty() else 160)
    try:
        with httpx.Client(timeout=10.0) as client:
            if once:
                console.print(frame(fetch(client, url), url))
                return 0
            from rich.live import Live

            with Live(frame(fetch(client, url), url), console=console, auto_refresh=False) as live:
                while True:
                    time.sleep(max(0.1, interval))
                    live.update(frame(fetch(client, url), url), refresh=True)
    except TopError as exc:
        print(f"sie-server: top: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
