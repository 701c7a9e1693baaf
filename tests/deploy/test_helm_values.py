"""deploy/helm/sie's values: the CPU and GPU values files, worker sizing, auth tokens and the
model catalog as the rendered objects carry them."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import yaml

from sie_server.cluster.gateway import GatewaySettings
from tests.deploy.chart import Rendered, container, effective_values, fullname, render, values_file

CATALOG = Path(__file__).resolve().parents[2] / "configs" / "models"


def test_values_cpu_is_one_cpu_pool() -> None:
    values = effective_values("cpu")
    assert [p["name"] for p in values["pools"]] == ["cpu"]
    (pool,) = values["pools"]
    assert pool["device"] == "cpu" and not pool.get("gpus")
    assert values["gateway"]["defaultPool"] == "cpu"
    assert all(r["pool"] == "cpu" for r in values["gateway"]["routes"])


def _route(routes: list[tuple[str, str]], default: str, model_id: str) -> str:
    """The gateway's routing: the first fnmatch pattern that matches, else the default pool."""
    return next((pool for pattern, pool in routes if fnmatch.fnmatch(model_id, pattern)), default)


def test_values_gpu_routes_generation_models_to_gpu(chart_dir: Path) -> None:
    rendered = render(chart_dir, values_file("gpu"))
    args = container(rendered.get("Deployment", f"{fullname()}-gateway"))["args"]
    routes = [tuple(args[i + 1].split("=", 1)) for i, a in enumerate(args) if a == "--route"]
    default = args[args.index("--default-pool") + 1]
    assert routes and default == "cpu"
    generators, others = [], []
    for path in sorted(CATALOG.glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        (generators if "generate" in config["tasks"] else others).append(config["id"])
    assert generators and others
    for model_id in generators:
        assert _route(routes, default, model_id) == "gpu", model_id
    for model_id in others:
        assert _route(routes, default, model_id) == "cpu", model_id
    settings = GatewaySettings(nats_url="nats://x:4222", catalog=None, routes=routes, default_pool=default)
    for model_id in generators + others:
        assert settings.pool_for(model_id) == _route(routes, default, model_id)


def test_values_gpu_requests_gpus_for_the_gpu_pool(chart_dir: Path) -> None:
    rendered = render(chart_dir, values_file("gpu"))
    gpu = rendered.get("Deployment", f"{fullname()}-worker-gpu")
    c = container(gpu)
    assert c["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["args"][c["args"].index("--device") + 1] == "cuda"
    assert c["image"].endswith(":0.1.0-cuda")
    tolerations = gpu["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
    cpu = container(rendered.get("Deployment", f"{fullname()}-worker-cpu"))
    assert "nvidia.com/gpu" not in cpu["resources"].get("requests", {})
    assert "nvidia.com/gpu" not in cpu["resources"].get("limits", {})
    assert cpu["image"].endswith(":0.1.0-cpu")
    assert container(rendered.get("Deployment", f"{fullname()}-gateway"))["image"].endswith(":0.1.0-cpu")


def test_worker_memory_budget_fits_the_memory_limit(case: tuple[str, Rendered]) -> None:
    """On CPU the budget must be bytes below the container's limit (a fraction reads the node's RAM)."""
    name, _ = case
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}

    def size(text: str) -> int:
        number, unit = re.fullmatch(r"([0-9.]+)\s*([A-Za-z]*)", text).groups()  # type: ignore[union-attr]
        return int(float(number) * units[unit])

    for pool in effective_values(name)["pools"]:
        if pool.get("device", "cpu") == "cpu":
            limit = pool["resources"]["limits"]["memory"]
            assert size(str(pool["memoryBudget"])) < size(limit), pool["name"]


# --- auth and catalog ------------------------------------------------------------------------


def test_auth_tokens_reach_the_gateway_from_a_secret(chart_dir: Path) -> None:
    full = fullname()
    rendered = render(chart_dir, {"auth": {"tokens": ["t0ken-a", "t0ken-b"]}})
    secret = rendered.get("Secret", f"{full}-auth")
    assert secret["stringData"] == {"SIE_AUTH_TOKENS": "t0ken-a,t0ken-b"}
    gateway = rendered.get("Deployment", f"{full}-gateway")
    env = {e["name"]: e for e in container(gateway)["env"]}
    assert env["SIE_AUTH_TOKENS"]["valueFrom"]["secretKeyRef"] == {"name": f"{full}-auth", "key": "SIE_AUTH_TOKENS"}
    assert "checksum/auth" in gateway["spec"]["template"]["metadata"]["annotations"]
    for deployment in rendered.objects("Deployment"):  # workers never see the tokens
        if deployment is not gateway:
            assert "SIE_AUTH_TOKENS" not in {e["name"] for e in container(deployment).get("env", [])}

    existing = render(chart_dir, {"auth": {"existingSecret": "mine"}})
    assert f"{full}-auth" not in {s["metadata"]["name"] for s in existing.objects("Secret")}  # only the NATS login
    env = {e["name"]: e for e in container(existing.get("Deployment", f"{full}-gateway"))["env"]}
    assert env["SIE_AUTH_TOKENS"]["valueFrom"]["secretKeyRef"]["name"] == "mine"

    none = render(chart_dir, {})
    assert "SIE_AUTH_TOKENS" not in {
        e["name"] for e in container(none.get("Deployment", f"{full}-gateway")).get("env", [])
    }


def test_catalog_configmap_carries_the_model_configs(chart_dir: Path, tmp_path: Path) -> None:
    from sie_server.catalog.loader import Catalog

    originals = {path.name: yaml.safe_load(path.read_text()) for path in sorted(CATALOG.glob("*.yaml"))}
    rendered = render(chart_dir, {"catalog": {"models": originals}})
    full = fullname()
    data = rendered.get("ConfigMap", f"{full}-catalog")["data"]
    assert set(data) == set(originals)
    for file, text in data.items():
        assert yaml.safe_load(text) == originals[file], file
        (tmp_path / file).write_text(text)
    catalog = Catalog(tmp_path)  # the server reads the mounted folder as it is
    assert catalog.errors == {}
    assert {c["id"] for c in originals.values()} <= {m.id for m in catalog.list()}
    for deployment in rendered.objects("Deployment"):
        c = container(deployment)
        assert c["args"][c["args"].index("--models-dir") + 1] == "/models"
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        assert mounts["/models"] == "catalog"
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        assert volumes["catalog"]["configMap"]["name"] == f"{full}-catalog"
