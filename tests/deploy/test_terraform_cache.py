"""deploy/terraform's model cache and alerts, checked offline like test_terraform.py: the values each stack gives
the chart (example -> stack -> shared module) render into workers whose /cache is a claim of the StorageClass the
stack itself creates (EFS on AWS, Filestore on GCP) or, with model_cache = "ephemeral", of its block storage
class; and the chart's PrometheusRule is on with the installed Prometheus stack, with the stack's p99 objective."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import Rendered, chart_copy, container, render
from tests.deploy.hcl import TERRAFORM, Scope, evaluate, load_module, parse, unquote
from tests.deploy.test_terraform import PLATFORM, _platform_scope, _root_scope, _values

STACKS = ("aws", "gcp")
RWX_CLASS = {"aws": ("efs", "efs.csi.aws.com"), "gcp": ("filestore", "filestore.csi.storage.gke.io")}
BLOCK_CLASS = {"aws": "gp3", "gcp": "standard-rwo"}  # the stacks' ReadWriteOnce classes


@pytest.fixture(scope="module")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chart_copy(tmp_path_factory.mktemp("tfcache"))


def _resource(stack: str, kind: str, name: str) -> dict[str, Any]:
    for tf in sorted((TERRAFORM / stack).glob("*.tf")):
        for entry in parse(tf).get("resource", []):
            body = entry.get(f'"{kind}"', {}).get(f'"{name}"')
            if body is not None:
                assert isinstance(body, dict)
                return body
    raise AssertionError(f"{stack}: no resource {kind}.{name}")


def _render(chart_dir: Path, stack: str, overrides: dict[str, Any] | None = None) -> tuple[Scope, Rendered]:
    scope = _platform_scope(stack, overrides)
    values = _values(scope)
    return scope, render(chart_dir, values, scope.variables["release_name"], scope.variables["namespace"])


def _workers(rendered: Rendered) -> list[dict[str, Any]]:
    workers = [
        d for d in rendered.objects("Deployment") if d["metadata"]["labels"]["app.kubernetes.io/component"] == "worker"
    ]
    assert len(workers) == 2
    return workers


def _cache_volume(worker: dict[str, Any]) -> dict[str, Any]:
    c = container(worker)
    assert {e["name"]: e.get("value") for e in c["env"]}["HF_HOME"] == "/cache/huggingface"
    name = next(m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/cache")
    volume: dict[str, Any] = next(v for v in worker["spec"]["template"]["spec"]["volumes"] if v["name"] == name)
    return volume


@pytest.mark.parametrize("stack", STACKS)
def test_shared_workers_mount_a_claim_of_the_rwx_class_the_stack_creates(chart_dir: Path, stack: str) -> None:
    root = load_module(TERRAFORM / stack)
    root_scope = _root_scope(stack)
    assert root_scope.variables["model_cache"] == "shared"  # the stacks' default, and their examples'
    label, provisioner = RWX_CLASS[stack]
    storage_class = _resource(stack, "kubernetes_storage_class_v1", label)
    assert evaluate(storage_class["count"], Scope(root_scope.variables, root.locals)) == 1
    assert unquote(storage_class["storage_provisioner"]) == provisioner
    class_name = evaluate(storage_class["metadata"][0]["name"], root_scope)

    _, rendered = _render(chart_dir, stack)
    claims = {c["metadata"]["name"]: c for c in rendered.objects("PersistentVolumeClaim")}
    for worker in _workers(rendered):
        claim_name = _cache_volume(worker)["persistentVolumeClaim"]["claimName"]
        spec = claims[claim_name]["spec"]
        assert spec["storageClassName"] == class_name, f"{stack}: {claim_name} is not on the class the stack makes"
        assert spec["accessModes"] == ["ReadWriteMany"]
        assert spec["resources"]["requests"]["storage"] == root_scope.variables["model_cache_size"]
    assert len(claims) == 2  # one per pool, not per pod


@pytest.mark.parametrize("stack", STACKS)
def test_ephemeral_workers_get_a_volume_per_pod_of_the_stacks_block_class(chart_dir: Path, stack: str) -> None:
    root_scope = _root_scope(stack, {"model_cache": "ephemeral"})
    label, _ = RWX_CLASS[stack]
    count = _resource(stack, "kubernetes_storage_class_v1", label)["count"]
    assert evaluate(count, root_scope) == 0, f"{stack}: the RWX class is made only for a shared cache"
    _, rendered = _render(chart_dir, stack, {"model_cache": "ephemeral"})
    assert rendered.objects("PersistentVolumeClaim") == []
    for worker in _workers(rendered):
        spec = _cache_volume(worker)["ephemeral"]["volumeClaimTemplate"]["spec"]
        assert spec["storageClassName"] == BLOCK_CLASS[stack]
        assert spec["accessModes"] == ["ReadWriteOnce"]
    if stack == "aws":  # gp3 is the class eks.tf creates
        assert (
            evaluate(_resource("aws", "kubernetes_storage_class_v1", "gp3")["metadata"][0]["name"], root_scope) == "gp3"
        )


def test_a_pool_that_sets_its_own_cache_keeps_it(chart_dir: Path) -> None:
    pools = evaluate(load_module(TERRAFORM / "aws").variables["pools"]["default"], Scope({}, {}))
    pools[0]["modelCache"] = {"type": "emptyDir"}
    _, rendered = _render(chart_dir, "aws", {"pools": pools})
    cpu, gpu = sorted(_workers(rendered), key=lambda d: d["metadata"]["name"])
    assert "emptyDir" in _cache_volume(cpu)
    assert "persistentVolumeClaim" in _cache_volume(gpu)


def test_the_aws_efs_is_reachable_from_the_nodes_in_every_private_subnet() -> None:
    ingress = _resource("aws", "aws_security_group", "efs")["ingress"]
    assert [(r["from_port"], r["to_port"], unquote(r["protocol"])) for r in ingress] == [(2049, 2049, "tcp")]
    assert ingress[0]["security_groups"] == ["${module.eks.node_security_group_id}"]
    target = _resource("aws", "aws_efs_mount_target", "model_cache")
    assert target["count"] == "${local.model_cache_shared ? local.private_subnet_count : 0}"
    assert target["subnet_id"] == "${local.private_subnet_ids[count.index]}"
    assert target["security_groups"] == ["${aws_security_group.efs[0].id}"]
    assert _resource("aws", "aws_efs_file_system", "model_cache")["encrypted"] is True
    parameters = _resource("aws", "kubernetes_storage_class_v1", "efs")["parameters"]
    assert parameters["fileSystemId"] == "${aws_efs_file_system.model_cache[0].id}"
    assert (parameters["uid"], parameters["gid"]) == ('"10001"', '"10001"')  # the chart's runAsUser/runAsGroup
    addons = load_module(TERRAFORM / "aws").modules["eks"]["cluster_addons"]
    assert addons["aws-efs-csi-driver"]["service_account_role_arn"] == "${aws_iam_role.efs_csi.arn}"


def test_gke_runs_the_filestore_driver_for_a_shared_cache() -> None:
    cluster = _resource("gcp", "google_container_cluster", "this")
    enabled = cluster["addons_config"][0]["gcp_filestore_csi_driver_config"][0]["enabled"]
    assert evaluate(enabled, _root_scope("gcp")) is True
    assert evaluate(enabled, _root_scope("gcp", {"model_cache": "ephemeral"})) is False


# --- alerts ---------------------------------------------------------------------------------------


def _p99_rule(rendered: Rendered) -> dict[str, Any]:
    (rule_object,) = rendered.objects("PrometheusRule")
    rules = [r for group in rule_object["spec"]["groups"] for r in group["rules"]]
    rule: dict[str, Any] = next(r for r in rules if r["alert"] == "SIEInteractiveLatencyHigh")
    return rule


@pytest.mark.parametrize("stack", STACKS)
def test_alerts_are_on_with_the_installed_prometheus_stack_and_the_stacks_objective(
    chart_dir: Path, stack: str
) -> None:
    scope, rendered = _render(chart_dir, stack)
    assert scope.variables["install_prometheus_stack"] is True
    assert _p99_rule(rendered)["expr"].endswith("> 2")
    _, tighter = _render(chart_dir, stack, {"alerts_interactive_p99_seconds": 0.75})
    assert _p99_rule(tighter)["expr"].endswith("> 0.75")
    _, without = _render(chart_dir, stack, {"install_prometheus_stack": False, "existing_grafana_url": "http://g"})
    assert without.objects("PrometheusRule") == []


def test_the_module_can_turn_alerts_on_for_an_existing_prometheus_operator(chart_dir: Path) -> None:
    scope = _platform_scope("gcp")
    scope.variables.update(install_prometheus_stack=False, alerts=True)
    rendered = render(chart_dir, _values(scope), scope.variables["release_name"], scope.variables["namespace"])
    assert _p99_rule(rendered)
    assert "alerts" in load_module(PLATFORM).variables
