"""A real ``sie-server`` process on 127.0.0.1 for tests and benchmarks."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import httpx

from tests.helpers.wait import wait_until

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pythonpath() -> str:
    """The repository root first on the path, so test catalogs can name adapters in tests/helpers."""
    return os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


class ServerProcess:
    def __init__(
        self,
        models_dir: Path,
        *args: str,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        max_file_bytes: int | None = None,
    ):
        """``max_file_bytes``: the process may not grow any file past this (RLIMIT_FSIZE; Python
        ignores SIGXFSZ, so such a write fails with EFBIG, as on a full disk)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        command = [
            sys.executable,
            "-m",
            "sie_server.cli",
            "serve",
            "--port",
            str(self.port),
            "--models-dir",
            str(models_dir),
            *args,
        ]
        self._out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - closed in stop()
        # its own data dir (the Batch API's store) unless --data-dir says otherwise: never the user's
        self._data = tempfile.TemporaryDirectory(prefix="sie-data-")
        self.proc = subprocess.Popen(
            command,
            env={**os.environ, "PYTHONPATH": pythonpath(), "XDG_DATA_HOME": self._data.name, **(env or {})},
            stdout=self._out,
            stderr=subprocess.STDOUT,
            preexec_fn=None if max_file_bytes is None else partial(_limit_file_size, max_file_bytes),
        )

    def wait_ready(self, timeout_s: float = 120.0) -> ServerProcess:
        try:
            wait_until(self._ready, timeout=timeout_s, interval=0.1, message="server not ready")
        except AssertionError as exc:
            self.stop()
            raise TimeoutError(f"{exc}; log: {self.tail()}") from None
        return self

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"server exited with {self.proc.returncode}; log: {self.tail()}")
        try:
            return httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def tail(self) -> str:
        return self.log.read_text()[-3000:] if self.log and self.log.exists() else "(no log)"

    def __enter__(self) -> ServerProcess:
        """Ready to serve (``with ServerProcess(...) as server:``); stopped when the block ends."""
        return self.wait_ready()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._out is not subprocess.DEVNULL:
            self._out.close()  # type: ignore[union-attr]
        self._data.cleanup()


def offline_server(catalog: Path, logs: Path, *args: str) -> ServerProcess:
    """A server on ``catalog`` with no hub access and one torch thread, logging to ``logs``/s.log; use it in
    a ``with`` block (it is ready inside and stopped after)."""
    return ServerProcess(catalog, "--offline", "--threads", "1", *args, log=logs / "s.log")
