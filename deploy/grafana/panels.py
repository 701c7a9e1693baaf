"""The parts every dashboard is made of: query targets, timeseries and stat panels, the row layout,
template variables and the dashboard frame. Standard library only."""

from __future__ import annotations

from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
SCHEMA_VERSION = 39
GRID_WIDTH = 24

Panel = dict[str, Any]


def target(expr: str, legend: str = "", ref: str = "A") -> dict[str, Any]:
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "range": True, "refId": ref}


def targets(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def timeseries(title: str, description: str, unit: str, *pairs: tuple[str, str], stack: bool = False) -> Panel:
    custom: dict[str, Any] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}
    if stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom}, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets(*pairs),
    }


def stat(title: str, description: str, unit: str, expr: str) -> Panel:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "area",
            "textMode": "auto",
        },
        "targets": targets((expr, "")),
    }


def quantiles(metric: str, by: str, selector: str, legend: str) -> list[tuple[str, str]]:
    """p50 and p99 of a histogram, per `by` labels."""
    return [
        (
            f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{selector}[{RATE}])))",
            f"p{int(q * 100)} {legend}",
        )
        for q in (0.5, 0.99)
    ]


def layout(sections: list[tuple[str, list[Panel], int]]) -> list[Panel]:
    """Rows of panels: each section is a row header and its panels, `per_row` abreast."""
    panels: list[Panel] = []
    y = 0
    for title, section, per_row in sections:
        panels.append(
            {"type": "row", "title": title, "collapsed": False, "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y}}
        )
        y += 1
        width = GRID_WIDTH // per_row
        height = 4 if all(p["type"] == "stat" for p in section) else 8
        for i, panel in enumerate(section):
            panel["gridPos"] = {"h": height, "w": width, "x": (i % per_row) * width, "y": y + (i // per_row) * height}
        y += ((len(section) + per_row - 1) // per_row) * height
        panels.extend(section)
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
        if panel["type"] == "row":
            panel["panels"] = []
    return panels


def variable_datasource() -> dict[str, Any]:
    return {
        "type": "datasource",
        "name": "datasource",
        "label": "Data source",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def variable_query(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-values"},
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": 0,
        "regex": "",
        "options": [],
    }


def dashboard(uid: str, title: str, description: str, variables: list[dict[str, Any]], panels: list[Panel]) -> Any:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["sie"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timepicker": {},
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {"list": [variable_datasource(), *variables]},
        "panels": panels,
    }
