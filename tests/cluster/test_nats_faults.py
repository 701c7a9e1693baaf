"""NATS faults on real processes: a worker is unready while it has no NATS and ready again when NATS
is back, each reconnect attempt is one log line (no traceback), and a NATS with a password admits
the gateway and workers that have it and no one else."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.wait import stays, wait_until

MODEL = "test/tiny-embedder"
BODY = {"items": [{"text": "hello"}]}


def _readiness(url: str) -> tuple[int, str]:
    try:
        answer = httpx.get(f"{url}/readyz", timeout=2)
    except httpx.HTTPError:
        return 0, ""
    return answer.status_code, str(answer.json().get("status"))


def _nats_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if ": NATS: " in line]


def test_a_worker_without_nats_is_unready_until_it_is_back(nats: Nats, cluster_catalog: Path, tmp_path: Path) -> None:
    worker_log, gateway_log = tmp_path / "worker.log", tmp_path / "gateway.log"
    w = worker(cluster_catalog, nats.url, worker_log)
    gateway = Gateway(cluster_catalog, nats.url, log=gateway_log)
    with running(w, gateway):
        assert _readiness(w.url) == (200, "ready")
        nats.stop()
        wait_until(lambda: _readiness(w.url) == (503, "disconnected"), timeout=15,
                   message="the worker's /readyz stayed 200 without NATS")  # fmt: skip
        # a few reconnect attempts (one each 2 s) while NATS is down: one line each, for both processes
        wait_until(lambda: len(_nats_lines(worker_log)) >= 3 and len(_nats_lines(gateway_log)) >= 3, timeout=20,
                   message="no reconnect attempts were logged")  # fmt: skip
        nats.restart()
        wait_until(lambda: _readiness(w.url) == (200, "ready"), timeout=30,
                   message="the worker did not become ready when NATS came back")  # fmt: skip
        answer = httpx.post(f"{gateway.url}/v1/encode/{MODEL}", json=BODY, timeout=60)
        assert answer.status_code == 200, answer.text
    for log in (worker_log, gateway_log):
        text = log.read_text()
        assert "Traceback" not in text, text[-3000:]
        assert text.count("lost the NATS connection") == 1 and "NATS connection back" in text  # not at exit


def test_nats_with_a_password_admits_only_who_has_it(cluster_catalog: Path, tmp_path: Path) -> None:
    password = "s3cret-only-the-chart-knows"
    nats = Nats(tmp_path / "jetstream", user="sie", password=password)
    logs = {name: tmp_path / f"{name}.log" for name in ("worker", "gateway", "stranger")}
    try:
        # the two ways to give the login: in the URL (the worker), in the environment (the gateway)
        w = worker(cluster_catalog, f"nats://sie:{password}@127.0.0.1:{nats.port}", logs["worker"])
        gateway = Gateway(cluster_catalog, nats.url, env=nats.credentials, log=logs["gateway"])
        stranger = worker(cluster_catalog, nats.url, logs["stranger"])  # no credentials
        with running(w, gateway):
            answer = httpx.post(f"{gateway.url}/v1/encode/{MODEL}", json=BODY, timeout=60)
            assert answer.status_code == 200, answer.text
            try:
                wait_until(lambda: _readiness(stranger.url) == (503, "disconnected"), timeout=120,
                           message="the worker without the password never answered /readyz")  # fmt: skip
                stays(lambda: _readiness(stranger.url) == (503, "disconnected"), for_s=3,
                      message="a worker without the password became ready")  # fmt: skip
                assert any("Authorization Violation" in line for line in _nats_lines(logs["stranger"]))
            finally:
                stranger.stop()
        for log in logs.values():
            text = log.read_text()
            assert password not in text  # URLs are logged without their login
            assert "Traceback" not in text, text[-3000:]
    finally:
        nats.stop()
