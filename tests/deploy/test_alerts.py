"""SIE's alert rules (deploy/prometheus/build_rules.py): the plain rules file and the chart's
PrometheusRule are the generator's output and carry the same rules for default values; thresholds
come from the chart's values; every expression parses and uses only exported series and their
labels; every rule fires and stays quiet where it should (``promtool test rules`` on
tests/deploy/alerts/, when promtool is installed: ``make test`` installs Debian's package)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import helm_python as helm
import jsonschema
import pytest
import yaml

from tests.deploy.chart import NAMESPACE, fullname, render
from tests.deploy.test_grafana import Check, _parse

REPO = Path(__file__).resolve().parents[2]
ALERT_TESTS = sorted((REPO / "tests" / "deploy" / "alerts").glob("*.test.yaml"))
README = REPO / "deploy" / "README.md"
SEVERITIES = {"critical", "warning"}
DURATION = r"^([0-9]+(ms|s|m|h|d|w|y))+$"

# The Prometheus Operator's PrometheusRule (monitoring.coreos.com/v1), the fields this chart uses
PROMETHEUS_RULE: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": DURATION},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string", "pattern": DURATION},
                                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def _builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_rules", REPO / "deploy" / "prometheus" / "build_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BUILD = _builder()


def _plain_rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(BUILD.RULES_FILE.read_text())
    rules: list[dict[str, Any]] = [rule for group in data["groups"] for rule in group["rules"]]
    return rules


def _rendered_rule(chart_dir: Path, alerts: dict[str, Any]) -> dict[str, Any]:
    found = render(chart_dir, {"alerts": alerts}).objects("PrometheusRule")
    assert len(found) == 1
    return found[0]


# --- written once ---------------------------------------------------------------------------


def test_written_files_are_the_generators_output() -> None:
    assert BUILD.main(["--check"]) == 0, "run .venv/bin/python deploy/prometheus/build_rules.py"


def test_chart_renders_the_plain_files_rules_for_default_values(chart_dir: Path) -> None:
    rule = _rendered_rule(chart_dir, {"enabled": True})
    jsonschema.Draft7Validator(PROMETHEUS_RULE).validate(rule)
    assert rule["metadata"]["name"] == fullname()
    assert rule["metadata"]["namespace"] == NAMESPACE
    assert rule["spec"] == yaml.safe_load(BUILD.RULES_FILE.read_text())


def test_no_prometheus_rule_unless_enabled(chart_dir: Path) -> None:
    assert render(chart_dir, {}).objects("PrometheusRule") == []


def test_thresholds_and_labels_come_from_values(chart_dir: Path) -> None:
    alerts = {
        "enabled": True,
        "labels": {"release": "kube-prometheus-stack"},
        "interactiveP99Seconds": 0.75,
        "memoryNearFullFraction": 0.8,
        "memoryNearFullFor": "30m",
        "scaledToZeroFor": "3m",
    }
    rendered = _rendered_rule(chart_dir, alerts)
    assert rendered["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rules = {r["alert"]: r for g in rendered["spec"]["groups"] for r in g["rules"]}
    assert rules["SIEInteractiveLatencyHigh"]["expr"].endswith("> 0.75")
    assert rules["SIEMemoryBudgetNearFull"]["expr"].endswith("> 0.8")
    assert rules["SIEMemoryBudgetNearFull"]["for"] == "30m"
    assert rules["SIEPoolScaledToZeroWithPendingWork"]["for"] == "3m"
    assert "for 3m" in rules["SIEPoolScaledToZeroWithPendingWork"]["annotations"]["summary"]
    # Prometheus' own templates reach Prometheus untouched by Helm
    assert "{{ $labels.pool }}" in rules["SIEDeadLetters"]["annotations"]["summary"]


@pytest.mark.parametrize(
    "alerts",
    [
        {"memoryNearFullFraction": 1.5},
        {"scaledToZeroFor": "10 minutes"},
        {"interactiveP99Seconds": 0},
        {"interactiveP99s": 2},  # a typo
    ],
)
def test_values_schema_refuses(chart_dir: Path, alerts: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError, match="schema"):
        render(chart_dir, {"alerts": {"enabled": True, **alerts}})


# --- the rules themselves -------------------------------------------------------------------

EXPECTED = {
    "SIEQueueGrowingWithoutWorkers",
    "SIEPoolScaledToZeroWithPendingWork",
    "SIEInteractiveLatencyHigh",
    "SIEModelLoadFailed",
    "SIEOutOfMemorySplits",
    "SIEMemoryBudgetNearFull",
    "SIEDeadLetters",
}


def _binary_matching(node: Any) -> list[tuple[list[str], Any]]:
    """(on/ignoring labels, the binary expression) of every vector matching in the tree."""
    found = []
    kind = type(node).__name__
    if kind == "BinaryExpr":
        modifier = node.modifier
        if modifier is not None and modifier.matching is not None:
            found.append((list(modifier.matching.labels), node))
        found += _binary_matching(node.lhs) + _binary_matching(node.rhs)
    for attribute in ("expr",):
        child = getattr(node, attribute, None)
        if child is not None and kind in {"ParenExpr", "UnaryExpr", "AggregateExpr", "SubqueryExpr"}:
            found += _binary_matching(child)
    if kind == "Call":
        for arg in node.args:
            found += _binary_matching(arg)
    return found


def test_every_rule_parses_and_uses_exported_series_and_labels() -> None:
    problems = []
    for rule in _plain_rules():
        check = Check()
        tree = _parse(rule["expr"])
        check.labels(tree)
        for matching, node in _binary_matching(tree):
            sides = Check().labels(node.lhs) & Check().labels(node.rhs)
            if set(matching) - sides:
                problems.append(f"on/ignoring {sorted(set(matching) - sides)}: not labels of both sides")
        problems += [f"{rule['alert']}: {p}" for p in check.problems]
    assert problems == []


def test_the_label_check_catches_a_matching_label_one_side_lacks() -> None:
    tree = _parse("sum by (pool) (rate(sie_oom_total[5m])) and on (model) sum by (model) (rate(sie_oom_total[5m]))")
    [(matching, node)] = _binary_matching(tree)
    assert matching == ["model"]
    assert "model" not in Check().labels(node.lhs)


def test_every_rule_has_for_severity_summary_and_a_runbook_step() -> None:
    rules = _plain_rules()
    assert {r["alert"] for r in rules} == EXPECTED
    readme = README.read_text()
    for rule in rules:
        name = rule["alert"]
        assert rule["for"], name
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert rule["annotations"]["summary"], name
        assert f"Runbook: deploy/README.md, Alerts > {name}." in rule["annotations"]["description"], name
        assert f"#### {name}" in readme, f"deploy/README.md has no runbook step for {name}"


# --- promtool ---------------------------------------------------------------------------------

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="no promtool: `make test` installs it (Debian's prometheus package) where apt-get is; "
    "or run: apt-get install -y prometheus",
)


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)


@needs_promtool
def test_promtool_checks_the_rules_file() -> None:
    result = _promtool("check", "rules", str(BUILD.RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(EXPECTED)} rules found" in result.stdout


@needs_promtool
def test_every_rule_is_unit_tested() -> None:
    tested = set()
    for path in ALERT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                tested.add((check["alertname"], bool(check.get("exp_alerts"))))
    assert {(name, fires) for name in EXPECTED for fires in (True, False)} <= tested


@needs_promtool
@pytest.mark.parametrize("path", ALERT_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(path: Path) -> None:
    result = _promtool("test", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_catch_a_wrong_threshold(tmp_path: Path) -> None:
    """The same tests against rules written with a 10 s objective: the latency case must fail."""
    (tmp_path / "deploy" / "prometheus").mkdir(parents=True)
    thresholds = {**BUILD.defaults(), "interactiveP99Seconds": 10}
    (tmp_path / "deploy" / "prometheus" / "sie-alerts.yaml").write_text(BUILD.plain(thresholds))
    tests = tmp_path / "tests" / "deploy" / "alerts"
    tests.mkdir(parents=True)
    for path in ALERT_TESTS:
        shutil.copy(path, tests / path.name)
    result = _promtool("test", "rules", *(str(tests / p.name) for p in ALERT_TESTS))
    assert result.returncode != 0
    assert "alertname: SIEInteractiveLatencyHigh" in result.stdout + result.stderr
    assert "alertname: SIEDeadLetters" not in result.stdout + result.stderr


def test_lint_strict_with_alerts_enabled(chart_dir: Path) -> None:
    values = {"alerts": {"enabled": True, "labels": {"release": "prometheus"}}}
    report = helm.lint(chart_dir, values, strict=True, kube_version="v1.30.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []
