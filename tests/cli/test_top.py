"""``sie-server top --once`` against a real server: a loading, a loaded and a failed model, as they are."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import httpx

from tests.cli.conftest import EMBEDDER, GATED, MISSING, CliServer
from tests.helpers.server import free_port, pythonpath
from tests.helpers.wait import wait_until


def top(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sie_server.cli", "top", *args]
    env = {**os.environ, "PYTHONPATH": pythonpath(), "COLUMNS": "200"}
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def state(url: str, model: str) -> str:
    return str(httpx.get(f"{url}/v1/models/{model}", timeout=10).json()["state"])


def row(out: str, model: str) -> str:
    return next(line for line in out.splitlines() if model in line and "│" in line)


def test_top_once_shows_a_loading_a_loaded_and_a_failed_model(cli_server: CliServer) -> None:
    url = cli_server.url
    assert httpx.post(f"{url}/v1/encode/{EMBEDDER}", json={"items": [{"text": "hi"}]}, timeout=60).status_code == 200
    assert httpx.post(f"{url}/v1/encode/{MISSING}", json={"items": [{"text": "hi"}]}, timeout=60).status_code == 502
    waiting = threading.Thread(
        target=lambda: httpx.post(f"{url}/v1/encode/{GATED}", json={"items": [{"text": "hi"}]}, timeout=120)
    )
    waiting.start()
    try:
        wait_until(lambda: state(url, GATED) == "loading", timeout=30, message="the gated model never began loading")
        progress = httpx.get(f"{url}/v1/models/{GATED}", timeout=10).json()["load_progress"]
        assert progress["stage"] == "reading weights" and progress["elapsed_s"] >= 0

        done = top("--url", url, "--once")

        assert done.returncode == 0, done.stderr
        assert "loaded" in row(done.stdout, EMBEDDER)
        assert re.search(r"loading \d+\.\ds", row(done.stdout, GATED)), done.stdout
        assert "failed" in row(done.stdout, MISSING)
        assert re.search(rf"{re.escape(MISSING)} MODEL_LOAD_FAILED", done.stdout), done.stdout  # the last errors
        assert "memory:" in done.stdout
    finally:
        (cli_server.gate / "OPEN").touch()
        waiting.join(timeout=120)
    wait_until(lambda: state(url, GATED) == "loaded", timeout=60, message="the gated model never finished loading")


def test_top_without_a_server_is_one_line() -> None:
    done = top("--url", f"http://127.0.0.1:{free_port()}", "--once")

    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "cannot reach" in done.stderr
