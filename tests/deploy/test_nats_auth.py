"""deploy/helm/sie runs NATS with a login: the bundled NATS reads it from a Secret, and the gateway
and every worker get it from the same Secret under the names sie_server reads; a Secret of your own
(global.natsAuth.existingSecret) is named once and reaches all three."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from sie_server.cluster import nats_connection
from tests.deploy.chart import CHART, RELEASE, Rendered, chart_copy, container, render

ENV_NAMES = (nats_connection.USER_ENV, nats_connection.PASSWORD_ENV)


def _secret_refs(deployment: dict[str, Any]) -> dict[str, dict[str, str]]:
    env = container(deployment).get("env", [])
    return {e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if e["name"] in ENV_NAMES}


def _sie_deployments(rendered: Rendered) -> list[dict[str, Any]]:
    deployments = rendered.objects("Deployment")
    assert {d["metadata"]["labels"]["app.kubernetes.io/component"] for d in deployments} == {"gateway", "worker"}
    return deployments


@pytest.fixture(scope="module")
def probed_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chart_copy(tmp_path_factory.mktemp("probed"), nats_env_probe=True)


def _nats_reads_from(rendered: Rendered) -> dict[str, str]:
    """The Secret names the bundled NATS container reads SIE_NATS_USER and SIE_NATS_PASSWORD from."""
    data: dict[str, str] = rendered.get("ConfigMap", "nats-env-probe")["data"]
    return data


def test_the_bundled_nats_reads_its_login_from_the_secret() -> None:
    nats = yaml.safe_load((CHART / "values.yaml").read_text())["nats"]
    assert nats["config"]["merge"]["authorization"] == {
        "user": f"<< ${ENV_NAMES[0]} >>",
        "password": f"<< ${ENV_NAMES[1]} >>",
    }
    env = nats["container"]["env"]
    for name, key in zip(ENV_NAMES, ("user", "password"), strict=True):
        assert env[name]["valueFrom"]["secretKeyRef"]["key"] == key


def test_the_bundled_nats_gateway_and_workers_read_one_secret(probed_chart: Path) -> None:
    generated = render(probed_chart, {})
    assert _nats_reads_from(generated) == dict.fromkeys(ENV_NAMES, f"{RELEASE}-nats-auth")
    generated.get("Secret", f"{RELEASE}-nats-auth")
    # a Secret of your own, named once: NATS, the gateway and the workers all read it, and none is made
    own = render(probed_chart, {"global": {"natsAuth": {"existingSecret": "ops-nats-login"}}})
    assert _nats_reads_from(own) == dict.fromkeys(ENV_NAMES, "ops-nats-login")
    assert [s["metadata"]["name"] for s in own.objects("Secret")] == []
    for deployment in _sie_deployments(own):
        assert {ref["name"] for ref in _secret_refs(deployment).values()} == {"ops-nats-login"}


def test_gateway_and_workers_log_in_with_the_generated_password(chart_dir: Path) -> None:
    rendered = render(chart_dir, {"pools": [{"name": "cpu"}, {"name": "gpu", "device": "cuda", "gpus": 1}],
                                  "gateway": {"routes": [{"pattern": "Qwen/*", "pool": "gpu"}]}})  # fmt: skip
    secret = rendered.get("Secret", f"{RELEASE}-nats-auth")
    login = secret["stringData"]
    assert login["user"] == "sie"
    assert re.fullmatch(r"[A-Za-z][A-Za-z0-9]{31}", login["password"]), "a random password NATS reads as a string"
    deployments = _sie_deployments(rendered)
    assert len(deployments) == 3
    for deployment in deployments:
        refs = _secret_refs(deployment)
        assert refs == {
            ENV_NAMES[0]: {"name": f"{RELEASE}-nats-auth", "key": "user"},
            ENV_NAMES[1]: {"name": f"{RELEASE}-nats-auth", "key": "password"},
        }, deployment["metadata"]["name"]
        assert login["password"] not in yaml.safe_dump(deployment)  # by reference only, never in args or values
        url = next(a for a in container(deployment)["args"] if a.startswith("nats://"))
        assert "@" not in url


def test_a_given_password_and_an_existing_secret(chart_dir: Path) -> None:
    given = render(chart_dir, {"natsAuth": {"user": "bus", "password": "Pa55word"}})
    assert given.get("Secret", f"{RELEASE}-nats-auth")["stringData"] == {"user": "bus", "password": "Pa55word"}

    external = {
        "nats": {"enabled": False},
        "externalNats": {"url": "nats://bus:4222", "monitoringEndpoint": "bus:8222"},
    }
    existing = render(chart_dir, {**external, "global": {"natsAuth": {"existingSecret": "ops-nats-login"}}})
    assert [s["metadata"]["name"] for s in existing.objects("Secret")] == []
    for deployment in _sie_deployments(existing):
        assert {ref["name"] for ref in _secret_refs(deployment).values()} == {"ops-nats-login"}


def test_the_old_place_of_an_existing_secret_is_refused_with_the_new_one(chart_dir: Path) -> None:
    with pytest.raises(Exception, match=r"natsAuth.existingSecret is now global.natsAuth.existingSecret"):
        render(chart_dir, {"natsAuth": {"existingSecret": "ops-nats-login"}})


def test_the_bundled_nats_never_runs_without_a_login(chart_dir: Path) -> None:
    with pytest.raises(Exception, match="the bundled NATS runs with a login"):
        render(chart_dir, {"natsAuth": {"user": ""}})


def test_an_external_nats_without_a_login(chart_dir: Path) -> None:
    external = {
        "nats": {"enabled": False},
        "externalNats": {"url": "nats://bus:4222", "monitoringEndpoint": "bus:8222"},
    }
    rendered = render(chart_dir, {**external, "natsAuth": {"user": ""}})
    assert [s["metadata"]["name"] for s in rendered.objects("Secret")] == []
    for deployment in _sie_deployments(rendered):
        assert _secret_refs(deployment) == {}
