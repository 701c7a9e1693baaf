"""Writes SIE's Prometheus alert rules, from the one list below, twice:

- ``deploy/prometheus/sie-alerts.yaml``: a plain rules file (``rule_files:``), thresholds at the chart's
  defaults (the ``alerts`` block of deploy/helm/sie/values.yaml);
- ``deploy/helm/sie/templates/prometheusrule.yaml``: the same rules as a Prometheus Operator
  PrometheusRule, rendered when ``alerts.enabled``, thresholds from ``.Values.alerts``.

Run it after editing a rule or a default: ``.venv/bin/python deploy/prometheus/build_rules.py``
(``--check`` fails when a written file differs). tests/deploy/test_alerts.py checks both files are its
output, that the chart renders the plain file's rules for default values, and runs ``promtool test
rules`` on tests/deploy/alerts/. Runbook: deploy/README.md, "Alerts".
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES_FILE = REPO / "deploy" / "prometheus" / "sie-alerts.yaml"
TEMPLATE = REPO / "deploy" / "helm" / "sie" / "templates" / "prometheusrule.yaml"
VALUES = REPO / "deploy" / "helm" / "sie" / "values.yaml"
GROUP = "sie"
RUNBOOK = "deploy/README.md, Alerts"

# Thresholds are written <<name>>: the name of a key in the chart's `alerts` values.
THRESHOLD = re.compile(r"<<(\w+)>>")

# pending work per pool: the most any gateway replica reports for each stream, summed over priorities
PENDING = "sum by (pool) (max by (pool, priority) (sie_gateway_pending_items))"
NO_WORKERS = "on (pool) (max by (pool) (sie_gateway_workers) == 0)"


def _rule(name: str, expr: str, for_: str, severity: str, summary: str, description: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": f"{description} Runbook: {RUNBOOK} > {name}."},
    }


RULES: list[dict[str, Any]] = [
    _rule(
        "SIEQueueGrowingWithoutWorkers",
        f"(sum by (pool) (max by (pool, priority) (deriv(sie_gateway_pending_items[5m]))) > 0) and {NO_WORKERS}",
        "5m",
        "critical",
        "Pool {{ $labels.pool }}: work keeps arriving and no worker is up",
        "The pending work of pool {{ $labels.pool }} has grown for 5 minutes while the gateway sees no live "
        "worker of it: KEDA is not scaling the pool up, or its pods do not start.",
    ),
    _rule(
        "SIEPoolScaledToZeroWithPendingWork",
        f"({PENDING} > 0) and {NO_WORKERS}",
        "<<scaledToZeroFor>>",
        "critical",
        "Pool {{ $labels.pool }} has pending work and no worker for <<scaledToZeroFor>>",
        "{{ $value }} work messages wait in the streams of pool {{ $labels.pool }} and no worker of it has been "
        "up for longer than a cold start should take (alerts.scaledToZeroFor); requests past the gateway's "
        "holdSeconds already fail.",
    ),
    _rule(
        "SIEInteractiveLatencyHigh",
        "histogram_quantile(0.99, sum by (pool, le) "
        '(rate(sie_gateway_work_seconds_bucket{priority="interactive"}[5m]))) > <<interactiveP99Seconds>>',
        "10m",
        "warning",
        "Pool {{ $labels.pool }}: interactive p99 is {{ $value | humanizeDuration }}",
        "The 99th percentile of interactive work in pool {{ $labels.pool }}, from the gateway publishing it to "
        "its first answer, has been over the objective of <<interactiveP99Seconds>> s (alerts.interactiveP99Seconds) "
        "for 10 minutes.",
    ),
    _rule(
        "SIEModelLoadFailed",
        'max by (pool, model) (max_over_time(sie_gateway_model_workers{state="failed"}[2m])) > 0',
        "5m",
        "warning",
        "Model {{ $labels.model }} fails to load in pool {{ $labels.pool }}",
        "Workers of pool {{ $labels.pool }} have reported model {{ $labels.model }} as failed to load for 5 "
        "minutes; its requests get 502 MODEL_LOAD_FAILED.",
    ),
    _rule(
        "SIEOutOfMemorySplits",
        "sum by (pool, model) (increase(sie_oom_total[15m])) > 0",
        "1m",
        "warning",
        "Model {{ $labels.model }} ran out of memory in pool {{ $labels.pool }}",
        "Batches of model {{ $labels.model }} in pool {{ $labels.pool }} ran out of device memory in the last 15 "
        "minutes (about {{ $value | humanize }} batches) and were split and run again: each split costs latency, "
        "and an item that does not fit alone fails.",
    ),
    _rule(
        "SIEMemoryBudgetNearFull",
        "sie_memory_used_bytes / (sie_memory_budget_bytes > 0) > <<memoryNearFullFraction>>",
        "<<memoryNearFullFor>>",
        "warning",
        "{{ $labels.instance }} uses {{ $value | humanizePercentage }} of its memory budget",
        "Memory counted against the budget of {{ $labels.instance }} (pool {{ $labels.pool }}) has been over "
        "<<memoryNearFullFraction>> of it (alerts.memoryNearFullFraction) for <<memoryNearFullFor>>: every new "
        "model load evicts another, and memory the models do not account for (untracked) may be growing.",
    ),
    _rule(
        "SIEDeadLetters",
        "max by (pool) (sie_gateway_dead_letters - min_over_time(sie_gateway_dead_letters[15m])) > 0",
        "1m",
        "warning",
        "Pool {{ $labels.pool }}: work was dead-lettered",
        "{{ $value }} work messages of pool {{ $labels.pool }} went to the dead-letter stream in the last 15 "
        "minutes: they were delivered max_deliver times without an answer (workers crashing or killed on them), "
        "and their callers got an error.",
    ),
]


def defaults() -> dict[str, Any]:
    """The chart's `alerts` values: the thresholds the plain rules file is written with."""
    values = yaml.safe_load(VALUES.read_text())
    alerts: dict[str, Any] = values["alerts"]
    return alerts


def _dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, width=10**6, allow_unicode=True)


def _groups() -> dict[str, Any]:
    return {"groups": [{"name": GROUP, "rules": RULES}]}


def plain(thresholds: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        return str(thresholds[match.group(1)])

    text = THRESHOLD.sub(value, _dump(_groups()))
    return (
        "# Generated by deploy/prometheus/build_rules.py (edit the rules there; runbook: deploy/README.md, Alerts).\n"
        + text
    )


def template() -> str:
    # Prometheus' own {{ ... }} in annotations pass through Helm as raw strings
    body = re.sub(r"(\{\{.*?\}\})", r"{{`\1`}}", _dump(_groups()))
    body = THRESHOLD.sub(r"{{ .Values.alerts.\1 }}", body)
    spec = "".join(f"  {line}\n" for line in body.splitlines())
    return (
        "{{- if .Values.alerts.enabled }}\n"
        "# Generated by deploy/prometheus/build_rules.py (edit the rules there; runbook: deploy/README.md, Alerts).\n"
        "apiVersion: monitoring.coreos.com/v1\n"
        "kind: PrometheusRule\n"
        "metadata:\n"
        '  name: {{ include "sie.fullname" . }}\n'
        "  namespace: {{ .Release.Namespace }}\n"
        "  labels:\n"
        '    {{- include "sie.labels" . | nindent 4 }}\n'
        "    {{- with .Values.alerts.labels }}\n"
        "    {{- toYaml . | nindent 4 }}\n"
        "    {{- end }}\n"
        "spec:\n" + spec + "{{- end }}\n"
    )


def outputs() -> dict[Path, str]:
    return {RULES_FILE: plain(defaults()), TEMPLATE: template()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail when a written file is not the current output")
    args = parser.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO)))
        else:
            path.write_text(text)
    if stale:
        print(f"out of date (run deploy/prometheus/build_rules.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
