"""deploy/helm/sie: lint, render with Helm's engine, and check the objects against the Kubernetes
schemas, the KEDA and Prometheus Operator CRDs, and the sie-server CLI and stream conventions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import helm_python as helm  # helm-python-sdk (Helm's engine) and kubernetes-validate: dev dependencies
import jsonschema
import kubernetes_validate
import pytest
import yaml

from sie_server import cli
from sie_server.cluster import streams
from tests.deploy.chart import (
    NAMESPACE,
    RELEASE,
    STUB_NATS_VERSION,
    VALUES_FILES,
    Rendered,
    container,
    effective_values,
    fullname,
    render,
    values_file,
)
from tests.deploy.crd_schemas import CUSTOM_RESOURCES

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "configs" / "models"
# oldest (Chart.yaml's kubeVersion) and newest Kubernetes whose schemas kubernetes-validate carries
KUBE_VERSIONS = ("1.25", "1.37")
PRIORITIES = ("interactive", "batch")
STREAM_RE = re.compile(r"^SIE_[A-Z0-9_]+_[A-Z]+$")


def _stream(pool: str, priority: str) -> str:
    return f"SIE_{pool}_{priority}".upper().replace("-", "_")


# --- the chart as Helm sees it ------------------------------------------------------------


def test_priorities_are_the_engines() -> None:
    from sie_server.engine.policy import PRIORITIES as ENGINE_PRIORITIES

    assert tuple(ENGINE_PRIORITIES) == PRIORITIES
    helpers = (REPO / "deploy/helm/sie/templates/_helpers.tpl").read_text()
    block = re.search(r'define "sie.priorities" -}}\n(.*)\n', helpers)
    assert block is not None and tuple(block.group(1).split()) == PRIORITIES


def test_chart_declares_the_nats_dependency() -> None:
    chart = yaml.safe_load((REPO / "deploy/helm/sie/Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    (nats,) = chart["dependencies"]
    assert nats["name"] == "nats"
    assert nats["repository"] == "https://nats-io.github.io/k8s/helm/charts/"
    assert nats["condition"] == "nats.enabled"
    defaults = yaml.safe_load((REPO / "deploy/helm/sie/values.yaml").read_text())
    jetstream = defaults["nats"]["config"]["jetstream"]
    assert jetstream["enabled"] and jetstream["fileStore"]["enabled"] and jetstream["fileStore"]["pvc"]["enabled"]
    assert defaults["nats"]["service"]["ports"]["monitor"]["enabled"], "KEDA needs the monitoring port"


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_lint_strict(chart_dir: Path, name: str) -> None:
    report = helm.lint(chart_dir, values_file(name), strict=True, kube_version="v1.30.0")
    assert report["errors"] == []
    # severity 2 = warning, 3 = error (info, such as "icon is recommended", is fine)
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("name", sorted(VALUES_FILES))
def test_values_files_pass_the_values_schema(chart_dir: Path, name: str) -> None:
    chart = helm.Chart.load(chart_dir)
    chart.validate_schema(values_file(name))


@pytest.mark.parametrize(
    "override",
    [
        {"pools": [{"name": "GPU_pool"}]},  # not a DNS label, not a clean stream name
        {"pools": [{"device": "cpu"}]},  # no name
        {"pools": [{"name": "cpu", "memorybudget": "1GiB"}]},  # typo of memoryBudget
        {"pools": [{"name": "cpu", "device": "tpu"}]},
        {"pools": []},
        {"gateway": {"routes": [{"pattern": "Qwen/*"}]}},  # no pool
        {"keda": {"lagThreshold": {"urgent": 3}}},  # not a priority class
        {"auth": {"tokens": ["a,b"]}},  # a comma would split one token in two
        {"catalog": {"models": {"minilm": {"id": "x", "adapter": "embedding"}}}},  # not a .yaml name
    ],
)
def test_values_schema_refuses(chart_dir: Path, override: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError, match="schema"):
        render(chart_dir, override)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"gateway": {"routes": [{"pattern": "Qwen/*", "pool": "gpu"}]}}, "not one of the pools"),
        ({"gateway": {"defaultPool": "gpu"}}, "not one of the pools"),
        ({"pools": [{"name": "cpu"}, {"name": "cpu"}]}, "used twice"),
        ({"pools": [{"name": "gpu", "device": "cuda"}]}, "needs gpus"),
        ({"nats": {"enabled": False}}, "externalNats.url"),
        ({"pools": [{"name": "cpu"}, {"name": "spare"}]}, "gets no work"),
    ],
)
def test_inconsistent_values_fail_to_render(chart_dir: Path, override: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(chart_dir, override)


# --- every object is valid --------------------------------------------------------------


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_objects_validate_against_schemas(case: tuple[str, Rendered], kube: str) -> None:
    _, rendered = case
    assert rendered.docs
    for path, doc in rendered:
        schema = CUSTOM_RESOURCES.get((doc.get("apiVersion"), doc.get("kind")))
        try:
            if schema is not None:
                jsonschema.Draft7Validator(schema).validate(doc)
            else:
                # strict: unknown fields fail too; a kind without a schema raises SchemaNotFoundError
                kubernetes_validate.validate(doc, kube, strict=True)
        except (jsonschema.ValidationError, kubernetes_validate.ValidationError) as exc:
            where = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{path}: {doc['kind']}/{doc['metadata']['name']} at {where}: {exc.message}")


def test_expected_objects(case: tuple[str, Rendered]) -> None:
    name, rendered = case
    values = effective_values(name)
    full = fullname()
    kinds = sorted((doc["kind"], doc["metadata"]["name"]) for doc in rendered.objects())
    expected = [("Deployment", f"{full}-gateway"), ("Service", f"{full}-gateway"), ("ServiceAccount", full)]
    for pool in values["pools"]:
        expected += [("Deployment", f"{full}-worker-{pool['name']}"), ("Service", f"{full}-worker-{pool['name']}")]
        if values["keda"]["enabled"]:
            expected.append(("ScaledObject", f"{full}-worker-{pool['name']}"))
    if values["serviceMonitor"]["enabled"]:
        expected += [("ServiceMonitor", f"{full}-gateway"), ("ServiceMonitor", f"{full}-worker")]
    if values["auth"]["tokens"] and not values["auth"]["existingSecret"]:
        expected.append(("Secret", f"{full}-auth"))
    if values["natsAuth"]["user"] and not values["global"]["natsAuth"]["existingSecret"]:
        expected.append(("Secret", f"{RELEASE}-nats-auth"))
    if values["catalog"]["models"]:
        expected.append(("ConfigMap", f"{full}-catalog"))
    assert kinds == sorted(expected)
    for doc in rendered.objects():
        assert doc["metadata"]["namespace"] == NAMESPACE
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
    assert "port-forward" in rendered.notes


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_selectors_and_references_meet(case: tuple[str, Rendered]) -> None:
    _, rendered = case
    deployments = rendered.objects("Deployment")
    pod_labels = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in deployments}
    for deployment in deployments:
        assert _matches(deployment["spec"]["selector"]["matchLabels"], pod_labels[deployment["metadata"]["name"]])
        # no two Deployments' selectors select the same pods
        others = [
            n for n, labels in pod_labels.items() if _matches(deployment["spec"]["selector"]["matchLabels"], labels)
        ]
        assert others == [deployment["metadata"]["name"]]
    services = rendered.objects("Service")
    for service in services:
        selected = [n for n, labels in pod_labels.items() if _matches(service["spec"]["selector"], labels)]
        assert selected == [service["metadata"]["name"]], f"Service {service['metadata']['name']} selects {selected}"
        for port in service["spec"]["ports"]:
            target = rendered.get("Deployment", service["metadata"]["name"])
            assert port["targetPort"] in {p["name"] for p in container(target)["ports"]}
    for monitor in rendered.objects("ServiceMonitor"):
        selected = [
            s for s in services if _matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert selected, f"ServiceMonitor {monitor['metadata']['name']} selects no Service"
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["path"] == "/metrics"
            for service in selected:
                assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    for scaled in rendered.objects("ScaledObject"):
        ref = scaled["spec"]["scaleTargetRef"]
        assert (ref["apiVersion"], ref["kind"]) == ("apps/v1", "Deployment")
        rendered.get("Deployment", ref["name"])
    for deployment in deployments:
        spec = deployment["spec"]["template"]["spec"]
        mounts = {m["name"] for m in container(deployment).get("volumeMounts", [])}
        assert mounts <= {v["name"] for v in spec.get("volumes", [])}
        assert spec["securityContext"]["runAsNonRoot"] is True
        probes = {k: container(deployment)[k]["httpGet"]["path"] for k in ("livenessProbe", "readinessProbe")}
        assert probes == {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}


# --- JetStream streams and KEDA ----------------------------------------------------------


def test_scaled_objects_name_each_pools_streams(case: tuple[str, Rendered]) -> None:
    name, rendered = case
    values = effective_values(name)
    full = fullname()
    pools = [p["name"] for p in values["pools"]]
    scaled = {s["metadata"]["name"]: s for s in rendered.objects("ScaledObject")}
    assert set(scaled) == {f"{full}-worker-{p}" for p in pools}
    nats_monitor = f"{RELEASE}-nats.{NAMESPACE}.svc.cluster.local:8222"
    named_streams = set()
    for pool in values["pools"]:
        spec = scaled[f"{full}-worker-{pool['name']}"]["spec"]
        keda = {**values["keda"], **pool.get("keda", {})}
        assert spec["minReplicaCount"] == 0
        assert spec["maxReplicaCount"] == keda["maxReplicaCount"]
        triggers = spec["triggers"]
        assert [t["type"] for t in triggers] == ["nats-jetstream"] * len(PRIORITIES)
        for trigger, priority in zip(triggers, PRIORITIES, strict=True):
            meta = trigger["metadata"]
            assert meta["stream"] == _stream(pool["name"], priority)
            assert STREAM_RE.match(meta["stream"])
            assert meta["consumer"] == "workers"
            assert meta["account"] == "$G"
            assert meta["natsServerMonitoringEndpoint"] == nats_monitor
            assert int(meta["lagThreshold"]) > 0
            assert int(meta["activationLagThreshold"]) >= 0
            named_streams.add(meta["stream"])
    assert named_streams == {_stream(p, q) for p in pools for q in PRIORITIES}


def test_stream_names_match_the_cluster_code(case: tuple[str, Rendered]) -> None:
    _, rendered = case
    for scaled in rendered.objects("ScaledObject"):
        pool = scaled["metadata"]["labels"]["sie.dev/pool"]
        for trigger, priority in zip(scaled["spec"]["triggers"], PRIORITIES, strict=True):
            assert trigger["metadata"]["stream"] == streams.stream_name(pool, priority)
            assert trigger["metadata"]["consumer"] == streams.CONSUMER


def test_keda_owns_replicas(case: tuple[str, Rendered], chart_dir: Path) -> None:
    name, rendered = case
    for deployment in rendered.objects("Deployment"):
        if deployment["metadata"]["labels"]["app.kubernetes.io/component"] == "worker":
            assert "replicas" not in deployment["spec"], "KEDA owns a worker Deployment's replicas"
    # without KEDA: fixed replicas, no ScaledObjects; one pool can opt out alone
    off = render(chart_dir, {**values_file(name), "keda": {"enabled": False}})
    assert off.objects("ScaledObject") == []
    for pool in effective_values(name)["pools"]:
        worker = off.get("Deployment", f"{fullname()}-worker-{pool['name']}")
        assert worker["spec"]["replicas"] == pool.get("replicas", 1)
    mixed = render(
        chart_dir,
        {
            "pools": [{"name": "a", "replicas": 0, "keda": {"enabled": False}}, {"name": "b"}],
            "gateway": {"defaultPool": "b", "routes": [{"pattern": "org/*", "pool": "a"}]},
        },
    )
    assert mixed.get("Deployment", f"{fullname()}-worker-a")["spec"]["replicas"] == 0
    assert [s["metadata"]["name"] for s in mixed.objects("ScaledObject")] == [f"{fullname()}-worker-b"]


def test_external_nats(chart_dir: Path) -> None:
    rendered = render(
        chart_dir,
        {
            "nats": {"enabled": False},
            "externalNats": {"url": "nats://bus.infra:4222", "monitoringEndpoint": "bus.infra:8222"},
        },
    )
    for deployment in rendered.objects("Deployment"):
        args = container(deployment)["args"]
        flag = "--nats" if args[0] == "gateway" else "--queue"
        assert args[args.index(flag) + 1] == "nats://bus.infra:4222"
    for scaled in rendered.objects("ScaledObject"):
        for trigger in scaled["spec"]["triggers"]:
            assert trigger["metadata"]["natsServerMonitoringEndpoint"] == "bus.infra:8222"


@pytest.mark.parametrize(
    ("release", "nats_service"), [("sie", "sie-nats"), ("prod", "prod-nats"), ("nats-a", "nats-a")]
)
def test_nats_address_follows_the_nats_charts_naming(chart_dir: Path, release: str, nats_service: str) -> None:
    rendered = render(chart_dir, {}, release=release)
    gateway = rendered.get("Deployment", f"{fullname(release)}-gateway")
    args = container(gateway)["args"]
    assert args[args.index("--nats") + 1] == f"nats://{nats_service}.{NAMESPACE}.svc.cluster.local:4222"


# --- containers: the CLI they run ----------------------------------------------------------


def _parser() -> Any:
    parser = cli.build_parser()
    choices = next(a.choices for a in parser._actions if getattr(a, "choices", None))  # the subcommands
    assert "gateway" in choices, f"sie-server has no gateway subcommand (it has: {', '.join(choices)})"
    return parser


def _parse(parser: Any, args: list[str]) -> Any:
    try:
        return parser.parse_args(args)
    except SystemExit as exc:  # argparse reports to stderr and exits
        pytest.fail(f"sie-server refuses the arguments {args}: exit {exc.code}")


def test_container_args_parse_with_the_cli(case: tuple[str, Rendered]) -> None:
    name, rendered = case
    parser = _parser()
    values = effective_values(name)
    pools = {p["name"]: p for p in values["pools"]}
    for deployment in rendered.objects("Deployment"):
        c = container(deployment)
        assert "command" not in c, "the image's ENTRYPOINT is sie-server"
        args = _parse(parser, c["args"])
        component = deployment["metadata"]["labels"]["app.kubernetes.io/component"]
        if component == "gateway":
            assert args.command == "gateway"
            assert (args.host, args.port) == ("0.0.0.0", 8080)
            assert args.nats.startswith("nats://")
            assert args.default_pool in pools
            assert [r.split("=", 1)[1] for r in args.route] == [r["pool"] for r in values["gateway"]["routes"]]
            assert args.hold_s == values["gateway"]["holdSeconds"]
            assert args.ack_wait_s == values["queue"]["ackWaitSeconds"]
            service = next(
                s["metadata"]["name"]
                for s in rendered.objects("Service")
                if s["metadata"]["labels"]["app.kubernetes.io/component"] == "gateway"
            )  # /mcp answers a client that calls the gateway by its Service's name (mcp/allowed_hosts.py)
            hosts = str(args.mcp_allowed_hosts).split(",")
            assert {service, f"{service}.{NAMESPACE}", f"{service}.{NAMESPACE}.svc"} <= set(hosts), hosts
            assert set(values["gateway"]["mcpAllowedHosts"]) <= set(hosts)
        else:
            pool = pools[deployment["metadata"]["labels"]["sie.dev/pool"]]
            assert args.command == "serve"
            assert (args.host, args.port) == ("0.0.0.0", 8080)
            assert args.queue.startswith("nats://")
            assert args.pool == pool["name"]
            assert args.device == pool.get("device", "cpu")
            assert str(args.models_dir) == "/opt/sie/models"
            assert args.ack_wait_s == values["queue"]["ackWaitSeconds"]


def test_stub_nats_version_is_in_the_dependency_range() -> None:
    from packaging.specifiers import SpecifierSet

    chart = yaml.safe_load((REPO / "deploy/helm/sie/Chart.yaml").read_text())
    (nats,) = chart["dependencies"]
    assert STUB_NATS_VERSION in SpecifierSet(",".join(nats["version"].split()))
