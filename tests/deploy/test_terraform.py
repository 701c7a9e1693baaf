"""deploy/terraform, checked offline: every file parses, every variable is described and used, every
reference is defined, local module calls fit their modules, nothing secret has a default, the Helm values the
stacks give the chart pass its schema and render into objects that fit the clusters the stacks build, checkov
passes with every skip written down, and `terraform fmt` has nothing to change.

`terraform validate` is not run: it needs the providers, and registry.terraform.io is not reachable here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import hcl2
import jsonschema
import pytest
import yaml

from tests.deploy.chart import CHART, Rendered, chart_copy, container, merged, render
from tests.deploy.hcl import (
    META_ARGUMENTS,
    TERRAFORM,
    Module,
    Scope,
    call_arguments,
    evaluate,
    is_meta,
    load_module,
    local_source,
    module_dirs,
    module_output_references,
    parse,
    references,
    unquote,
    unresolved_paths,
    variable_scope,
)

REPO = TERRAFORM.parents[1]
PLATFORM = TERRAFORM / "modules" / "sie-platform"
STACKS = ("aws", "gcp")
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"
SECRET_NAME = re.compile(r"token|password|secret|private_key", re.IGNORECASE)
# what the examples' operator passes through TF_VAR_* (never in a file)
EXAMPLE_SECRETS = {"auth_tokens": ["example-token-0123456789abcdef"], "grafana_admin_password": "a-long-password"}

MODULES = [load_module(path) for path in module_dirs()]


def _ids(modules: list[Module]) -> list[str]:
    return [m.name for m in modules]


@pytest.mark.parametrize("path", sorted(TERRAFORM.rglob("*.tf")), ids=lambda p: str(p.relative_to(TERRAFORM)))
def test_every_tf_file_parses(path: Path) -> None:
    assert parse(path), f"{path}: no blocks"


def test_the_layout_is_shared_module_plus_one_stack_per_cloud() -> None:
    assert {m.name for m in MODULES} == {"modules/sie-platform", "aws", "aws/examples", "gcp", "gcp/examples"}
    for stack in STACKS:
        assert (TERRAFORM / stack / "examples" / "terraform.tfvars.example").is_file()
        assert unquote({m.name: m for m in MODULES}[stack].modules["platform"]["source"]) == "../modules/sie-platform"


@pytest.mark.parametrize("module", MODULES, ids=_ids(MODULES))
def test_every_variable_has_a_description_and_a_type(module: Module) -> None:
    for name, body in module.variables.items():
        assert unquote(body.get("description", "")).strip(), f"{module.name}: variable {name} has no description"
        assert "type" in body, f"{module.name}: variable {name} has no type"


@pytest.mark.parametrize("module", MODULES, ids=_ids(MODULES))
def test_every_variable_is_used(module: Module) -> None:
    used = {name for kind, name in references(module.blocks) if kind == "var"}
    assert not set(module.variables) - used, f"{module.name}: declared but never used"


@pytest.mark.parametrize("module", MODULES, ids=_ids(MODULES))
def test_every_reference_is_defined(module: Module) -> None:
    defined = {"var": set(module.variables), "local": set(module.locals), "module": set(module.modules)}
    undefined = sorted(f"{kind}.{name}" for kind, name in references(module.blocks) if name not in defined[kind])
    assert not undefined, f"{module.name}: undefined references {undefined}"


def test_the_reference_checks_catch_a_typo_and_an_unused_variable(tmp_path: Path) -> None:
    shutil.copytree(PLATFORM, tmp_path / "m")
    sie_tf = tmp_path / "m" / "sie.tf"
    sie_tf.write_text(sie_tf.read_text().replace("var.nats_storage_size", "var.nats_storage_sise"))
    module = load_module(tmp_path / "m")
    used = {name for kind, name in references(module.blocks) if kind == "var"}
    assert "nats_storage_sise" in used - set(module.variables)
    assert "nats_storage_size" in set(module.variables) - used


@pytest.mark.parametrize("module", MODULES, ids=_ids(MODULES))
def test_local_module_calls_fit_the_called_module(module: Module) -> None:
    """Arguments are the callee's variables, every required variable is given, every output read exists."""
    read = module_output_references(module.blocks)
    for label, call in module.modules.items():
        source = local_source(module, call)
        if source is None:
            continue
        callee = load_module(source)
        arguments = {unquote(k) for k in call if k not in META_ARGUMENTS and not is_meta(k)}
        assert not arguments - set(callee.variables), f"{module.name}: module {label} has no such variables"
        required = {name for name, body in callee.variables.items() if "default" not in body}
        assert not required - arguments, f"{module.name}: module {label} misses required variables"
        outputs = {output for called, output in read if called == label}
        assert not outputs - set(callee.outputs), f"{module.name}: module {label} has no such outputs"


@pytest.mark.parametrize("module", MODULES, ids=_ids(MODULES))
def test_nothing_secret_has_a_default(module: Module) -> None:
    for name, body in module.variables.items():
        if SECRET_NAME.search(name):
            assert body.get("sensitive") is True, f"{module.name}: {name} looks secret but is not sensitive"
        if body.get("sensitive") is True:
            assert body.get("default") is None, f"{module.name}: sensitive {name} has a default"


@pytest.mark.parametrize("name", ["aws", "gcp", "aws/examples", "gcp/examples", "modules/sie-platform"])
def test_outputs_give_the_gateway_and_grafana_urls(name: str) -> None:
    module = load_module(TERRAFORM / name)
    for output in ("gateway_url", "grafana_url"):
        assert output in module.outputs, f"{name}: no {output} output"
        assert unquote(module.outputs[output].get("description", "")).strip()


def test_files_read_by_the_terraform_exist() -> None:
    """file("${path.module}/...") paths (the Grafana dashboards) point at files in the repository."""
    for module in MODULES:
        for text in re.findall(r'file\("\$\{path\.module\}/([^"]+)"\)', json.dumps(module.blocks).replace('\\"', '"')):
            assert (module.path / text).resolve().is_file(), f"{module.name}: file {text} is missing"


# --- the Helm values the stacks pass to deploy/helm/sie ------------------------------------------------


def _tfvars(stack: str) -> dict[str, Any]:
    data = hcl2.loads((TERRAFORM / stack / "examples" / "terraform.tfvars.example").read_text())
    return {k: evaluate(v, Scope({}, {})) for k, v in data.items()}


def _root_scope(stack: str, overrides: dict[str, Any] | None = None) -> Scope:
    """A stack's variables as its example sets them (with the example's terraform.tfvars.example), then
    `overrides` (the stack's variables set otherwise)."""
    example, root = load_module(TERRAFORM / stack / "examples"), load_module(TERRAFORM / stack)
    example_scope = Scope(variable_scope(example, {**_tfvars(stack), **EXAMPLE_SECRETS}), example.locals)
    given = {**call_arguments(example, example.modules["sie"], example_scope), **(overrides or {})}
    return Scope(variable_scope(root, given), root.locals)


def _platform_scope(stack: str | None, overrides: dict[str, Any] | None = None) -> Scope:
    """sie-platform's variables as the example of a stack sets them (example -> stack -> shared module), with
    the stack's variables in `overrides` set otherwise; stack None: the shared module's own defaults with only
    its required inputs."""
    platform = load_module(PLATFORM)
    if stack is None:
        given = {"image_repository": "registry.example.com/sie-server", **EXAMPLE_SECRETS}
        return Scope(variable_scope(platform, given), platform.locals)
    root = load_module(TERRAFORM / stack)
    platform_given = call_arguments(root, root.modules["platform"], _root_scope(stack, overrides))
    return Scope(variable_scope(platform, platform_given), platform.locals)


def _values(scope: Scope) -> dict[str, Any]:
    values = evaluate(load_module(PLATFORM).locals["sie_values"], scope)
    assert not unresolved_paths(values), f"values that need a plan: {unresolved_paths(values)}"
    assert isinstance(values, dict)
    return values


@pytest.fixture(scope="module")
def chart_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return chart_copy(tmp_path_factory.mktemp("tfchart"))


@pytest.mark.parametrize("stack", [None, *STACKS])
def test_helm_values_validate_against_the_chart_schema(stack: str | None) -> None:
    values = _values(_platform_scope(stack))
    schema = json.loads((CHART / "values.schema.json").read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(merged(defaults, values))


def test_the_schema_check_catches_bad_pools() -> None:
    """The check above can fail: a pool the chart refuses, passed the way the stacks pass pools."""
    scope = _platform_scope("aws")
    scope.variables["pools"] = [{"name": "GPU_Pool", "device": "cuda", "gpus": 1, "vram": "24GiB"}]
    schema = json.loads((CHART / "values.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(schema).validate(_values(scope))


@pytest.fixture(scope="module", params=STACKS)
def stack_render(request: pytest.FixtureRequest, chart_dir: Path) -> tuple[str, Scope, Rendered]:
    stack: str = request.param
    scope = _platform_scope(stack)
    return (
        stack,
        scope,
        render(chart_dir, _values(scope), scope.variables["release_name"], scope.variables["namespace"]),
    )


def test_the_gateway_reads_its_tokens_from_the_secret_terraform_writes(
    stack_render: tuple[str, Scope, Rendered],
) -> None:
    _, scope, rendered = stack_render
    platform = load_module(PLATFORM)
    secret = evaluate(platform.locals["auth_secret_name"], scope)
    (auth_resource,) = [b for b in platform.blocks if '"auth"' in b and "data" in b['"auth"']]
    written_keys = set(auth_resource['"auth"']["data"])
    fullname = evaluate(platform.locals["fullname"], scope)
    env = {e["name"]: e for e in container(rendered.get("Deployment", f"{fullname}-gateway"))["env"]}
    ref = env["SIE_AUTH_TOKENS"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret and ref["key"] in written_keys
    values = _values(scope)  # the tokens never travel in the Helm values
    assert "tokens" not in values["auth"] and EXAMPLE_SECRETS["auth_tokens"][0] not in json.dumps(values)


def test_the_gateway_service_is_the_load_balancer_the_url_output_reads(
    stack_render: tuple[str, Scope, Rendered],
) -> None:
    stack, scope, rendered = stack_render
    fullname = evaluate(load_module(PLATFORM).locals["fullname"], scope)
    service = rendered.get("Service", f"{fullname}-gateway")
    assert service["spec"]["type"] == "LoadBalancer"
    internal = {"aws": ("service.beta.kubernetes.io/aws-load-balancer-scheme", "internal")}
    internal["gcp"] = ("networking.gke.io/load-balancer-type", "Internal")
    key, value = internal[stack]
    assert service["metadata"]["annotations"][key] == value
    # the output's data source looks up this Service by the same name
    data = json.dumps(load_module(PLATFORM).blocks)
    assert '"name": "\\"${local.fullname}-gateway\\""' in data


def _gpu_taints(stack: str) -> list[dict[str, str]]:
    root = load_module(TERRAFORM / stack)
    effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
    if stack == "aws":
        groups = evaluate(root.modules["eks"]["eks_managed_node_groups"], Scope({}, {}))
        taints = list(groups["gpu"]["taints"].values())
    else:
        (pool,) = [b['"gpu"'] for b in root.blocks if '"gpu"' in b and "node_config" in b['"gpu"']]
        taints = [evaluate(t, Scope({}, {})) for t in pool["node_config"][0]["taint"]]
    assert taints, f"{stack}: the GPU nodes carry no taint"
    return [{"key": t["key"], "value": t["value"], "effect": effect[t["effect"]]} for t in taints]


def _tolerates(tolerations: list[dict[str, str]], taint: dict[str, str]) -> bool:
    return any(
        t.get("key") == taint["key"]
        and t.get("effect", taint["effect"]) == taint["effect"]
        and (t.get("operator") == "Exists" or t.get("value") == taint["value"])
        for t in tolerations
    )


def test_gpu_workers_tolerate_the_gpu_nodes_and_cpu_workers_stay_off_them(
    stack_render: tuple[str, Scope, Rendered],
) -> None:
    stack, _, rendered = stack_render
    taints = _gpu_taints(stack)
    workers = [d for d in rendered.objects("Deployment") if d["metadata"]["name"].endswith(("-gpu", "-cpu"))]
    assert len(workers) == 2
    for worker in workers:
        spec = worker["spec"]["template"]["spec"]
        gpus = container(worker)["resources"].get("limits", {}).get("nvidia.com/gpu", 0)
        tolerated = all(_tolerates(spec.get("tolerations", []), taint) for taint in taints)
        assert tolerated == (gpus >= 1), f"{stack}: {worker['metadata']['name']} gpus={gpus} tolerated={tolerated}"


def test_gke_workload_identity_binds_the_service_account_the_chart_creates(chart_dir: Path) -> None:
    scope = _platform_scope("gcp")
    rendered = render(chart_dir, _values(scope), scope.variables["release_name"], scope.variables["namespace"])
    (account,) = rendered.objects("ServiceAccount")
    gcp = load_module(TERRAFORM / "gcp")
    email = evaluate(gcp.locals["workloads_sa_email"], _root_scope("gcp"))
    assert email == "sie-prod-workloads@my-ml-project.iam.gserviceaccount.com"
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == email
    (binding,) = [b['"workload_identity"'] for b in gcp.blocks if '"workload_identity"' in b]
    member = unquote(binding["member"])
    assert member.endswith("[${var.namespace}/${module.platform.service_account_name}]")
    assert account["metadata"]["namespace"] == scope.variables["namespace"]
    platform_output = load_module(PLATFORM).outputs["service_account_name"]["value"]
    assert evaluate(platform_output, scope) == account["metadata"]["name"]


# --- tools: checkov, terraform fmt -------------------------------------------------------------------


def _checkov_skips() -> list[tuple[str, str]]:
    lines = (TERRAFORM / ".checkov.yaml").read_text().splitlines()
    start = lines.index("skip-check:")
    entries = [re.fullmatch(r"\s+-\s+(\S+)\s*(?:#\s*(.*))?", line) for line in lines[start + 1 :]]
    return [(m.group(1), (m.group(2) or "").strip()) for m in entries if m]


def test_every_checkov_skip_has_a_reason() -> None:
    config = yaml.safe_load((TERRAFORM / ".checkov.yaml").read_text())
    skips = _checkov_skips()
    assert [check for check, _ in skips] == config["skip-check"]
    for check, reason in skips:
        assert len(reason) >= 30, f"{check}: no reason given"


@pytest.mark.skipif(not CHECKOV.exists(), reason="checkov's venv .venv-checkov is missing (make checkov-venv)")
def test_checkov_passes() -> None:
    result = subprocess.run(
        [str(CHECKOV), "-d", str(TERRAFORM), "--config-file", str(TERRAFORM / ".checkov.yaml"), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},  # with skip-download in the config: no network
    )
    reports = json.loads(result.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [
        f"{c['check_id']} {c['resource']} {c['file_path']}"
        for r in reports
        for c in r.get("results", {}).get("failed_checks", [])
    ]
    assert not failed, "\n".join(failed)
    summary = reports[0]["summary"]
    assert summary["parsing_errors"] == 0 and summary["passed"] > 50 and summary["resource_count"] > 20


TERRAFORM_BIN = shutil.which("terraform") or (
    "/usr/local/bin/terraform" if Path("/usr/local/bin/terraform").exists() else None
)


@pytest.mark.skipif(TERRAFORM_BIN is None, reason="no terraform binary on this machine")
def test_terraform_fmt_has_nothing_to_change() -> None:
    assert TERRAFORM_BIN is not None
    result = subprocess.run(
        [TERRAFORM_BIN, "fmt", "-check", "-recursive", "-diff", "-no-color", str(TERRAFORM)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CHECKPOINT_DISABLE": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
