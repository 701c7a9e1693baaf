"""Keys on a gateway in front of a worker: the same checks as a server's (one mechanism), the admin
key on reload, and the per-key limit counted at the gateway. The worker has keys too, and still
takes its work from the queue."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.helpers.cluster import Gateway, Nats, running, worker
from tests.helpers.wait import wait_until

TINY = "test/tiny-embedder"
ENDLESS = "test/endless"
ONE_ITEM = {"items": [{"text": "hello"}]}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_gateway_keys_admin_key_and_per_key_limit(cluster_catalog: Path, nats: Nats, tmp_path: Path) -> None:
    w = worker(cluster_catalog, nats.url, tmp_path / "w.log", "--preload", TINY, env={"SIE_API_KEYS": "worker-key"})
    gateway = Gateway(cluster_catalog, nats.url, "--api-key", "alpha", "--api-key", "beta", "--admin-key", "root",
                      "--max-queued-per-key", "1", log=tmp_path / "gw.log")  # fmt: skip
    with running(w, gateway):
        encode = f"{gateway.url}/v1/encode/{TINY}"
        assert httpx.post(encode, json=ONE_ITEM).status_code == 401
        assert httpx.post(encode, json=ONE_ITEM, headers=bearer("worker-key")).status_code == 403
        served = httpx.post(encode, json=ONE_ITEM, headers=bearer("alpha"), timeout=120)
        assert served.status_code == 200, served.text  # the worker's own keys do not block its queue
        assert httpx.get(f"{gateway.url}/healthz").status_code == 200
        assert httpx.get(f"{gateway.url}/metrics").status_code == 200
        # on the worker itself: its keys first, then "queue only"
        assert httpx.post(f"{w.url}/v1/encode/{TINY}", json=ONE_ITEM).status_code == 401
        direct = httpx.post(f"{w.url}/v1/encode/{TINY}", json=ONE_ITEM, headers=bearer("worker-key"))
        assert direct.status_code == 403 and "queue only" in direct.json()["detail"]["message"]

        reload = f"{gateway.url}/v1/models/{TINY}/reload"
        assert httpx.post(reload, headers=bearer("alpha")).status_code == 403
        assert httpx.post(reload, headers=bearer("root"), timeout=120).status_code == 200

        endless = {"prompt": "count", "max_new_tokens": 400, "stream": True}
        with httpx.Client(timeout=120) as client:
            path = f"{gateway.url}/v1/generate/{ENDLESS}"
            with client.stream("POST", path, json=endless, headers=bearer("alpha")) as held:
                assert held.status_code == 200  # alpha holds its one item until the stream ends
                limited = client.post(encode, json=ONE_ITEM, headers=bearer("alpha"))
                assert limited.status_code == 429 and limited.headers["retry-after"] == "1"
                assert limited.headers["x-sie-error-code"] == "RATE_LIMITED"
                assert client.post(encode, json=ONE_ITEM, headers=bearer("beta")).status_code == 200
            wait_until(
                lambda: client.post(encode, json=ONE_ITEM, headers=bearer("alpha")).status_code == 200,
                timeout=60,
                message="alpha's item was never released after its stream closed",
            )
