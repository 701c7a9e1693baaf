"""deploy/grafana: dashboards are well-formed Grafana JSON, every query parses as PromQL and uses
only exported metrics (with the right suffixes and labels), and the JSON is the generator's output."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import promql_parser as promql  # a dev dependency
import pytest

from tests.deploy.exported_metrics import COUNTER, EXPORTED_METRICS, HISTOGRAM, series

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
DASHBOARDS = sorted(GRAFANA.glob("*.json"))
# Grafana replaces these before the query reaches Prometheus
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h"}
RANGE_FUNCTIONS = {"rate", "irate", "increase", "delta", "idelta", "deriv"}
COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}
SERIES = series()


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable's series selector."""
    found = []
    for panel in _panels(dashboard):
        for t in panel.get("targets", []):
            found.append((f"panel {panel['title']!r} {t['refId']}", t["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
            assert match, f"variable {var['name']}: expected label_values(SELECTOR, LABEL), got {query!r}"
            found.append((f"variable {var['name']!r}", f"count by ({match.group(2)}) ({match.group(1)})"))
    return found


def _parse(expr: str) -> Any:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return promql.parse(expr)


class Check:
    """Walks a parsed query: metric names, suffixes, functions and labels, collecting problems."""

    def __init__(self) -> None:
        self.listing = False  # inside count(): a raw counter only lists series
        self.problems: list[str] = []
        self.metrics: set[str] = set()

    def labels(self, node: Any, in_range_function: str | None = None) -> frozenset[str]:
        """The labels the node's series carry; records problems on the way."""
        kind = type(node).__name__
        if kind == "VectorSelector":
            return self.selector(node, in_range_function)
        if kind == "MatrixSelector":
            if in_range_function is None:
                self.problems.append(f"range selector {node.vector_selector.name}[...] outside a range function")
            return self.selector(node.vector_selector, in_range_function)
        if kind == "Call":
            name = node.func.name
            carried: frozenset[str] = frozenset()
            for arg in node.args:
                carried |= self.labels(arg, name if name in RANGE_FUNCTIONS or name.endswith("_over_time") else None)
            if name == "histogram_quantile" and "le" not in carried:
                self.problems.append("histogram_quantile over series without `le`")
            return carried
        if kind == "AggregateExpr":
            self.listing = str(node.op) == "count"
            inner = self.labels(node.expr)
            self.listing = False
            if node.param is not None:
                self.labels(node.param)
            if node.modifier is None:
                return frozenset()
            named = frozenset(node.modifier.labels)
            if named - inner:
                self.problems.append(f"{node.op} by/without {sorted(named - inner)}: not labels of its input")
            return named if str(node.modifier.type).endswith("By") else inner - named
        if kind == "BinaryExpr":
            return self.labels(node.lhs) | self.labels(node.rhs)
        if kind in {"ParenExpr", "UnaryExpr"}:
            return self.labels(node.expr, in_range_function)
        if kind == "SubqueryExpr":
            return self.labels(node.expr)
        if kind in {"NumberLiteral", "StringLiteral"}:
            return frozenset()
        self.problems.append(f"unexpected PromQL node {kind}")
        return frozenset()

    def selector(self, node: Any, in_range_function: str | None) -> frozenset[str]:
        name = node.name
        if not name:
            self.problems.append("a selector without a metric name")
            return frozenset()
        if name not in SERIES:
            self.problems.append(f"{name} is not an exported series ({_hint(name)})")
            return frozenset()
        metric, kind, carried = SERIES[name]
        self.metrics.add(metric)
        for matcher in node.matchers.matchers:
            if matcher.name not in carried:
                self.problems.append(f"{name}{{{matcher.name}...}}: {metric} has no label {matcher.name}")
        counter_like = kind == COUNTER or (kind == HISTOGRAM and name != metric)
        if in_range_function in COUNTER_FUNCTIONS and not counter_like:
            self.problems.append(f"{in_range_function}() of the gauge {name}")
        if counter_like and in_range_function is None and not self.listing:
            self.problems.append(f"{name} is a counter: use rate() or increase(), not its raw value")
        return carried


def _hint(name: str) -> str:
    kinds = {n: k for n, k, _ in EXPORTED_METRICS}
    base = re.sub(r"_(bucket|sum|count|total)$", "", name)
    if base in kinds:
        return f"{base} is a {kinds[base]}"
    if f"{base}_total" in kinds:
        return f"{base}_total is the counter"
    return "not in EXPORTED_METRICS"


@pytest.fixture(params=[p.name for p in DASHBOARDS])
def dashboard(request: pytest.FixtureRequest) -> dict[str, Any]:
    return _load(GRAFANA / request.param)


def test_dashboards_exist() -> None:
    assert {p.name for p in DASHBOARDS} == {"sie-engine.json", "sie-cluster.json"}


def test_dashboard_structure(dashboard: dict[str, Any]) -> None:
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", dashboard["uid"])
    assert dashboard["title"] and "sie" in dashboard["tags"]
    assert dashboard["time"] == {"from": "now-1h", "to": "now"}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = _panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["w"] >= 1 and pos["h"] >= 1 and pos["x"] >= 0 and pos["y"] >= 0
        assert pos["x"] + pos["w"] <= 24, f"panel {panel['title']!r} is wider than the grid"
        covered = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not covered & cells, f"panel {panel['title']!r} overlaps another"
        cells |= covered
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "stat", "gauge", "bargauge", "table", "heatmap"}
        assert panel["title"] and panel.get("description")
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs))
        for t in panel["targets"]:
            assert t["datasource"] == panel["datasource"]
            assert t["expr"].strip()
        # every $variable a query uses is defined
        for t in panel["targets"]:
            for used in re.findall(r"\$(\w+)", t["expr"]):
                assert used.startswith("__") or used in variables, f"{panel['title']!r} uses undefined ${used}"


def test_queries_use_only_exported_metrics(dashboard: dict[str, Any]) -> None:
    problems = []
    for where, expr in _queries(dashboard):
        try:
            tree = _parse(expr)
        except ValueError as exc:
            problems.append(f"{where}: does not parse ({exc}): {expr}")
            continue
        check = Check()
        check.labels(tree)
        problems += [f"{where}: {p}: {expr}" for p in check.problems]
    assert problems == []


def test_every_exported_metric_has_a_panel() -> None:
    used: set[str] = set()
    for path in DASHBOARDS:
        for _, expr in _queries(_load(path)):
            check = Check()
            check.labels(_parse(expr))
            used |= check.metrics
    assert {name for name, _, _ in EXPORTED_METRICS} - used == set()


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("sum(rate(sie_request_total[5m]))", "not an exported series"),
        ("rate(sie_requests[5m])", "sie_requests_total is the counter"),
        ("sie_request_duration_seconds", "is a histogram"),
        ("sum(rate(sie_queue_items[5m]))", "of the gauge"),
        ("sie_requests_total", "use rate()"),
        ("histogram_quantile(0.9, sum by (model) (rate(sie_batch_items_bucket[5m])))", "without `le`"),
        ("sum by (modle) (rate(sie_requests_total[5m]))", "not labels of its input"),
        ('sie_queue_items{pirority="batch"}', "has no label"),
    ],
)
def test_the_check_catches(expr: str, problem: str) -> None:
    check = Check()
    check.labels(_parse(expr))
    assert any(problem in p for p in check.problems), check.problems


def test_dashboards_are_the_generators_output() -> None:
    spec = importlib.util.spec_from_file_location("build_dashboards", GRAFANA / "build_dashboards.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, build in module.DASHBOARDS.items():
        assert (GRAFANA / name).read_text() == module.render(build), (
            f"{name} is stale: run deploy/grafana/build_dashboards.py"
        )
